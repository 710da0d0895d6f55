package agentstatus

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

// TestRenderUpdate: the self-update state shows as one line, with the
// target, its age and the outcome, control characters made spaces; none
// without one.
func TestRenderUpdate(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	st := protocol.AgentStatus{AgentID: "pc-1", State: "running", Started: now}
	var b strings.Builder
	Render(&b, st, now)
	if strings.Contains(b.String(), "update:") {
		t.Fatalf("an agent without an update state shows one:\n%s", b.String())
	}
	st.Update = &protocol.UpdateStatus{State: protocol.UpdateRolledBack, Target: "v3.0.0", AtUnixMilli: now.Add(-time.Minute).UnixMilli(),
		Outcome: "v3.0.0 started 2 times\x1b[2J without its hello being accepted"}
	b.Reset()
	Render(&b, st, now)
	if !strings.Contains(b.String(), "update:       rolled_back v3.0.0 1m0s ago: v3.0.0 started 2 times [2J without its hello being accepted\n") {
		t.Fatalf("update line missing:\n%s", b.String())
	}
}
