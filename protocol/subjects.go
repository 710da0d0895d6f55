package protocol

import (
	"fmt"
	"regexp"
	"strings"
)

// Version is the protocol version carried in every subject.
const Version = "v1"

// Agent → coordinator verbs, on edge.v1.coord.<agent_id>.<verb>.
const (
	VerbHello     = "hello"
	VerbHeartbeat = "heartbeat"
	VerbRenew     = "renew"
	VerbUpload    = "upload"
	VerbArtifact  = "artifact"
	VerbResult    = "result"
	VerbFail      = "fail"
)

// Coordinator → agent verbs, on edge.v1.agent.<agent_id>.<verb>.
const (
	VerbAssign  = "assign"
	VerbRevoke  = "revoke"
	VerbControl = "control"
)

// CoordVerbs lists every verb the coordinator serves.
var CoordVerbs = []string{VerbHello, VerbHeartbeat, VerbRenew, VerbUpload, VerbArtifact, VerbResult, VerbFail, VerbEffect}

var agentIDRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidateAgentID checks that id can stand in one subject token.
func ValidateAgentID(id string) error {
	if !agentIDRe.MatchString(id) {
		return fmt.Errorf("invalid agent id %q: want 1-64 of [A-Za-z0-9_-]", id)
	}
	return nil
}

// MaxJobIDLen is the longest job id (docs/protocol.md section 2).
const MaxJobIDLen = 64

var jobIDRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// CheckJobID accepts the job ids of docs/protocol.md section 2: 1 to 64
// characters of [A-Za-z0-9_-], so that an id is one NATS subject token and
// one element of an object key (jobs/<job_id>/g<generation>/<name>): no
// '/', '.', space or other character can make a job's objects land under
// another job's prefix. Every store's Submit, the agent's assign and the
// uploaders check it.
func CheckJobID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("invalid job id: empty")
	case len(id) > MaxJobIDLen:
		return fmt.Errorf("invalid job id %q…: %d bytes, at most %d of [A-Za-z0-9_-]", id[:16], len(id), MaxJobIDLen)
	case !jobIDRe.MatchString(id):
		return fmt.Errorf("invalid job id %q: want 1-%d of [A-Za-z0-9_-]", id, MaxJobIDLen)
	}
	return nil
}

// CoordSubject is the subject an agent sends verb on.
func CoordSubject(agentID, verb string) string {
	return "edge." + Version + ".coord." + agentID + "." + verb
}

// AgentSubject is the subject the coordinator sends verb to agentID on.
func AgentSubject(agentID, verb string) string {
	return "edge." + Version + ".agent." + agentID + "." + verb
}

// CoordWildcard is the subject the coordinator subscribes to for verb.
func CoordWildcard(verb string) string { return "edge." + Version + ".coord.*." + verb }

// InboxPrefix is the agent's own reply inbox prefix.
func InboxPrefix(agentID string) string { return "_INBOX." + agentID }

// ParseCoordSubject returns the agent id and verb of an agent → coordinator
// subject.
func ParseCoordSubject(subj string) (agentID, verb string, err error) {
	p := strings.Split(subj, ".")
	if len(p) != 5 || p[0] != "edge" || p[1] != Version || p[2] != "coord" {
		return "", "", fmt.Errorf("parse subject %q: want edge.%s.coord.<agent_id>.<verb>", subj, Version)
	}
	if err := ValidateAgentID(p[3]); err != nil {
		return "", "", fmt.Errorf("parse subject %q: %w", subj, err)
	}
	return p[3], p[4], nil
}
