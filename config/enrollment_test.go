package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestEnrollmentConfig: the enrollment keys default to off, 24h and 10 a
// minute; nats_dir is read relative to nothing but must be a directory,
// agent_nats_url a NATS URL, code_expiry within 720h and rate positive,
// each problem naming its key.
func TestEnrollmentConfig(t *testing.T) {
	base := "nats:\n  url: nats://h:4222\n"
	c, err := ParseCoordinator("c.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if c.Enrollment.Enabled() || c.Enrollment.CodeExpiry.Duration() != 24*time.Hour || c.Enrollment.Rate != 10 || c.AgentURL() != "nats://h:4222" {
		t.Fatalf("defaults %+v, agent url %s", c.Enrollment, c.AgentURL())
	}
	dir := t.TempDir()
	c, err = ParseCoordinator("c.yaml", []byte(base+"enrollment:\n  nats_dir: "+dir+"\n  agent_nats_url: tls://nats.example.com:4222\n  code_expiry: 1h\n  rate: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Enrollment.Enabled() || c.AgentURL() != "tls://nats.example.com:4222" || c.Enrollment.CodeExpiry.Duration() != time.Hour || c.Enrollment.Rate != 3 {
		t.Fatalf("set %+v", c.Enrollment)
	}
	_, err = ParseCoordinator("c.yaml", []byte(base+"enrollment:\n  nats_dir: "+dir+"/missing\n  agent_nats_url: http://x\n  code_expiry: 721h\n  rate: 0\n  update_public_key: ssh-ed25519 AAAA\n"))
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want problems, got %v", err)
	}
	for _, key := range []string{"enrollment.nats_dir", "enrollment.agent_nats_url", "enrollment.code_expiry", "enrollment.rate", "enrollment.update_public_key"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("no problem names %s: %v", key, err)
		}
	}
}
