package coordinator_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestAgentRestartReclaimsAtOnce: an agent that
// restarts (new boot id) gets the jobs of its previous boot reclaimed by
// its hello, not after the TTL; this holds after a coordinator restart too,
// since the coordinator finds the old boot's jobs in the store. The jobs
// then run again, under the new boot, to the end.
func TestAgentRestartReclaimsAtOnce(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	dsn := testenv.Postgres(t)
	opts := fastOptions(t, "c1")
	opts.LeaseTTL = 30 * time.Second // far longer than the test
	c1 := startCoordinator(t, ns.ClientURL(), openPostgres(t, dsn), opts)
	store := openPostgres(t, dsn)

	var hold atomic.Bool
	hold.Store(true)
	a := coordtest.Start(t, coordtest.Options{
		ID: "pc-a", URL: ns.ClientURL(), Slots: 2, Devices: []protocol.Device{phone("A1"), phone("A2")},
		Behavior: func(fencing.Token) coordtest.Behavior {
			if hold.Load() {
				return coordtest.Hold
			}
			return coordtest.Finish
		},
	})
	submit(t, store, "j1", protocol.DeviceSelector{})
	submit(t, store, "j2", protocol.DeviceSelector{})
	waitAssign(t, a, "j1", 5*time.Second)
	waitAssign(t, a, "j2", 5*time.Second)
	oldOwner := a.Owner()
	// The lease each job would run until without the restart.
	expiry := map[string]time.Time{}
	testenv.Eventually(t, 5*time.Second, "first renewals", func() bool {
		for _, o := range a.Outcomes() {
			if o.Verb == protocol.VerbRenew && o.Err == nil {
				expiry[o.Token.JobID] = o.ExpiresAt
			}
		}
		return len(expiry) == 2
	})

	// The coordinator restarts: a fresh process with nothing in memory.
	c1.stop()
	opts.ID = "c2"
	startCoordinator(t, ns.ClientURL(), openPostgres(t, dsn), opts)

	// The agent restarts. Its hello alone takes the old boot's jobs back.
	hold.Store(false)
	if err := a.Restart(); err != nil {
		t.Fatal(err)
	}
	helloDone := time.Now()
	for _, id := range []string{"j1", "j2"} {
		evs, err := store.WriteEvents(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(evs, func(e jobstore.WriteEvent) bool { return e.Verb == jobstore.VerbReclaim })
		if i < 0 {
			t.Fatalf("%s: no reclaim by the time the hello was answered: %+v", id, evs)
		}
		e := evs[i]
		if e.Owner != oldOwner || e.Generation != 1 || !e.Accepted || e.Detail != jobstore.DetailAgentRestarted {
			t.Fatalf("%s: reclaim event %+v", id, e)
		}
		if !e.At.Before(expiry[id]) {
			t.Fatalf("%s: reclaimed at %v, not before the old lease's expiry %v", id, e.At, expiry[id])
		}
		t.Logf("%s reclaimed %v before its lease would have expired", id, expiry[id].Sub(e.At).Round(time.Millisecond))
		old := fencing.Token{JobID: id, Owner: oldOwner, Generation: 1}
		err = a.Request(context.Background(), protocol.VerbRenew, protocol.Renew{Token: old}, &protocol.RenewReply{})
		if !errors.Is(err, fencing.ErrStale) {
			t.Fatalf("%s: renewal of the old boot's token: %v, want 409", id, err)
		}
	}
	t.Logf("hello answered at %s", helloDone.Format(time.RFC3339Nano))

	// The new boot gets the jobs again and finishes them.
	for _, id := range []string{"j1", "j2"} {
		j := waitStatus(t, store, id, jobstore.StatusSucceeded, 10*time.Second)
		if j.CompletedBy != a.Owner() || j.Generation != 3 {
			t.Fatalf("%s finished by %s at generation %d, want %s at 3 (reclaim 2, claim 3)", id, j.CompletedBy, j.Generation, a.Owner())
		}
	}
	// A reconnect of the same boot releases nothing.
	submit(t, store, "j3", protocol.DeviceSelector{})
	hold.Store(true)
	waitAssign(t, a, "j3", 5*time.Second)
	if err := a.Hello(); err != nil {
		t.Fatal(err)
	}
	if j := getJob(t, store, "j3"); j.Status != jobstore.StatusInProgress || j.Generation != 1 || j.WorkerID != a.Owner() {
		t.Fatalf("reconnect hello touched j3: %+v", j)
	}
}

// TestHelloProbe: a probe hello (edgeagent doctor) is answered like a hello
// but opens no session and releases no job of the running agent.
func TestHelloProbe(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	store := openSQLite(t)
	startCoordinator(t, ns.ClientURL(), store, fastOptions(t, "c1"))
	a := coordtest.Start(t, coordtest.Options{
		ID: "pc-a", URL: ns.ClientURL(), Devices: []protocol.Device{phone("A1")},
		Behavior: func(fencing.Token) coordtest.Behavior { return coordtest.Hold },
	})
	if _, err := store.SetAgentSettings(context.Background(), "pc-a", map[string]string{"k": "v"}, nil); err != nil {
		t.Fatal(err)
	}
	submit(t, store, "j", protocol.DeviceSelector{})
	waitAssign(t, a, "j", 5*time.Second)

	var rep protocol.HelloReply
	err := a.Request(context.Background(), protocol.VerbHello, protocol.Hello{BootID: "doctor-1", Probe: true, Draining: true}, &rep)
	if err != nil || rep.LeaseTTLMS <= 0 || rep.CoordinatorID != "c1" || rep.Settings["k"] != "v" {
		t.Fatalf("probe reply %+v, %v", rep, err)
	}
	ag, err := store.GetAgent(context.Background(), "pc-a")
	if err != nil || ag.Owner() != a.Owner() || ag.AgentDraining {
		t.Fatalf("probe changed the session: %+v, %v", ag, err)
	}
	if j := getJob(t, store, "j"); j.Status != jobstore.StatusInProgress || j.WorkerID != a.Owner() || j.Generation != 1 {
		t.Fatalf("probe released the job: %+v", j)
	}
}
