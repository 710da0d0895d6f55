package config

import (
	"crypto/ed25519"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

// TestDecodeUpdate: update has its defaults (auto, 10m drain, 2m health,
// no key), takes a release public key in its text form, and refuses a key
// that is not one and durations that are not positive, naming the field.
func TestDecodeUpdate(t *testing.T) {
	a, probs := decodeAgent(t, "agent_id: a\n", nil)
	if len(probs) != 0 || !a.Update.Auto || a.Update.PublicKey != "" ||
		a.Update.DrainTimeout.Duration() != 10*time.Minute || a.Update.HealthTimeout.Duration() != 2*time.Minute {
		t.Errorf("defaults: %+v, problems %v", a.Update, probs)
	}
	pub, _, _ := ed25519.GenerateKey(nil)
	key := protocol.FormatReleaseKey(pub)
	a, probs = decodeAgent(t, "update:\n  auto: false\n  public_key: "+key+"\n  drain_timeout: 30s\n  health_timeout: 1m\n", nil)
	if len(probs) != 0 || a.Update.Auto || a.Update.PublicKey != key || a.Update.DrainTimeout.Duration() != 30*time.Second {
		t.Errorf("set: %+v, problems %v", a.Update, probs)
	}
	cfg := DefaultAgent()
	cfg.AgentID, cfg.NATS.URL = "a", "nats://h:4222"
	cfg.Storage.Mode = StoragePresigned
	cfg.Update.PublicKey = "ssh-ed25519 AAAA"
	cfg.Update.DrainTimeout, cfg.Update.HealthTimeout = 0, -1
	err := cfg.Validate()
	for _, want := range []string{"update.public_key: not a release public key", "update.drain_timeout: must be positive", "update.health_timeout: must be positive"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate: %v, want %q", err, want)
		}
	}
	for src, want := range map[string]string{
		"update:\n  auto: maybe\n": `f.yaml:2:9: update.auto: expected true or false, got a string "maybe"`,
	} {
		if _, probs := decodeAgent(t, src, nil); !slices.Equal(probs, []string{want}) {
			t.Errorf("%q: problems\n  %s\nwant\n  %s", src, strings.Join(probs, "\n  "), want)
		}
	}
}
