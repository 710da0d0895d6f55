package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/internal/testenv"
	"github.com/edgeagent/edgeagent/protocol"
)

// unfencedCommit is the planted bug: the result is written with the
// store's UnfencedCommit (UPDATE … WHERE id = $job), the write a lease
// without a fencing token amounts to, instead of the fenced UPDATE.
type unfencedCommit struct{ sqlstore.Lab }

func (s unfencedCommit) Commit(ctx context.Context, tok fencing.Token, result json.RawMessage) error {
	ok, err := s.UnfencedCommit(ctx, tok.JobID, tok.Owner, result)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("commit %s: %w", tok, coordinator.ErrNotFound)
	}
	return nil
}

// plantUnfencedCommit wraps a store handle with the planted bug.
func plantUnfencedCommit(t *testing.T) func(coordinator.Store) coordinator.Store {
	return func(s coordinator.Store) coordinator.Store {
		lab, ok := s.(sqlstore.Lab)
		if !ok {
			t.Errorf("store %T has no UnfencedCommit", s)
			return s
		}
		return unfencedCommit{lab}
	}
}

// fencingRules are the rules a stale write breaks.
var fencingRules = map[string]bool{
	RuleLinearizable: true, RuleOneAcceptance: true, RuleStaleAccepted: true,
	RuleFinalGeneration: true, RuleNoResultLost: true,
}

// TestPlantedUnfencedCommitIsCaught plants the bug fencing exists to
// prevent: the coordinators' result commit is the UPDATE without the token.
// The checker must fail within the first few hundred schedules, on a
// fencing rule, and print the offending history.
func TestPlantedUnfencedCommitIsCaught(t *testing.T) {
	opts := Options{Shape: testShape, WrapStore: plantUnfencedCommit(t), Store: StorePostgres, PostgresDSN: testenv.Postgres(t)}
	var (
		mu     sync.Mutex
		caught *Result
	)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	st := RunMany(ctx, opts, RunOptions{
		Seed: *flagSeed, Schedules: 300, Parallel: *flagParallel,
		OnResult: func(r *Result) {
			mu.Lock()
			defer mu.Unlock()
			if r.Err != nil {
				t.Logf("schedule %d could not run: %v", r.Seed, r.Err)
				return
			}
			if caught != nil || !r.Failed() {
				return
			}
			for _, v := range r.Report.Violations {
				if fencingRules[v.Rule] {
					caught = r
					stop() // the schedules still running are cut short
					return
				}
			}
		},
	})
	if caught == nil {
		t.Fatalf("the unfenced commit went unnoticed through %d schedules", st.Schedules)
	}
	var b strings.Builder
	caught.History.Format(&b, caught.Report, caught.Report.FailedJobs()...)
	t.Logf("caught after %d schedules, in schedule %d:\n%s", st.Schedules, caught.Seed, b.String())
	var fenceRules []string
	for _, v := range caught.Report.Violations {
		if fencingRules[v.Rule] {
			fenceRules = append(fenceRules, v.String())
		}
	}
	t.Logf("fencing rules broken:\n  %s", strings.Join(fenceRules, "\n  "))
	if !strings.Contains(b.String(), "VIOLATION") || !strings.Contains(b.String(), "result_unfenced") {
		t.Errorf("the printed history does not show the offending write")
	}
}

// dropPolicy is a planted bug at the coordinators' boundary to the store:
// the job is submitted without the deadline and the attempt limit the
// client gave it (as an API that forgot to pass them on would).
type dropPolicy struct{ coordinator.Store }

func (s dropPolicy) Submit(ctx context.Context, spec coordinator.JobSpec) (coordinator.Job, error) {
	spec.Task.TimeoutMS = 0
	spec.MaxAttempts = 50
	return s.Store.Submit(ctx, spec)
}

// policyPlan is one job on two agents: a wait of 8 lease TTLs under a
// deadline of 3 TTLs and an attempt limit of 1, and both agents killed
// (the one running the job among them) after 1 TTL, back after half a
// TTL. A correct system grants the job once: the restarted agent's hello
// releases it and it is not granted again (FAILED, attempts used up), or
// it ends TIMED_OUT; either way nothing of it runs past its deadline by
// more than the reap interval and the stop latency.
func policyPlan(seed int64) Plan {
	ttl := 500 * time.Millisecond
	return Plan{
		Seed:  seed,
		Shape: Shape{Agents: 2, PhonesPerAgent: 1, Coordinators: 2, LeaseTTL: ttl, MinJobs: 1, MaxJobs: 1, MinFaults: 2, MaxFaults: 2},
		Jobs: []JobPlan{{ID: fmt.Sprintf("policy-%d", seed), MaxAttempts: 1, Task: protocol.Task{
			TimeoutMS: (3 * ttl).Milliseconds(),
			Steps: []protocol.Step{
				{Op: protocol.OpWait, DurationMS: (8 * ttl).Milliseconds()},
				{Op: protocol.OpScreenshot, Name: "after"},
			},
		}}},
		Faults: []Fault{
			{Kind: KindAgentKill, At: ttl, Target: 0, Duration: ttl / 2},
			{Kind: KindAgentKill, At: ttl, Target: 1, Duration: ttl / 2},
		},
	}
}

// TestPlantedPolicyDropIsCaught plants a coordinator that drops the job's
// deadline and attempt limit on submit. The job is then granted again
// after its agent was killed, beyond its limit of one attempt, and runs
// its whole wait, past its deadline: the checker must report both rules.
// Its twin without the bug must pass them (this needs the store that
// enforces deadlines and attempt limits).
func TestPlantedPolicyDropIsCaught(t *testing.T) {
	dsn := testenv.Postgres(t)
	for _, planted := range []bool{true, false} {
		t.Run(fmt.Sprintf("planted=%v", planted), func(t *testing.T) {
			opts := Options{Store: StorePostgres, PostgresDSN: dsn}
			if planted {
				opts.WrapStore = func(s coordinator.Store) coordinator.Store { return dropPolicy{s} }
			}
			res := RunPlan(context.Background(), opts, policyPlan(*flagSeed))
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			var b strings.Builder
			res.History.Format(&b, res.Report)
			broke := map[string]bool{}
			for _, v := range res.Report.Violations {
				broke[v.Rule] = true
			}
			if !planted {
				if broke[RuleDeadline] || broke[RuleMaxAttempts] || broke[RuleRetryCause] {
					t.Fatalf("the system without the bug broke the rules: %v\n%s", res.Report.Violations, b.String())
				}
				return
			}
			if !broke[RuleDeadline] || !broke[RuleMaxAttempts] {
				t.Fatalf("the dropped deadline and attempt limit went unnoticed: %v\n%s", res.Report.Violations, b.String())
			}
			t.Logf("caught: %v", res.Report.Violations)
		})
	}
}
