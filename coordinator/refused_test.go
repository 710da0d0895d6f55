package coordinator_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestRefusedAssign: what an agent's refusal of an assign means for the
// job, on both stores. A 503 (the agent or its phone is not ready) gives
// the job back at once: with max_attempts 1 and an hour of retry backoff
// it is granted again, runs and SUCCEEDS, its refused grant neither
// counted as an attempt nor listed among its attempt ends. A 400 (the
// agent cannot run the task) fails the job at once with class job, though
// it has attempts left.
func TestRefusedAssign(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(t *testing.T) jobstore.Store{
		"sqlite":   func(t *testing.T) jobstore.Store { return openSQLite(t) },
		"postgres": func(t *testing.T) jobstore.Store { return openPostgres(t, testenv.Postgres(t)) },
	} {
		t.Run(name, func(t *testing.T) {
			ns := testenv.NATS(t)
			store := open(t)
			opts := fastOptions(t, "c1")
			opts.Retry = jobstore.RetryPolicy{Backoff: time.Hour, BackoffMax: time.Hour}
			c := startCoordinator(t, ns.ClientURL(), store, opts)
			var mu sync.Mutex
			busyOnce := true
			a := coordtest.Start(t, coordtest.Options{
				ID: "pc-a", URL: ns.ClientURL(), Devices: []protocol.Device{phone("A1")},
				Refuse: func(as protocol.Assign) (int, string) {
					mu.Lock()
					defer mu.Unlock()
					switch {
					case as.Token.JobID == "busy" && busyOnce:
						busyOnce = false
						return protocol.CodeUnavailable, "no free slot"
					case as.Token.JobID == "cannot":
						return protocol.CodeBadRequest, "steps[0]: text: phone A1 cannot type text beyond ASCII"
					}
					return 0, ""
				},
			})
			if _, err := store.Submit(t.Context(), jobstore.JobSpec{ID: "busy", MaxAttempts: 1, Task: task(protocol.DeviceSelector{})}); err != nil {
				t.Fatal(err)
			}
			j := waitStatus(t, store, "busy", jobstore.StatusSucceeded, 10*time.Second)
			if j.Attempts != 1 || len(j.AttemptEnds) != 0 || j.Generation != 3 {
				t.Fatalf("job refused once with 503: %d attempts %v at g%d, want 1 attempt, no attempt end, g3 (the refused grant g1, the requeue g2)", j.Attempts, j.AttemptEnds, j.Generation)
			}
			if r := a.Refused(); len(r) != 1 || r[0].JobID != "busy" || r[0].Generation != 1 {
				t.Fatalf("refused assigns %v, want busy at g1", r)
			}

			if _, err := store.Submit(t.Context(), jobstore.JobSpec{ID: "cannot", MaxAttempts: 3, Task: task(protocol.DeviceSelector{})}); err != nil {
				t.Fatal(err)
			}
			j = waitStatus(t, store, "cannot", jobstore.StatusFailed, 10*time.Second)
			if j.Attempts != 1 || len(j.AttemptEnds) != 1 || j.AttemptEnds[0].Class != protocol.FailClassJob ||
				j.AttemptEnds[0].Cause != jobstore.CauseAssignRefused {
				t.Fatalf("job refused with 400: %d attempts %v, want FAILED after one, class job, cause assign_refused", j.Attempts, j.AttemptEnds)
			}
			wantMetrics(t, c,
				`assigns_requeued_total 1`,
				`assign_failures_total 2`,
				`attempt_ends_total{cause="assign_refused",class="job"} 1`,
				`jobs_ended_total{state="FAILED"} 1`,
			)
		})
	}
}

// TestRefusedAssignAfterAttemptsSpent: a job whose attempts an earlier
// grant and an operator's reassignment used up is not left queued for
// ever when the new owner refuses the assign (503): no grant could take it
// again, so it ends FAILED, attempts exhausted, as a retried failure would;
// the refused grant is not counted.
func TestRefusedAssignAfterAttemptsSpent(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(t *testing.T) jobstore.Store{
		"sqlite":   func(t *testing.T) jobstore.Store { return openSQLite(t) },
		"postgres": func(t *testing.T) jobstore.Store { return openPostgres(t, testenv.Postgres(t)) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			store := open(t)
			if _, err := store.Submit(ctx, jobstore.JobSpec{ID: "spent", MaxAttempts: 1, Task: task(protocol.DeviceSelector{})}); err != nil {
				t.Fatal(err)
			}
			if _, err := store.ClaimFor(ctx, jobstore.ClaimRequest{Owner: "pc-a/1", Devices: []protocol.Device{phone("A1")}, Slots: 1, TTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			l, err := store.Reassign(ctx, "spent", "pc-b/1", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			f := jobstore.Failure{Reason: "assign not accepted: 503 no free slot", Class: protocol.FailClassInfrastructure, Cause: jobstore.CauseAssignRefused, NotRun: true}
			if err := store.Fail(ctx, l.Token, f); err != nil {
				t.Fatal(err)
			}
			j, err := store.Get(ctx, "spent")
			if err != nil {
				t.Fatal(err)
			}
			if j.Status != jobstore.StatusFailed || j.Attempts != 1 || !strings.HasPrefix(j.FailReason, "attempts exhausted (1 of 1)") {
				t.Fatalf("refused assign after the attempts were used: %s, %d attempts, reason %q; want FAILED, 1 attempt, attempts exhausted (1 of 1)", j.Status, j.Attempts, j.FailReason)
			}
		})
	}
}
