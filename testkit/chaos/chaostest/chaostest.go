// Package chaostest is what the chaos scenario tests share (the packages
// under testkit/chaos/ beside it, each a test binary of its own so that
// go test runs them at once): the flags that pick the seeds, the system
// shape of the in-process schedules, and running and checking a batch of
// schedules under a test. docs/reliability.md describes the schedules and
// the rules.
package chaostest

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.uber.org/goleak"

	"github.com/edgeagent/edgeagent/testkit/chaos"
)

var (
	// Seed is the first seed of the schedule tests (-chaos.seed).
	Seed = flag.Int64("chaos.seed", 1, "first seed of the chaos schedule tests")
	// Parallel is how many schedules run at once (-chaos.parallel).
	Parallel  = flag.Int("chaos.parallel", 8, "schedules run at once")
	schedules = flag.Int("chaos.schedules", 0, "schedules of each schedule test (default: the test's own, fewer with -short)")
)

// Schedules is how many schedules a test runs: -chaos.schedules when set,
// else def, or short with -short.
func Schedules(def, short int) int {
	switch {
	case *schedules > 0:
		return *schedules
	case testing.Short():
		return short
	}
	return def
}

// TestShape is the system of the in-process test schedules: leaner than
// edgelab chaos's default (two agents, at most four jobs, a shorter
// window), for the race detector. Every fault kind is drawn.
var TestShape = chaos.Shape{Agents: 2, Coordinators: 2, MinJobs: 2, MaxJobs: 4, MinFaults: 1, MaxFaults: 3, LeaseTTL: 500 * time.Millisecond, Window: time.Second}

// LeakOptions ignores what the test servers keep running.
func LeakOptions() []goleak.Option {
	return []goleak.Option{goleak.IgnoreCurrent()}
}

// RunSchedules runs n schedules from Seed and fails the test for every
// schedule that broke a rule or could not run, printing the history of the
// first few.
func RunSchedules(t *testing.T, opts chaos.Options, n, parallel int) chaos.Stats {
	t.Helper()
	var (
		mu    sync.Mutex
		shown int
	)
	st := chaos.RunMany(context.Background(), opts, chaos.RunOptions{
		Seed: *Seed, Schedules: n, Parallel: parallel,
		OnResult: func(r *chaos.Result) {
			if !r.Failed() {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if r.Err != nil {
				t.Errorf("schedule %d could not run: %v", r.Seed, r.Err)
				return
			}
			var b strings.Builder
			for _, v := range r.Report.Violations {
				fmt.Fprintf(&b, "\n  %s", v)
			}
			if shown < 3 {
				shown++
				b.WriteString("\n")
				r.History.Format(&b, r.Report, r.Report.FailedJobs()...)
			}
			t.Errorf("schedule %d broke the rules (reproduce with -run '^%s$' -chaos.seed=%d -chaos.schedules=1):%s", r.Seed, t.Name(), r.Seed, b.String())
		},
	})
	var b strings.Builder
	st.Print(&b)
	t.Logf("%d schedules from seed %d:\n%s", n, *Seed, b.String())
	return st
}

// CheckCounts holds the counts of a run to what the schedules must show:
// stale writes were attempted and refused, none was accepted, no result
// was lost or accepted twice, every history was linearizable, and (with
// everyKind) every fault kind was injected.
func CheckCounts(t *testing.T, st chaos.Stats, everyKind bool) {
	t.Helper()
	if st.StaleRejected == 0 {
		t.Error("no stale write was attempted and refused: the faults did not reach the fencing")
	}
	if st.StaleAccepted != 0 || st.ResultsLost != 0 || st.DuplicateAcceptances != 0 || st.Linearizable[porcupine.Illegal] != 0 {
		t.Errorf("stale writes accepted %d, results lost %d, duplicate acceptances %d, non-linearizable histories %d; want 0 each",
			st.StaleAccepted, st.ResultsLost, st.DuplicateAcceptances, st.Linearizable[porcupine.Illegal])
	}
	if everyKind {
		for _, k := range chaos.DefaultKinds(1) {
			if st.FaultsInjected[k] == 0 {
				t.Errorf("no %s fault was injected", k)
			}
		}
	}
}
