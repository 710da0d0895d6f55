package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

func rel(goos, goarch string) jobstore.ReleaseRecord {
	return jobstore.ReleaseRecord{Release: protocol.Release{Version: "v1.1.0", OS: goos, Arch: goarch}}
}

// TestPickRelease: an agent gets the binary of the platform it announces;
// one that announces none gets the release's only binary, and nothing
// when there are several; a platform the release has no binary for is
// said.
func TestPickRelease(t *testing.T) {
	linux, win := rel("linux", "amd64"), rel("windows", "amd64")
	caps := []string{"screenshot", protocol.PlatformCapability("windows", "amd64")}
	if got, why := pickRelease([]jobstore.ReleaseRecord{linux, win}, caps); why != "" || got != win {
		t.Errorf("windows/amd64: %+v %q", got, why)
	}
	if got, why := pickRelease([]jobstore.ReleaseRecord{linux}, []string{"screenshot"}); why != "" || got != linux {
		t.Errorf("no platform, one binary: %+v %q", got, why)
	}
	if _, why := pickRelease([]jobstore.ReleaseRecord{linux, win}, nil); !strings.Contains(why, "announces no platform") {
		t.Errorf("no platform, two binaries: %q", why)
	}
	if _, why := pickRelease([]jobstore.ReleaseRecord{linux}, []string{protocol.PlatformCapability("darwin", "arm64")}); !strings.Contains(why, "no binary for darwin/arm64") {
		t.Errorf("darwin/arm64: %q", why)
	}
}

// TestSettle: an updating agent is done once it runs the version; failed
// when it reports a failure for this rollout after it was told, or when
// the timeout passed; a failure it reported before the order, or for
// another rollout, or a state under way changes nothing.
func TestSettle(t *testing.T) {
	sent := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	r := jobstore.Rollout{ID: "ro-1", Version: "v1.1.0", TimeoutMS: time.Minute.Milliseconds()}
	order := &jobstore.RolloutAgent{RolloutID: "ro-1", AgentID: "pc-1", State: jobstore.RolloutAgentUpdating, SentAt: sent}
	report := func(state, rollout string, after time.Duration) *jobstore.AgentUpdate {
		return &jobstore.AgentUpdate{AgentID: "pc-1", ReportedAt: sent.Add(after),
			UpdateStatus: protocol.UpdateStatus{State: state, Target: "v1.1.0", RolloutID: rollout, Outcome: "crashed at start"}}
	}
	for _, c := range []struct {
		name  string
		a     Agent
		now   time.Duration
		state string
		want  string
	}{
		{"back with the version", Agent{Current: true, Order: order}, time.Second, jobstore.RolloutAgentDone, "running v1.1.0"},
		{"rolled back", Agent{Update: report(protocol.UpdateRolledBack, "ro-1", time.Second), Order: order}, 2 * time.Second, jobstore.RolloutAgentFailed, "rolled_back: crashed at start"},
		{"refused, no rollout id", Agent{Update: report(protocol.UpdateRefused, "", time.Second), Order: order}, 2 * time.Second, jobstore.RolloutAgentFailed, "refused"},
		{"failed before the order", Agent{Update: report(protocol.UpdateFailed, "ro-1", -time.Second), Order: order}, 2 * time.Second, "", ""},
		{"failed in another rollout", Agent{Update: report(protocol.UpdateFailed, "ro-0", time.Second), Order: order}, 2 * time.Second, "", ""},
		{"downloading", Agent{Update: report(protocol.UpdateDownloading, "ro-1", time.Second), Order: order}, 2 * time.Second, "", ""},
		{"timed out", Agent{Update: report(protocol.UpdateDownloading, "ro-1", time.Second), Order: order}, 2 * time.Minute, jobstore.RolloutAgentFailed, "did not come back with v1.1.0 within 1m0s"},
	} {
		state, outcome := settle(r, c.a, sent.Add(c.now))
		if state != c.state || !strings.Contains(outcome, c.want) {
			t.Errorf("%s: %q %q; want %q %q", c.name, state, outcome, c.state, c.want)
		}
	}
}
