package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/internal/testenv"
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
