package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// sweepSlack is the time one reaper sweep may take to run its statements
// after its tick, on a loaded two-core machine under the race detector. The
// bound below is expiry + one reap interval + this.
const sweepSlack = 400 * time.Millisecond

// TestExpiredLeaseReclaimedWithinTTLPlusSweep: with a
// 3 s lease on PostgreSQL, an agent that stops renewing has its job
// reclaimed within the TTL plus one sweep, measured from the database's own
// timestamps; the old owner receives a revoke; another agent finishes the
// job at generation 2.
func TestExpiredLeaseReclaimedWithinTTLPlusSweep(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	store := openPostgres(t, testenv.Postgres(t))
	opts := fastOptions(t, "c1")
	opts.LeaseTTL = 3 * time.Second
	opts.ReapInterval = 500 * time.Millisecond
	startCoordinator(t, ns.ClientURL(), store, opts)

	a := coordtest.Start(t, coordtest.Options{
		ID: "pc-a", URL: ns.ClientURL(), Devices: []protocol.Device{phone("A1")},
		Behavior: func(fencing.Token) coordtest.Behavior { return coordtest.StopRenewing },
	})
	submit(t, store, "job-1", protocol.DeviceSelector{})
	waitAssign(t, a, "job-1", 5*time.Second)
	// B joins only now, so the job went to A.
	b := coordtest.Start(t, coordtest.Options{ID: "pc-b", URL: ns.ClientURL(), Devices: []protocol.Device{phone("B1")}})

	done := waitStatus(t, store, "job-1", jobstore.StatusSucceeded, 3*opts.LeaseTTL)
	if done.CompletedBy != b.Owner() || done.Generation != 2 {
		t.Fatalf("job finished by %s at generation %d, want %s at generation 2", done.CompletedBy, done.Generation, b.Owner())
	}
	var res struct {
		Owner      string
		Generation int64
	}
	if err := json.Unmarshal(done.Result, &res); err != nil || res.Owner != b.Owner() || res.Generation != 2 {
		t.Fatalf("stored result %s: %v", done.Result, err)
	}

	// A's only accepted renewal set the expiry, on the database clock.
	tokA := fencing.Token{JobID: "job-1", Owner: a.Owner(), Generation: 1}
	var expiry time.Time
	for _, o := range a.Outcomes() {
		if o.Token == tokA && o.Verb == protocol.VerbRenew && o.Err == nil {
			expiry = o.ExpiresAt
		}
	}
	if expiry.IsZero() {
		t.Fatalf("A has no accepted renewal: %+v", a.Outcomes())
	}
	evs, err := store.WriteEvents(context.Background(), "job-1")
	if err != nil {
		t.Fatal(err)
	}
	var reclaim, reassign jobstore.WriteEvent
	var lastRenew time.Time
	for _, e := range evs {
		switch {
		case e.Verb == jobstore.VerbRenew && e.Owner == tokA.Owner && e.Accepted:
			lastRenew = e.At
		case e.Verb == jobstore.VerbReclaim:
			reclaim = e
		case e.Verb == jobstore.VerbReassign:
			reassign = e
		}
	}
	if reclaim.Owner != tokA.Owner || reclaim.Generation != 1 || !reclaim.Accepted || reclaim.Detail != jobstore.DetailLeaseExpired {
		t.Fatalf("reclaim event %+v; events %+v", reclaim, evs)
	}
	if d := reassign.At.Sub(reclaim.At); reassign.Owner != b.Owner() || reassign.Generation != 2 || d < 0 || d > 10*time.Millisecond {
		t.Fatalf("reassign event %+v after reclaim %+v", reassign, reclaim)
	}
	late := reclaim.At.Sub(expiry)
	t.Logf("last renewal %s, lease expiry %s, reclaimed %s: %v after expiry, %v after the last renewal (TTL %v, sweep %v)",
		lastRenew.Format(time.RFC3339Nano), expiry.Format(time.RFC3339Nano), reclaim.At.Format(time.RFC3339Nano),
		late, reclaim.At.Sub(lastRenew), opts.LeaseTTL, opts.ReapInterval)
	if late < 0 {
		t.Fatalf("lease reclaimed %v before it expired", -late)
	}
	if late > opts.ReapInterval+sweepSlack {
		t.Fatalf("lease reclaimed %v after expiry, want within one sweep (%v + %v)", late, opts.ReapInterval, sweepSlack)
	}
	if d := reclaim.At.Sub(lastRenew); d > opts.LeaseTTL+opts.ReapInterval+sweepSlack {
		t.Fatalf("reclaimed %v after the last renewal, want within TTL + one sweep", d)
	}

	// The old owner was told.
	testenv.Eventually(t, 5*time.Second, "revoke at A", func() bool {
		return slices.ContainsFunc(a.Revokes(), func(r protocol.Revoke) bool { return r.Token == tokA })
	})
	if got := b.Assigns(); len(got) != 1 || got[0] != (fencing.Token{JobID: "job-1", Owner: b.Owner(), Generation: 2}) {
		t.Fatalf("B's assigns %v", got)
	}
	// A's late calls would be refused: its token is stale.
	err = a.Request(context.Background(), protocol.VerbResult, protocol.Result{Token: tokA, Result: json.RawMessage(`{}`)}, &protocol.ResultReply{})
	if !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("late result of A: %v, want 409", err)
	}
}
