package agent_test

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestUnknownJobMidJobStops: a 404 (the coordinator knows no such job) to a
// renewal or to an artifact registration in the middle of a job stops the
// job at once, exactly like a 409 (docs/protocol.md sections 4 and 6.2):
// nothing more reaches storage (no later screenshot, no operation log) and
// nothing more is sent for the job (no registration, no fail, no result).
func TestUnknownJobMidJobStops(t *testing.T) {
	for _, tc := range []struct {
		name string
		verb string
		nth  int // the nth request of verb for the job gets 404
	}{
		{"renewal", protocol.VerbRenew, 2},
		{"registration", protocol.VerbArtifact, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			r := newRig(t, rigSetup{})
			tok := r.token(1)
			var mu sync.Mutex
			n := 0
			r.coord.setHook(func(verb string, got fencing.Token) (any, int, bool, bool) {
				if verb != tc.verb || got != tok {
					return nil, 0, false, false
				}
				mu.Lock()
				defer mu.Unlock()
				n++
				if n < tc.nth {
					return nil, 0, false, false
				}
				return nil, protocol.CodeUnknownJob, false, true
			})
			// Screenshots every 150 ms for longer than the lease: the
			// renewal at a third of the TTL and the second registration
			// both come while steps remain.
			if err := r.coord.assign("pc-a", tok, screenshotTask(30, 150)); err != nil {
				t.Fatal(err)
			}
			stop := r.waitStop(tok.JobID)
			r.waitGone(tok.JobID)
			if !errors.Is(stop.Err, agent.ErrUnknownJob) {
				t.Fatalf("stop cause %v, want unknown job; log:\n%s", stop.Err, r.logs.String())
			}
			t.Logf("stopped: %v; cut short: %q", stop.Err, stop.CutShort)
			r.noneAfter(stop)
			verbs := r.coord.verbs(tok.JobID)
			if len(verbs) == 0 || verbs[len(verbs)-1] != tc.verb {
				t.Errorf("requests of the job %v: want the refused %s last", verbs, tc.verb)
			}
			if slices.Contains(verbs, protocol.VerbFail) || slices.Contains(verbs, protocol.VerbResult) {
				t.Errorf("requests of the job %v: a fail or result after the 404", verbs)
			}
			mu.Lock()
			refused := n
			mu.Unlock()
			if refused != tc.nth {
				t.Errorf("%d %s requests, want %d: nothing after the 404", refused, tc.verb, tc.nth)
			}
			for _, u := range r.store.uploads() {
				if u.err == nil && u.start.After(stop.At) {
					t.Errorf("object %s stored by an upload started after the stop", u.key)
				}
				if u.key == tok.ObjectKey(capture.OpLogName) {
					t.Errorf("the operation log was uploaded after the 404 (err %v)", u.err)
				}
			}
		})
	}
}
