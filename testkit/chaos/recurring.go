package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule"
	"github.com/edgeagent/edgeagent/protocol"
)

// ── Recurring schedules ─────────────────────────────────────────────────
//
// A run creates its plan's recurring schedules (docs/schedules.md) at the
// start of the window, every one firing every second until an end a few
// slots after the window, and the coordinators' schedule loops evaluate
// them through the faults. Their jobs wait for a phone no agent has, so
// they never take a phone from the plan's jobs; once every schedule has
// ended the harness cancels them. The checker holds the store's record of
// the slots and the coordinators' evaluations to two rules.

// Rules of the recurring schedules.
const (
	// RuleScheduleSlots: every slot of a recurring schedule from its first
	// to its end has exactly one outcome (none missing, none twice), a
	// fired slot exactly one set of jobs, and no other slot any.
	RuleScheduleSlots = "schedule-slots"
	// RuleCatchUpOnce: an evaluation fires only the latest slot due, so
	// after an outage catch-up fires once and the older slots are recorded
	// missed.
	RuleCatchUpOnce = "catch-up-once"
)

// RecurringPlan is one recurring schedule of a plan.
type RecurringPlan struct {
	Every   time.Duration
	CatchUp time.Duration
	Overlap string
	// Behind puts the first slot this many slots before the creation, as
	// if every coordinator had been down since: the first evaluation fires
	// the latest slot due, when within catch_up, and records the older
	// ones missed.
	Behind int
}

// recurringSpan is how long after the start of the window the plan's
// recurring schedules keep firing: the window, through which the faults
// fall, and a second more, so that the end (truncated to a whole second)
// lies at least a second after the start and a schedule has a slot.
func recurringSpan(shape Shape) time.Duration { return shape.Window + time.Second }

// drawRecurring draws the plan's recurring schedules from a random source
// of their own, so the rest of a seed's plan is what it was before.
func drawRecurring(p *Plan) {
	r := rand.New(rand.NewPCG(uint64(p.Seed), 0x2545f4914f6cdd1d))
	for range p.Shape.Recurring {
		p.Recurring = append(p.Recurring, RecurringPlan{
			Every:   time.Second,
			CatchUp: []time.Duration{time.Second, 2 * time.Second, time.Hour}[r.IntN(3)],
			Overlap: []string{schedule.OverlapAllow, schedule.OverlapSkip}[r.IntN(2)],
			Behind:  []int{0, 0, 2, 4}[r.IntN(4)],
		})
	}
}

// RecurringFinal is the store's final record of one recurring schedule.
type RecurringFinal struct {
	Plan     RecurringPlan
	Schedule jobstore.Schedule // as created: its id and first slot
	End      time.Time
	Ended    bool            // the schedule's next slot was zero at the end
	Slots    []jobstore.Slot // oldest first
	Jobs     []jobstore.Job
}

// FireRec is one FireSlot call of a coordinator's schedule loop with the
// database clock of the evaluation that made it (its last DueSchedules).
type FireRec struct {
	Client     string
	ScheduleID string
	Now        time.Time
	Slot       time.Time
	Buffered   bool
	Backfill   bool
	Err        string
}

// recurringProject is the project of a seed's recurring schedules and
// their jobs, so the final state of one seed's schedules is read alone
// on a database many seeds share.
func recurringProject(seed int64) string { return fmt.Sprintf("chaos-s%d", uint64(seed)) }

// runRecurring creates the plan's recurring schedules, waits until every
// one has ended (a coordinator evaluated it after its end), then cancels
// their jobs, which wait for a phone no agent has.
func (r *run) runRecurring(ctx context.Context) {
	defer r.recurringDone.Store(true)
	ss, ok := r.opRaw.(jobstore.ScheduleStore)
	if !ok || len(r.plan.Recurring) == 0 {
		return
	}
	end := r.t0.Add(recurringSpan(r.plan.Shape)).Truncate(time.Second)
	for _, rp := range r.plan.Recurring {
		req := api.ScheduleRequest{
			Fields: schedule.Fields{Every: rp.Every.String(), CatchUp: rp.CatchUp.String(), Overlap: rp.Overlap, End: end},
			Job: api.JobRequest{Project: recurringProject(r.plan.Seed), Device: protocol.DeviceSelector{Serial: "no-such-phone"},
				Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}},
		}
		var sc jobstore.Schedule
		err := retry(ctx, func() error {
			var err error
			sc, err = createRecurring(ctx, ss, req, rp.Behind)
			return err
		})
		if err != nil {
			r.rec.note("recurring schedule not created: " + err.Error())
			continue
		}
		first := sc.NextAt.Format(time.RFC3339Nano)
		if sc.NextAt.IsZero() {
			first = "none (created after its end)"
		}
		r.rec.note(fmt.Sprintf("recurring schedule %s created: every %s, catch_up %s, overlap %s, %d slots behind, first slot %s, end %s",
			sc.ID, rp.Every, rp.CatchUp, rp.Overlap, rp.Behind, first, end.Format(time.RFC3339)))
		r.recurring = append(r.recurring, RecurringFinal{Plan: rp, Schedule: sc, End: end})
	}
	for i := range r.recurring {
		f := &r.recurring[i]
		for ctx.Err() == nil {
			sc, err := ss.GetSchedule(ctx, f.Schedule.ID)
			if err == nil && sc.NextAt.IsZero() {
				f.Ended = true
				break
			}
			sleepCtx(ctx, 50*time.Millisecond)
		}
	}
	for _, f := range r.recurring {
		_ = retry(ctx, func() error {
			live, err := ss.LiveScheduleJobs(ctx, f.Schedule.ID)
			for _, j := range live {
				if _, cerr := r.opRaw.Cancel(ctx, j.ID, "chaos: the schedule ended"); cerr != nil && !errors.Is(cerr, jobstore.ErrConflict) {
					err = errors.Join(err, cerr)
				}
			}
			return err
		})
	}
}

