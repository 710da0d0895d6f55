//go:build !windows

package config

// Platform defaults.
const (
	// DefaultAgentFile is where edgeagent looks for its config file.
	DefaultAgentFile = "/etc/edgeagent/config.yaml"
	// DefaultCoordinatorFile is where edgecoord looks for its config file.
	DefaultCoordinatorFile = "/etc/edgecoord/config.yaml"

	defaultStateDir = "/var/lib/edgeagent"
)
