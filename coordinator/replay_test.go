package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestResultReplayedAfterLostReply: a result resent with the token that was
// already accepted (its first reply was lost) is answered as accepted again,
// with nothing written twice; the same token after a reassignment, or a
// different result under an old token, stays stale.
func TestResultReplayedAfterLostReply(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	store := openSQLite(t)
	startCoordinator(t, ns.ClientURL(), store, fastOptions(t, "c1"))
	a := coordtest.Start(t, coordtest.Options{ID: "pc-r", URL: ns.ClientURL(), Devices: []protocol.Device{phone("p1")},
		Behavior: func(fencing.Token) coordtest.Behavior { return coordtest.Hold }})
	job := submit(t, store, "replay-1", protocol.DeviceSelector{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var tok fencing.Token
	for tok.JobID == "" {
		for _, tk := range a.Assigns() {
			if tk.JobID == job.ID {
				tok = tk
			}
		}
		if ctx.Err() != nil {
			t.Fatal("job never assigned")
		}
		time.Sleep(20 * time.Millisecond)
	}
	res := json.RawMessage(`{"v":1}`)
	for i := range 2 {
		var rep protocol.ResultReply
		if err := a.Request(ctx, protocol.VerbResult, protocol.Result{Token: tok, Result: res}, &rep); err != nil || !rep.Accepted {
			t.Fatalf("result attempt %d: %v %+v", i+1, err, rep)
		}
	}
	evs, err := store.WriteEvents(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for _, e := range evs {
		if e.Verb == "result" && e.Accepted {
			accepted++
		}
	}
	if accepted != 1 {
		t.Fatalf("%d accepted result writes, want exactly 1", accepted)
	}
	// An older token of the same owner is not a replay.
	old := tok
	old.Generation--
	if old.Generation > 0 {
		err := a.Request(ctx, protocol.VerbResult, protocol.Result{Token: old, Result: res}, &protocol.ResultReply{})
		if !errors.Is(err, fencing.ErrStale) {
			t.Fatalf("older generation: %v, want stale", err)
		}
	}
	if j, _ := store.Get(ctx, job.ID); j.Status != jobstore.StatusSucceeded {
		t.Fatalf("job %s", j.Status)
	}
}