// createRecurring stores the schedule req as the API would, its first
// slot behind slots before the first after the database clock.
func createRecurring(ctx context.Context, ss jobstore.ScheduleStore, req api.ScheduleRequest, behind int) (jobstore.Schedule, error) {
	spec, project, err := req.Check(api.SubmitOptions{}, schedule.Limits{MinEvery: time.Second})
	if err != nil {
		return jobstore.Schedule{}, err
	}
	req.Job.Project = project
	doc, err := json.Marshal(req)
	if err != nil {
		return jobstore.Schedule{}, err
	}
	return ss.CreateSchedule(ctx, jobstore.Schedule{ID: api.NewScheduleID(), Project: project, Spec: doc, CreatedBy: "chaos"}, 0,
		func(now time.Time) time.Time {
			next := spec.Next(now)
			if next.IsZero() {
				// Created after its end (the process stalled past it): the
				// schedule is stored ended, as the API's would be.
				return next
			}
			return next.Add(-time.Duration(behind) * spec.Interval)
		})
}

// collectRecurring reads the slots and jobs of the run's recurring
// schedules back from the store and deletes the schedules.
func (r *run) collectRecurring(ctx context.Context, f *Final) error {
	ss, ok := r.opRaw.(jobstore.ScheduleStore)
	if !ok {
		return nil
	}
	jobs := map[string][]jobstore.Job{}
	if len(r.recurring) > 0 {
		var all []jobstore.Job
		if err := retry(ctx, func() error {
			var err error
			all, err = r.opRaw.ListJobs(ctx, jobstore.JobFilter{Project: recurringProject(r.plan.Seed)})
			return err
		}); err != nil {
			return fmt.Errorf("collect recurring schedules: %w", err)
		}
		for _, j := range all {
			jobs[j.ScheduleID] = append(jobs[j.ScheduleID], j)
		}
	}
	for _, rf := range r.recurring {
		var slots []jobstore.Slot
		if err := retry(ctx, func() error {
			var err error
			slots, err = ss.ScheduleSlots(ctx, rf.Schedule.ID, 10000)
			return err
		}); err != nil {
			return fmt.Errorf("collect recurring schedules: %w", err)
		}
		for i, j := 0, len(slots)-1; i < j; i, j = i+1, j-1 {
			slots[i], slots[j] = slots[j], slots[i]
		}
		rf.Slots, rf.Jobs = slots, jobs[rf.Schedule.ID]
		f.Recurring = append(f.Recurring, rf)
		_ = retry(ctx, func() error {
			if err := ss.DeleteSchedule(ctx, rf.Schedule.ID); err != nil && !errors.Is(err, jobstore.ErrScheduleNotFound) {
				return err
			}
			return nil
		})
	}
	return nil
}

