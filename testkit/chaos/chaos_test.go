package chaos

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

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

var (
	flagSeed      = flag.Int64("chaos.seed", 1, "first seed of the chaos schedule tests")
	flagSchedules = flag.Int("chaos.schedules", 0, "schedules of TestChaosSchedules (default 40; 12 with -short)")
	flagParallel  = flag.Int("chaos.parallel", 8, "schedules run at once")
)

func TestMain(m *testing.M) { testenv.Main(m) }

// testShape is the system of the in-process test schedules: leaner than
// edgelab chaos's default (two agents, at most four jobs, a shorter
// window), for the race detector. Every fault kind is drawn.
var testShape = Shape{Agents: 2, Coordinators: 2, MinJobs: 2, MaxJobs: 4, MinFaults: 1, MaxFaults: 3, LeaseTTL: 500 * time.Millisecond, Window: time.Second}

// leakOptions ignores what the test servers keep running.
func leakOptions() []goleak.Option {
	return []goleak.Option{goleak.IgnoreCurrent()}
}

// runSchedules runs n schedules and fails the test for every schedule that
// broke a rule or could not run, printing the history of the first few.
func runSchedules(t *testing.T, opts Options, n, parallel int) Stats {
	t.Helper()
	var (
		mu    sync.Mutex
		shown int
	)
	st := RunMany(context.Background(), opts, RunOptions{
		Seed: *flagSeed, Schedules: n, Parallel: parallel,
		OnResult: func(r *Result) {
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
			t.Errorf("schedule %d broke the rules (reproduce with -chaos.seed=%d -chaos.schedules=1):%s", r.Seed, r.Seed, b.String())
		},
	})
	var b strings.Builder
	st.Print(&b)
	t.Logf("%d schedules from seed %d:\n%s", n, *flagSeed, b.String())
	return st
}

// checkCounts holds the counts of a run to what every chaos run proves:
// stale writes were attempted and refused, none was accepted, no result
// was lost or accepted twice, and every fault kind was injected.
func checkCounts(t *testing.T, st Stats, everyKind bool) {
	t.Helper()
	if st.StaleRejected == 0 {
		t.Error("no stale write was attempted and refused: the faults did not reach the fencing")
	}
	if st.StaleAccepted != 0 || st.ResultsLost != 0 || st.DuplicateAcceptances != 0 || st.Linearizable[porcupine.Illegal] != 0 {
		t.Errorf("stale writes accepted %d, results lost %d, duplicate acceptances %d, non-linearizable histories %d; want 0 each",
			st.StaleAccepted, st.ResultsLost, st.DuplicateAcceptances, st.Linearizable[porcupine.Illegal])
	}
	if everyKind {
		for _, k := range DefaultKinds(1) {
			if st.FaultsInjected[k] == 0 {
				t.Errorf("no %s fault was injected", k)
			}
		}
	}
}

// TestChaosSchedules runs schedules in this process, under the race
// detector when the tests run with -race, against the real servers:
// PostgreSQL (the coordinators reach it through a proxy that can drop every
// connection) and MinIO, with the embedded NATS server. The 300 schedules
// of the full run go through `edgelab chaos` in cmd/edgelab (TestChaos300),
// where the race detector does not slow them tenfold.
func TestChaosSchedules(t *testing.T) {
	n := 40
	if testing.Short() {
		n = 12
	}
	if *flagSchedules > 0 {
		n = *flagSchedules
	}
	dsn := testenv.Postgres(t)
	m := testenv.MinIO(t)
	defer goleak.VerifyNone(t, leakOptions()...)
	opts := Options{
		Shape: testShape, Store: StorePostgres, PostgresDSN: dsn,
		S3: &S3Target{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey},
	}
	start := time.Now()
	st := runSchedules(t, opts, n, *flagParallel)
	t.Logf("%d schedules took %s", n, time.Since(start).Round(time.Second))
	checkCounts(t, st, n >= 200)
}

// TestChaosSQLite runs schedules on what `edgelab chaos` uses by default:
// an SQLite database per schedule and the in-process S3 server. SQLite is
// slow under the race detector, so there are fewer.
func TestChaosSQLite(t *testing.T) {
	n := 3
	if testing.Short() {
		n = 1
	}
	defer goleak.VerifyNone(t, leakOptions()...)
	st := runSchedules(t, Options{Shape: testShape}, n, 3)
	checkCounts(t, st, false)
}
