package agent_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestNoPhoneOperationWhenFirstRenewalRefused: a job whose first renewal
// the coordinator refuses — 409 (the token is stale: another owner has the
// job) or 404 (the coordinator knows no such job) — does nothing on the
// phone and uploads nothing; the renewal is the only request of the job
// the coordinator sees. The refusal is held back while the agent could
// start work without it, so that an agent that does not wait for the first
// renewal does touch the phone.
func TestNoPhoneOperationWhenFirstRenewalRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int
	}{
		{"409 stale", protocol.CodeStale},
		{"404 unknown job", protocol.CodeUnknownJob},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			r := newRig(t, rigSetup{})
			tok := r.token(1)
			renewSeen := make(chan struct{})
			release := make(chan struct{})
			var once sync.Once
			r.coord.setHook(func(verb string, got fencing.Token) (any, int, bool, bool) {
				if verb != protocol.VerbRenew || got != tok {
					return nil, 0, false, false
				}
				once.Do(func() { close(renewSeen) })
				<-release
				return nil, tc.code, false, true
			})
			task := protocol.Task{Steps: []protocol.Step{
				{Op: protocol.OpLaunch, Package: "com.android.settings"},
				{Op: protocol.OpTap, X: 10, Y: 20},
				{Op: protocol.OpScreenshot, Name: "shot.png"},
				{Op: protocol.OpUIDump, Name: "ui.xml"},
			}}
			if err := r.coord.assign("pc-a", tok, task); err != nil {
				t.Fatal(err)
			}
			select {
			case <-renewSeen:
			case <-time.After(10 * time.Second):
				close(release)
				t.Fatal("the agent never sent the job's first renewal")
			}
			// Give an agent that would not wait for the renewal the time to
			// reach the phone; one that waits never does, however long this
			// is.
			deadline := time.Now().Add(300 * time.Millisecond)
			for len(r.phone.History()) == 0 && time.Now().Before(deadline) {
				time.Sleep(2 * time.Millisecond)
			}
			close(release)
			r.waitGone(tok.JobID)

			if h := r.phone.History(); len(h) != 0 {
				t.Errorf("phone operations after a refused first renewal: %+v", h)
			}
			if up := r.store.uploads(); len(up) != 0 {
				t.Errorf("uploads after a refused first renewal: %+v", up)
			}
			if verbs := r.coord.verbs(tok.JobID); !slices.Equal(verbs, []string{protocol.VerbRenew}) {
				t.Errorf("requests of the job: %v, want only the renewal", verbs)
			}
			s := r.waitStop(tok.JobID)
			want := fencing.ErrStale
			if tc.code == protocol.CodeUnknownJob {
				want = agent.ErrUnknownJob
			}
			if !errors.Is(s.Err, want) {
				t.Errorf("stop cause %v, want %v", s.Err, want)
			}
			r.noneAfter(s)
			for _, j := range r.a.Status().Jobs {
				if j.Token == tok {
					t.Errorf("job still listed: %+v", j)
				}
			}
		})
	}
}
