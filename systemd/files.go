package systemd

import _ "embed" // the unit files

// AgentUnit is edgeagent.service: the edgeagent unit as the .deb installs
// it, and the template `edgeagent install` renders.
//
//go:embed edgeagent.service
var AgentUnit string

// CoordinatorUnit is edgecoord.service.
//
//go:embed edgecoord.service
var CoordinatorUnit string

// AgentSysusers is sysusers.d/edgeagent.conf: the edgeagent user, a member
// of plugdev.
//
//go:embed sysusers.d/edgeagent.conf
var AgentSysusers string

// AgentTmpfiles is tmpfiles.d/edgeagent.conf: /etc/edgeagent and
// /var/lib/edgeagent with their owners and modes.
//
//go:embed tmpfiles.d/edgeagent.conf
var AgentTmpfiles string

// Defaults written in AgentUnit.
const (
	AgentBinary   = "/usr/bin/edgeagent"
	AgentConfig   = "/etc/edgeagent/config.yaml"
	AgentUser     = "edgeagent"
	AgentStateDir = "/var/lib/edgeagent"
)
