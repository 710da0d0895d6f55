package config

import (
	"os"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

// CoordinatorEnrollment configures agent enrollment and the agents' own
// NATS identities (docs/operations.md, "Add a PC"): with NATSDir set the
// coordinator issues every enrolled agent a NATS user of its own and
// revokes it with `edgecoord agent revoke`. Optional: without it agents
// keep the static users of examples/nats-server.conf.
type CoordinatorEnrollment struct {
	// NATSDir is the directory `edgecoord nats init` wrote: the agents'
	// account and its signing key, the operator's signing key and the
	// system user that pushes the account to the NATS server. Empty (the
	// default): no enrollment.
	NATSDir string `yaml:"nats_dir" json:"nats_dir"`
	// AgentNATSURL is the NATS server URL (or several, comma-separated)
	// written into an enrolled agent's config. Default nats.url.
	AgentNATSURL string `yaml:"agent_nats_url" json:"agent_nats_url"`
	// CodeExpiry is how long a code of `edgecoord agent enroll` stays
	// good when --expires is not given. Default 24h; at most 720h.
	CodeExpiry Duration `yaml:"code_expiry" json:"code_expiry"`
	// Rate is how many enrollment requests one remote address may make
	// per minute; past it POST /api/v1/enroll answers 429. Default 10.
	Rate int `yaml:"rate" json:"rate"`
	// UpdatePublicKey is the public key agent releases are signed with
	// (what `edgecoord release keygen` prints): an enrolled agent's config
	// gets it as update.public_key. Empty: enrolled agents refuse updates
	// until it is set on them.
	UpdatePublicKey string `yaml:"update_public_key" json:"update_public_key,omitempty"`
}

// MaxCodeExpiry bounds enrollment.code_expiry and --expires.
const MaxCodeExpiry = Duration(720 * time.Hour)

// Enabled reports whether enrollment is configured.
func (e CoordinatorEnrollment) Enabled() bool { return e.NATSDir != "" }

func defaultEnrollment() CoordinatorEnrollment {
	return CoordinatorEnrollment{CodeExpiry: Duration(24 * time.Hour), Rate: 10}
}

func (e CoordinatorEnrollment) validate(ps *Problems, path string) {
	if e.NATSDir != "" {
		if fi, err := os.Stat(e.NATSDir); err != nil || !fi.IsDir() {
			ps.add(path+".nats_dir", "%s is not a directory: run edgecoord nats init --dir %s first", e.NATSDir, e.NATSDir)
		}
	}
	if e.AgentNATSURL != "" {
		(NATS{URL: e.AgentNATSURL}).validateURL(ps, path+".agent_nats_url")
	}
	if e.CodeExpiry <= 0 || e.CodeExpiry > MaxCodeExpiry {
		ps.add(path+".code_expiry", "must be positive and at most %s, got %s", MaxCodeExpiry, e.CodeExpiry)
	}
	if e.UpdatePublicKey != "" {
		if _, err := protocol.ParseReleaseKey(e.UpdatePublicKey); err != nil {
			ps.add(path+".update_public_key", "%v (edgecoord release keygen prints one)", err)
		}
	}
	if e.Rate < 1 {
		ps.add(path+".rate", "must be at least 1 request per minute, got %d", e.Rate)
	}
}

// AgentURL is the NATS URL enrolled agents are given: AgentNATSURL, or
// nats.url.
func (c *Coordinator) AgentURL() string {
	if c.Enrollment.AgentNATSURL != "" {
		return c.Enrollment.AgentNATSURL
	}
	return c.NATS.URL
}
