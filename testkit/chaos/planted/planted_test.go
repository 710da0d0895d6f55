package planted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/chaos"
	"github.com/edgeagent/edgeagent/testkit/chaos/chaostest"
	"github.com/edgeagent/edgeagent/testkit/testenv"
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
		return fmt.Errorf("commit %s: %w", tok, jobstore.ErrNotFound)
	}
	return nil
}

// plantUnfencedCommit wraps a store handle with the planted bug.
func plantUnfencedCommit(t *testing.T) func(jobstore.Store) jobstore.Store {
	return func(s jobstore.Store) jobstore.Store {
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
	chaos.RuleLinearizable: true, chaos.RuleOneAcceptance: true, chaos.RuleStaleAccepted: true,
	chaos.RuleFinalGeneration: true, chaos.RuleNoResultLost: true,
}

// lateCopyPlan is one job on one agent whose every message to the
// coordinators is copied, the copy up to one TTL late: the job's result
// reaches the coordinators twice, the second time after the first was
// accepted and the job is over. A correct system refuses the copy (its
// token is no longer current); a result written without the token accepts
// it again. The copies go on for twelve TTLs, so that on a loaded machine
// an attempt that lost its lease (stores answering renewals after the
// short TTL) still leaves a later one whose result is copied.
func lateCopyPlan(seed int64) chaos.Plan {
	ttl := 500 * time.Millisecond
	return chaos.Plan{
		Seed:  seed,
		Shape: chaos.Shape{Agents: 1, PhonesPerAgent: 1, Coordinators: 2, LeaseTTL: ttl, MinJobs: 1, MaxJobs: 1, MinFaults: 1, MaxFaults: 1},
		Jobs: []chaos.JobPlan{{ID: fmt.Sprintf("late-copy-%d", seed), Task: protocol.Task{Steps: []protocol.Step{
			{Op: protocol.OpWait, DurationMS: ttl.Milliseconds()},
			{Op: protocol.OpScreenshot, Name: "after"},
		}}}},
		Faults: []chaos.Fault{{Kind: chaos.KindMsgDuplicate, Target: 0, Duration: 12 * ttl, Amount: ttl, Prob: 1}},
	}
}

// TestPlantedUnfencedCommitIsCaught plants the bug fencing exists to
// prevent: the coordinators' result commit is the UPDATE without the
// token. In a schedule that delivers the job's result a second time after
// it was accepted, the checker must report fencing rules and print the
// offending write; the same schedule without the bug breaks none. (That
// random schedules reach such writes is what the stale writes they count,
// refused by the fenced store, show: TestChaos300.)
func TestPlantedUnfencedCommitIsCaught(t *testing.T) {
	runTwins(t, lateCopyPlan(*chaostest.Seed), plantUnfencedCommit(t), func(t *testing.T, planted bool, res *chaos.Result) {
		var b strings.Builder
		res.History.Format(&b, res.Report, res.Report.FailedJobs()...)
		var broken []string
		for _, v := range res.Report.Violations {
			if fencingRules[v.Rule] {
				broken = append(broken, v.String())
			}
		}
		if !planted {
			if len(broken) > 0 {
				t.Fatalf("the system without the bug broke fencing rules:\n  %s\n%s", strings.Join(broken, "\n  "), b.String())
			}
			return
		}
		if len(broken) == 0 {
			t.Fatalf("the unfenced commit went unnoticed: %v\n%s", res.Report.Violations, b.String())
		}
		t.Logf("fencing rules broken:\n  %s\n%s", strings.Join(broken, "\n  "), b.String())
		if !strings.Contains(b.String(), "VIOLATION") || !strings.Contains(b.String(), "result_unfenced") {
			t.Errorf("the printed history does not show the offending write")
		}
	})
}

// runTwins runs plan on PostgreSQL twice, each in a subtest: with the
// planted bug (plant wraps every coordinator's store) and without it, and
// hands each result to check.
func runTwins(t *testing.T, plan chaos.Plan, plant func(jobstore.Store) jobstore.Store, check func(t *testing.T, planted bool, res *chaos.Result)) {
	dsn := testenv.Postgres(t)
	for _, planted := range []bool{true, false} {
		t.Run(fmt.Sprintf("planted=%v", planted), func(t *testing.T) {
			opts := chaos.Options{Store: chaos.StorePostgres, PostgresDSN: dsn}
			if planted {
				opts.WrapStore = plant
			}
			res := chaos.RunPlan(context.Background(), opts, plan)
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			check(t, planted, res)
		})
	}
}

// ignoreDeadlines is a planted bug at the coordinators' boundary to the
// store: the reaper's sweep of passed deadlines (the store's
// ExpireDeadlines, a method of the store that enforces deadlines) ends
// nothing, and no grant tells the agent the job's deadline (Lease.DeadlineAt
// zero, so the assign carries no deadline_ms). Nothing stops a job at its
// deadline any more.
type ignoreDeadlines struct{ jobstore.Store }

func (s ignoreDeadlines) ExpireDeadlines(context.Context, int) ([]fencing.Token, error) {
	return nil, nil
}

func (s ignoreDeadlines) ClaimFor(ctx context.Context, req jobstore.ClaimRequest) (jobstore.Lease, error) {
	l, err := s.Store.ClaimFor(ctx, req)
	l.DeadlineAt = time.Time{}
	return l, err
}

func (s ignoreDeadlines) TakeOverExpired(ctx context.Context, req jobstore.ClaimRequest) (jobstore.Lease, fencing.Token, error) {
	l, old, err := s.Store.TakeOverExpired(ctx, req)
	l.DeadlineAt = time.Time{}
	return l, old, err
}

// regrantOnHello is a planted bug at the coordinators' boundary to the
// store: when an agent comes back with a new boot, its jobs are handed to
// the new boot with Reassign (the operator's grant, which ignores the
// attempt limit) instead of being released by the hello.
type regrantOnHello struct {
	jobstore.Store
	ttl time.Duration
}

func (s regrantOnHello) AgentHello(ctx context.Context, h jobstore.AgentHello) (jobstore.Agent, []fencing.Token, error) {
	jobs, err := s.Store.ListJobs(ctx, jobstore.JobFilter{Statuses: []string{jobstore.StatusInProgress}, AgentID: h.AgentID})
	if err == nil {
		for _, j := range jobs {
			if j.WorkerID != fencing.Owner(h.AgentID, h.BootID) {
				_, _ = s.Store.Reassign(ctx, j.ID, fencing.Owner(h.AgentID, h.BootID), s.ttl)
			}
		}
	}
	return s.Store.AgentHello(ctx, h)
}

// deadlinePlan is one job on one agent: a wait of 8 lease TTLs under a
// deadline of 3 TTLs, and no fault. A correct system ends it TIMED_OUT
// within the reap interval and the stop latency of its deadline.
func deadlinePlan(seed int64) chaos.Plan {
	ttl := 500 * time.Millisecond
	return chaos.Plan{
		Seed:  seed,
		Shape: chaos.Shape{Agents: 1, PhonesPerAgent: 1, Coordinators: 2, LeaseTTL: ttl, MinJobs: 1, MaxJobs: 1},
		Jobs: []chaos.JobPlan{{ID: fmt.Sprintf("deadline-%d", seed), Task: protocol.Task{
			TimeoutMS: (3 * ttl).Milliseconds(),
			Steps: []protocol.Step{
				{Op: protocol.OpWait, DurationMS: (8 * ttl).Milliseconds()},
				{Op: protocol.OpScreenshot, Name: "after"},
			},
		}}},
	}
}

// attemptsPlan is one job with an attempt limit of 1 on two agents, both
// killed (the one running the job among them) after 1 TTL and back after
// half a TTL. A correct system grants the job once: the restarted agent's
// hello ends the attempt, and with no attempt left the job ends FAILED.
func attemptsPlan(seed int64) chaos.Plan {
	ttl := 500 * time.Millisecond
	return chaos.Plan{
		Seed:  seed,
		Shape: chaos.Shape{Agents: 2, PhonesPerAgent: 1, Coordinators: 2, LeaseTTL: ttl, MinJobs: 1, MaxJobs: 1, MinFaults: 2, MaxFaults: 2},
		Jobs: []chaos.JobPlan{{ID: fmt.Sprintf("attempts-%d", seed), MaxAttempts: 1, Task: protocol.Task{
			Steps: []protocol.Step{
				{Op: protocol.OpWait, DurationMS: (4 * ttl).Milliseconds()},
				{Op: protocol.OpScreenshot, Name: "after"},
			},
		}}},
		Faults: []chaos.Fault{
			{Kind: chaos.KindAgentKill, At: ttl, Target: 0, Duration: ttl / 2},
			{Kind: chaos.KindAgentKill, At: ttl, Target: 1, Duration: ttl / 2},
		},
	}
}

// plantedPolicy runs plan with and without a planted bug: with it, the
// checker must report every rule of want; without it, none of the rules on
// deadlines and attempts. The twin without the bug needs the store that
// enforces deadlines and attempt limits.
func plantedPolicy(t *testing.T, plan chaos.Plan, plant func(jobstore.Store) jobstore.Store, want ...string) {
	runTwins(t, plan, plant, func(t *testing.T, planted bool, res *chaos.Result) {
		var b strings.Builder
		res.History.Format(&b, res.Report)
		broke := map[string]bool{}
		for _, v := range res.Report.Violations {
			broke[v.Rule] = true
		}
		if !planted {
			if broke[chaos.RuleDeadline] || broke[chaos.RuleMaxAttempts] || broke[chaos.RuleRetryCause] {
				t.Fatalf("the system without the bug broke the rules: %v\n%s", res.Report.Violations, b.String())
			}
			return
		}
		for _, r := range want {
			if !broke[r] {
				t.Fatalf("the planted bug went unnoticed by %s: %v\n%s", r, res.Report.Violations, b.String())
			}
		}
		t.Logf("caught: %v", res.Report.Violations)
	})
}

// TestPlantedDeadlineIgnoredIsCaught: with the reaper's deadline sweep
// and the assign's deadline planted away, a job with a deadline of 3 TTLs
// runs its 8-TTL wait to the end; the deadline rule must report it.
func TestPlantedDeadlineIgnoredIsCaught(t *testing.T) {
	plantedPolicy(t, deadlinePlan(*chaostest.Seed), func(s jobstore.Store) jobstore.Store { return ignoreDeadlines{s} }, chaos.RuleDeadline)
}

// TestPlantedAttemptLimitBypassIsCaught: with a restarted agent's jobs
// handed to its new boot by Reassign, a job with a limit of one attempt is
// granted twice, and its first attempt has no recorded end; the
// max-attempts and retry-cause rules must report it.
func TestPlantedAttemptLimitBypassIsCaught(t *testing.T) {
	plan := attemptsPlan(*chaostest.Seed)
	plantedPolicy(t, plan, func(s jobstore.Store) jobstore.Store { return regrantOnHello{s, plan.Shape.LeaseTTL} }, chaos.RuleMaxAttempts, chaos.RuleRetryCause)
}

// doubleFire is a planted bug in the store's slot key: when the slot a
// coordinator fires has an outcome already (another coordinator fired it
// first), its jobs are queued anyway, as if the unique key (schedule,
// scheduled time) were not there: a slot that two coordinators evaluate
// at once fires twice.
type doubleFire struct {
	plantedSchedules
}

// plantedSchedules is a store that keeps schedules and submits batches.
type plantedSchedules interface {
	jobstore.Store
	jobstore.ScheduleStore
	jobstore.APIStore
}

func (s doubleFire) FireSlot(ctx context.Context, f jobstore.SlotFire) (jobstore.SlotResult, error) {
	res, err := s.plantedSchedules.FireSlot(ctx, f)
	if !errors.Is(err, jobstore.ErrSlotTaken) || f.Slot.IsZero() || len(f.Jobs) == 0 {
		return res, err
	}
	specs := slices.Clone(f.Jobs)
	for i := range specs {
		specs[i].ID += "-again"
		specs[i].ScheduleID, specs[i].ScheduledAt = f.ScheduleID, f.Slot
	}
	jobs, err := s.SubmitAll(ctx, specs)
	return jobstore.SlotResult{Outcome: jobstore.SlotFired, Jobs: jobs}, err
}

// doubleFirePlan is one short job and 20 recurring schedules evaluated by
// two coordinators, with no fault: the coordinators evaluate slots at
// once often enough.
func doubleFirePlan(seed int64) chaos.Plan {
	shape := chaos.Shape{Agents: 1, PhonesPerAgent: 1, Coordinators: 2, LeaseTTL: 500 * time.Millisecond, MinJobs: 1, MaxJobs: 1, Recurring: 20}
	plan := chaos.Plan{
		Seed:  seed,
		Shape: shape,
		Jobs: []chaos.JobPlan{{ID: fmt.Sprintf("double-fire-%d", seed), Task: protocol.Task{
			Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "shot"}},
		}}},
	}
	for range shape.Recurring {
		plan.Recurring = append(plan.Recurring, chaos.RecurringPlan{Every: time.Second, CatchUp: time.Hour, Overlap: schedule.OverlapAllow})
	}
	return plan
}