// checkRecurring holds the recurring schedules to RuleScheduleSlots and
// RuleCatchUpOnce.
func checkRecurring(h *History, rep *Report) {
	for _, rf := range h.Final.Recurring {
		id := rf.Schedule.ID
		rep.RecurringSchedules++
		if !rf.Ended {
			// Cut short (the settle time ran out): the slots after the
			// last recorded one are not judged.
			rep.RecurringUnended++
		}
		every := rf.Plan.Every
		perSlot := map[time.Time][]string{}
		for _, j := range rf.Jobs {
			perSlot[j.ScheduledAt.UTC()] = append(perSlot[j.ScheduledAt.UTC()], j.ID)
		}
		next := rf.Schedule.NextAt.UTC()
		if next.IsZero() {
			// Created after its end: it has no slot, and no job.
			for _, sl := range rf.Slots {
				rep.add(RuleScheduleSlots, "", "schedule %s: created after its end, yet slot %s has outcome %s", id, sl.ScheduledAt.UTC().Format(time.RFC3339), sl.Outcome)
			}
			for _, j := range rf.Jobs {
				rep.add(RuleScheduleSlots, "", "schedule %s: created after its end, yet job %s was made for slot %s", id, j.ID, j.ScheduledAt.UTC().Format(time.RFC3339))
			}
			continue
		}
		for _, sl := range rf.Slots {
			at := sl.ScheduledAt.UTC()
			switch {
			case at.Before(next):
				rep.add(RuleScheduleSlots, "", "schedule %s: slot %s has a second outcome %s", id, at.Format(time.RFC3339), sl.Outcome)
			case at.After(next):
				rep.add(RuleScheduleSlots, "", "schedule %s: slots %s to %s have no outcome: missing, not declared missed", id, next.Format(time.RFC3339), at.Add(-every).Format(time.RFC3339))
			}
			if (at.Sub(rf.Schedule.NextAt.UTC()))%every != 0 {
				rep.add(RuleScheduleSlots, "", "schedule %s: slot %s is not a slot of the schedule", id, at.Format(time.RFC3339Nano))
			}
			want := 0
			switch sl.Outcome {
			case jobstore.SlotFired, jobstore.SlotBackfilled:
				want = 1
				rep.RecurringFired++
			case jobstore.SlotMissed:
				rep.RecurringMissed += int(max(sl.Count, 1))
			}
			if got := perSlot[at]; len(got) != want {
				rep.add(RuleScheduleSlots, "", "schedule %s: %s slot %s has %d jobs, want %d: %s", id, sl.Outcome, at.Format(time.RFC3339), len(got), want, strings.Join(got, ", "))
			}
			delete(perSlot, at)
			next = at.Add(time.Duration(max(sl.Count, 1)) * every)
		}
		if rf.Ended && !next.After(rf.End) {
			rep.add(RuleScheduleSlots, "", "schedule %s: slots %s to %s (the end) have no outcome: missing, not declared missed", id, next.Format(time.RFC3339), rf.End.Format(time.RFC3339))
		}
		for at, ids := range perSlot {
			rep.add(RuleScheduleSlots, "", "schedule %s: %d jobs of slot %s, which has no outcome: %s", id, len(ids), at.Format(time.RFC3339), strings.Join(ids, ", "))
		}
	}
	ours := map[string]RecurringFinal{}
	for _, rf := range h.Final.Recurring {
		ours[rf.Schedule.ID] = rf
	}
	for _, f := range h.Fires {
		rf, ok := ours[f.ScheduleID]
		if !ok || f.Slot.IsZero() || f.Buffered || f.Backfill || f.Now.IsZero() {
			continue
		}
		// The slot after it, when it is one (not after the schedule's end),
		// was due already.
		if later := f.Slot.Add(rf.Plan.Every); !later.After(f.Now) && !later.After(rf.End) {
			rep.add(RuleCatchUpOnce, "", "schedule %s: %s fired slot %s at %s, when the later slot %s was due already", f.ScheduleID,
				f.Client, f.Slot.Format(time.RFC3339), f.Now.Format(time.RFC3339Nano), later.Format(time.RFC3339))
		}
	}
}

// ── The store calls of the schedule loop ────────────────────────────────

// errNoSchedules is what a wrapper answers for schedules when the store
// under it keeps none.
var errNoSchedules = errors.New("the store keeps no schedules")

func (s *faultyStore) schedules() (jobstore.ScheduleStore, error) {
	ss, ok := s.Store.(jobstore.ScheduleStore)
	if !ok {
		return nil, errNoSchedules
	}
	return ss, nil
}

func (s *faultyStore) CreateSchedule(ctx context.Context, sc jobstore.Schedule, limit int, first func(now time.Time) time.Time) (out jobstore.Schedule, err error) {
	ss, err := s.schedules()
	if err != nil {
		return out, err
	}
	err = s.write(func() error { out, err = ss.CreateSchedule(ctx, sc, limit, first); return err })
	return out, err
}

func (s *faultyStore) GetSchedule(ctx context.Context, id string) (out jobstore.Schedule, err error) {
	ss, err := s.schedules()
	if err != nil {
		return out, err
	}
	err = s.read(func() error { out, err = ss.GetSchedule(ctx, id); return err })
	return out, err
}

func (s *faultyStore) Schedules(ctx context.Context, f jobstore.ScheduleFilter) (out []jobstore.Schedule, err error) {
	ss, err := s.schedules()
	if err != nil {
		return nil, err
	}
	err = s.read(func() error { out, err = ss.Schedules(ctx, f); return err })
	return out, err
}

func (s *faultyStore) DeleteSchedule(ctx context.Context, id string) error {
	ss, err := s.schedules()
	if err != nil {
		return err
	}
	return s.write(func() error { return ss.DeleteSchedule(ctx, id) })
}

