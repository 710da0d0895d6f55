package effects

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/chaos"
	"github.com/edgeagent/edgeagent/testkit/chaos/chaostest"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// effectTally adds up what the effect steps of many schedules did.
type effectTally struct {
	keys, once, never, maxRuns   int
	done, inDoubt, reserved      int
	needsDecision, succeededJobs int
}

func (e *effectTally) add(h *chaos.History) {
	for _, jp := range h.Plan.Jobs {
		if j, ok := h.Final.Jobs[jp.ID]; ok {
			switch {
			case jobstore.NeedsDecision(j):
				e.needsDecision++
			case j.Status == jobstore.StatusSucceeded:
				e.succeededJobs++
			}
		}
		for _, s := range jp.Task.Steps {
			if s.Effect == nil {
				continue
			}
			e.keys++
			n := h.Final.EffectRuns[s.Effect.Key]
			e.maxRuns = max(e.maxRuns, n)
			switch n {
			case 0:
				e.never++
			case 1:
				e.once++
			}
			switch h.Final.Effects[s.Effect.Key].State {
			case protocol.EffectDone:
				e.done++
			case protocol.EffectInDoubt:
				e.inDoubt++
			case protocol.EffectReserved:
				e.reserved++
			}
		}
	}
}

// TestChaosEffects runs fault schedules whose taps
// are effect steps, each with its own idempotency key, against PostgreSQL,
// MinIO and the embedded NATS server: agent pauses and kills in the middle
// of jobs, coordinator and NATS restarts, store outages and lost store
// replies (effect calls included), duplicated and reordered messages, clock
// jumps and reassignments. Every simulated phone counts the operations of
// effect steps it receives; no key may reach the phones twice, and every
// job that succeeded ran each of its keys exactly once (rule
// effect-at-most-once, checked with the schedule's other rules).
func TestChaosEffects(t *testing.T) {
	n := chaostest.Schedules(16, 8)
	dsn := testenv.Postgres(t)
	m := testenv.MinIO(t)
	defer goleak.VerifyNone(t, chaostest.LeakOptions()...)
	opts := chaos.Options{
		Shape: chaos.Shape{Effects: true}, Store: chaos.StorePostgres, PostgresDSN: dsn,
		S3: &chaos.S3Target{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey},
	}
	var (
		mu    sync.Mutex
		tally effectTally
		shown int
	)
	start := time.Now()
	st := chaos.RunMany(context.Background(), opts, chaos.RunOptions{
		Seed: *chaostest.Seed, Schedules: n, Parallel: 4,
		OnResult: func(r *chaos.Result) {
			mu.Lock()
			defer mu.Unlock()
			if r.Err != nil {
				t.Errorf("schedule %d could not run: %v", r.Seed, r.Err)
				return
			}
			tally.add(r.History)
			if !r.Failed() {
				return
			}
			var b strings.Builder
			for _, v := range r.Report.Violations {
				b.WriteString("\n  " + v.String())
			}
			if shown < 2 {
				shown++
				b.WriteString("\n")
				r.History.Format(&b, r.Report, r.Report.FailedJobs()...)
			}
			t.Errorf("schedule %d broke the rules (reproduce with -run TestChaosEffects -chaos.seed=%d -chaos.schedules=1):%s", r.Seed, r.Seed, b.String())
		},
	})
	var b strings.Builder
	st.Print(&b)
	t.Logf("%d schedules with effect steps from seed %d took %s:\n%s", n, *chaostest.Seed, time.Since(start).Round(time.Second), b.String())
	t.Logf("effect keys %d: executed once %d, never %d, most executions of one key %d; intents done %d, in doubt %d, reserved %d; jobs succeeded %d, needing a decision %d",
		tally.keys, tally.once, tally.never, tally.maxRuns, tally.done, tally.inDoubt, tally.reserved, tally.succeededJobs, tally.needsDecision)
	if tally.maxRuns > 1 {
		t.Errorf("an effect key reached the phones %d times", tally.maxRuns)
	}
	if tally.once == 0 || st.Violations[chaos.RuleEffectOnce] != 0 {
		t.Errorf("effect keys executed once: %d; effect-at-most-once violations: %d", tally.once, st.Violations[chaos.RuleEffectOnce])
	}
}