// TestPlantedDoubleFireIsCaught: with the slot key planted away, a slot
// two coordinators evaluate at once queues two sets of jobs; the
// schedule-slots rule must report it. The same plan without the bug keeps
// every rule on schedules.
func TestPlantedDoubleFireIsCaught(t *testing.T) {
	plant := func(s jobstore.Store) jobstore.Store {
		ps, ok := s.(plantedSchedules)
		if !ok {
			t.Errorf("store %T keeps no schedules", s)
			return s
		}
		return doubleFire{ps}
	}
	runTwins(t, doubleFirePlan(*chaostest.Seed), plant, func(t *testing.T, planted bool, res *chaos.Result) {
		var broke []string
		for _, v := range res.Report.Violations {
			if v.Rule == chaos.RuleScheduleSlots || v.Rule == chaos.RuleCatchUpOnce {
				broke = append(broke, v.String())
			}
		}
		if res.Report.RecurringFired == 0 {
			t.Fatalf("no slot fired: %+v", res.Report)
		}
		if !planted {
			if len(broke) > 0 {
				t.Fatalf("the system without the bug broke the schedule rules:\n  %s", strings.Join(broke, "\n  "))
			}
			return
		}
		if len(broke) == 0 {
			t.Fatalf("the planted double fire went unnoticed through %d fired slots", res.Report.RecurringFired)
		}
		t.Logf("caught:\n  %s", strings.Join(broke, "\n  "))
	})
}
