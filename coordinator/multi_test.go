package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// behaviorFor picks a job's behaviour from its token, deterministically:
// most jobs finish; some are stale writers that send their result even
// after losing the lease; a few hang (stop renewing) so the reaper must
// take them over.
func behaviorFor(tok fencing.Token) coordtest.Behavior {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d", tok.JobID, tok.Generation)
	switch v := h.Sum32() % 100; {
	case v < 4 && tok.Generation == 1:
		return coordtest.StopRenewing
	case v < 30:
		return coordtest.Zombie
	}
	return coordtest.Finish
}

// TestTwoCoordinatorsManyJobs: two coordinators on
// one PostgreSQL database and one NATS server, 10 agents, 200 jobs, random
// reassignments by both coordinators while stale writers keep writing and
// hung jobs are reclaimed. No job ever has two owners at one generation,
// none is lost, each has exactly one accepted result.
func TestTwoCoordinatorsManyJobs(t *testing.T) {
	t.Parallel()
	const (
		jobs          = 200
		agents        = 10
		reassignments = 40
	)
	ns := testenv.NATS(t)
	dsn := testenv.Postgres(t)
	var coords []*running
	for i := range 2 {
		opts := fastOptions(t, fmt.Sprintf("c%d", i+1))
		opts.LeaseTTL = 1500 * time.Millisecond
		coords = append(coords, startCoordinator(t, ns.ClientURL(), openPostgres(t, dsn), opts))
	}
	store := openPostgres(t, dsn) // the test's own view

	var fleet []*coordtest.Agent
	for i := range agents {
		id := fmt.Sprintf("pc-%02d", i)
		fleet = append(fleet, coordtest.Start(t, coordtest.Options{
			ID: id, URL: ns.ClientURL(), Slots: 2, Artifacts: 1,
			Devices: []protocol.Device{phone(id + "-p1"), phone(id + "-p2")},
			// Long enough that the jobs are still running while the
			// operator's reassignments below happen, on a loaded machine
			// too (a refused assign is requeued at once).
			Work: 120 * time.Millisecond, Jitter: 120 * time.Millisecond, Behavior: behaviorFor,
		}))
	}
	ctx := context.Background()
	// Every grant is an attempt, the operator's reassignments and the
	// assigns an agent refuses (busy with a job moved away) included:
	// attempts enough that this churn never uses them up.
	for i := range jobs {
		if _, err := store.Submit(ctx, jobstore.JobSpec{ID: fmt.Sprintf("job-%03d", i), Task: task(protocol.DeviceSelector{}), MaxAttempts: 100}); err != nil {
			t.Fatal(err)
		}
	}

	// Random reassignments through either coordinator, while jobs run.
	var (
		moved   int
		chaosWG sync.WaitGroup
	)
	chaosCtx, stopChaos := context.WithCancel(ctx)
	chaosWG.Go(func() {
		for moved < reassignments && chaosCtx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
			running, err := store.ListJobs(chaosCtx, jobstore.JobFilter{Statuses: []string{jobstore.StatusInProgress}})
			if err != nil || len(running) == 0 {
				continue
			}
			j := running[rand.IntN(len(running))]
			if behaviorFor(fencing.Token{JobID: j.ID, Generation: j.Generation}) == coordtest.StopRenewing {
				continue // left hung, for the reaper
			}
			to := fleet[rand.IntN(len(fleet))].ID()
			c := coords[rand.IntN(len(coords))]
			if _, err := c.srv.Reassign(chaosCtx, j.ID, to, rand.IntN(2) == 0); err == nil {
				moved++
			}
		}
	})

	testenv.Eventually(t, 90*time.Second, "every job to succeed", func() bool {
		counts, err := store.JobCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return counts[jobstore.StatusSucceeded] == jobs
	})
	stopChaos()
	chaosWG.Wait()
	if moved < reassignments {
		t.Fatalf("only %d reassignments happened", moved)
	}

	// From the store: one owner per generation, exactly one accepted result
	// per job, and every accepted write by the owner of its generation.
	var staleRefused, expired int
	for i := range jobs {
		id := fmt.Sprintf("job-%03d", i)
		j := getJob(t, store, id)
		evs, err := store.WriteEvents(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		ownerOf := map[int64]string{}
		accepted := 0
		for _, e := range evs {
			if !e.Accepted {
				if e.Verb == jobstore.VerbResult {
					staleRefused++
				}
				continue
			}
			if e.Verb == jobstore.VerbReclaim && e.Detail == jobstore.DetailLeaseExpired {
				expired++
			}
			switch e.Verb {
			case jobstore.VerbClaim, jobstore.VerbReassign:
				if prev, dup := ownerOf[e.Generation]; dup {
					t.Errorf("%s: generation %d granted twice (%s, %s)", id, e.Generation, prev, e.Owner)
				}
				ownerOf[e.Generation] = e.Owner
			case jobstore.VerbRenew, jobstore.VerbArtifact, jobstore.VerbResult, jobstore.VerbFail:
				if ownerOf[e.Generation] != e.Owner {
					t.Errorf("%s: %s accepted from %s at generation %d, granted to %q", id, e.Verb, e.Owner, e.Generation, ownerOf[e.Generation])
				}
				if e.Verb == jobstore.VerbResult {
					accepted++
					if e.Owner != j.CompletedBy || e.Generation != j.Generation {
						t.Errorf("%s: accepted result %s g%d, job completed by %s g%d", id, e.Owner, e.Generation, j.CompletedBy, j.Generation)
					}
				}
			}
		}
		if accepted != 1 {
			t.Errorf("%s: %d accepted results, want 1", id, accepted)
		}
		var res struct {
			Owner      string
			Generation int64
		}
		if err := json.Unmarshal(j.Result, &res); err != nil || res.Owner != j.CompletedBy || res.Generation != j.Generation {
			t.Errorf("%s: stored result %s is not the one of %s g%d", id, j.Result, j.CompletedBy, j.Generation)
		}
		arts, err := store.Artifacts(ctx, id, j.Generation)
		if err != nil || len(arts) != 1 || arts[0].Owner != j.CompletedBy {
			t.Errorf("%s: manifest of the accepted generation %+v, %v", id, arts, err)
		}
	}

	// From the agents: no two processes were ever handed one job at one
	// generation.
	held := map[string]string{}
	for _, a := range fleet {
		for _, tk := range a.Assigns() {
			key := fmt.Sprintf("%s#g%d", tk.JobID, tk.Generation)
			if prev, dup := held[key]; dup && prev != tk.Owner {
				t.Errorf("%s assigned to %s and %s", key, prev, tk.Owner)
			}
			held[key] = tk.Owner
		}
	}
	// Every stale reply an agent got was for a token that was no longer
	// current, and the stale writers were refused.
	var stale409 int
	for _, a := range fleet {
		for _, o := range a.Outcomes() {
			if errors.Is(o.Err, fencing.ErrStale) {
				stale409++
			}
		}
	}
	var served [2]float64
	for i, c := range coords {
		served[i] = metricValue(t, c.srv.Registry(), "requests_total", map[string]string{"code": "200"})
		if g := metricValue(t, c.srv.Registry(), "leases_granted_total", nil); g == 0 {
			t.Errorf("coordinator %d granted nothing", i+1)
		}
	}
	t.Logf("%d jobs, %d reassignments, %d expired leases reclaimed, %d stale results refused, %d 409 replies; requests served: c1 %v, c2 %v",
		jobs, moved, expired, staleRefused, stale409, served[0], served[1])
	if served[0] == 0 || served[1] == 0 {
		t.Errorf("a coordinator served no request: %v", served)
	}
	if staleRefused == 0 {
		t.Errorf("no stale result was refused: the test did not exercise fencing")
	}
	if expired == 0 {
		t.Errorf("no expired lease was reclaimed: the reaper was not exercised")
	}
	if metricValue(t, coords[0].srv.Registry(), "stale_token_rejected_total", nil)+
		metricValue(t, coords[1].srv.Registry(), "stale_token_rejected_total", nil) != float64(stale409) {
		t.Errorf("stale_token_rejected_total does not match the 409s the agents got (%d)", stale409)
	}
}