func (s *faultyStore) PauseSchedule(ctx context.Context, id string, paused bool, next func(now time.Time) time.Time) (out jobstore.Schedule, err error) {
	ss, err := s.schedules()
	if err != nil {
		return out, err
	}
	err = s.write(func() error { out, err = ss.PauseSchedule(ctx, id, paused, next); return err })
	return out, err
}

func (s *faultyStore) DueSchedules(ctx context.Context, limit int) (now time.Time, out []jobstore.Schedule, err error) {
	ss, err := s.schedules()
	if err != nil {
		return now, nil, err
	}
	err = s.read(func() error { now, out, err = ss.DueSchedules(ctx, limit); return err })
	return now, out, err
}

func (s *faultyStore) FireSlot(ctx context.Context, f jobstore.SlotFire) (out jobstore.SlotResult, err error) {
	ss, err := s.schedules()
	if err != nil {
		return out, err
	}
	err = s.write(func() error { out, err = ss.FireSlot(ctx, f); return err })
	return out, err
}

func (s *faultyStore) ScheduleSlots(ctx context.Context, id string, limit int) (out []jobstore.Slot, err error) {
	ss, err := s.schedules()
	if err != nil {
		return nil, err
	}
	err = s.read(func() error { out, err = ss.ScheduleSlots(ctx, id, limit); return err })
	return out, err
}

func (s *faultyStore) LiveScheduleJobs(ctx context.Context, id string) (out []jobstore.Job, err error) {
	ss, err := s.schedules()
	if err != nil {
		return nil, err
	}
	err = s.read(func() error { out, err = ss.LiveScheduleJobs(ctx, id); return err })
	return out, err
}

// scheduleRecorder is the part of a coordinator's recording store that
// keeps the database clock of the schedule loop's last read, the "now"
// of the FireSlot calls that follow it.
type scheduleRecorder struct {
	mu  sync.Mutex
	now time.Time
}

// recordingSchedules passes a coordinator's schedule calls through,
// recording its FireSlot calls with the database clock they were decided
// at.
type recordingSchedules struct {
	*recordingStore
	ss  jobstore.ScheduleStore
	clk scheduleRecorder
}

func (s *recordingSchedules) CreateSchedule(ctx context.Context, sc jobstore.Schedule, limit int, first func(now time.Time) time.Time) (jobstore.Schedule, error) {
	return s.ss.CreateSchedule(ctx, sc, limit, first)
}

func (s *recordingSchedules) GetSchedule(ctx context.Context, id string) (jobstore.Schedule, error) {
	return s.ss.GetSchedule(ctx, id)
}

func (s *recordingSchedules) Schedules(ctx context.Context, f jobstore.ScheduleFilter) ([]jobstore.Schedule, error) {
	return s.ss.Schedules(ctx, f)
}

func (s *recordingSchedules) DeleteSchedule(ctx context.Context, id string) error {
	return s.ss.DeleteSchedule(ctx, id)
}

func (s *recordingSchedules) PauseSchedule(ctx context.Context, id string, paused bool, next func(now time.Time) time.Time) (jobstore.Schedule, error) {
	return s.ss.PauseSchedule(ctx, id, paused, next)
}

func (s *recordingSchedules) DueSchedules(ctx context.Context, limit int) (time.Time, []jobstore.Schedule, error) {
	call := time.Now()
	now, out, err := s.ss.DueSchedules(ctx, limit)
	s.rec.span(s.client, "due-schedules", call)
	if err == nil {
		s.clk.mu.Lock()
		s.clk.now = now
		s.clk.mu.Unlock()
	}
	return now, out, err
}

func (s *recordingSchedules) FireSlot(ctx context.Context, f jobstore.SlotFire) (jobstore.SlotResult, error) {
	s.clk.mu.Lock()
	now := s.clk.now
	s.clk.mu.Unlock()
	call := time.Now()
	res, err := s.ss.FireSlot(ctx, f)
	s.rec.span(s.client, "fire-slot", call)
	rec := &FireRec{Client: s.client, ScheduleID: f.ScheduleID, Now: now, Slot: f.Slot, Buffered: f.Buffered, Backfill: f.Backfill}
	if err != nil {
		rec.Err = err.Error()
	}
	s.rec.mu.Lock()
	s.rec.h.Fires = append(s.rec.h.Fires, rec)
	s.rec.mu.Unlock()
	return res, err
}

func (s *recordingSchedules) ScheduleSlots(ctx context.Context, id string, limit int) ([]jobstore.Slot, error) {
	return s.ss.ScheduleSlots(ctx, id, limit)
}

func (s *recordingSchedules) LiveScheduleJobs(ctx context.Context, id string) ([]jobstore.Job, error) {
	return s.ss.LiveScheduleJobs(ctx, id)
}
