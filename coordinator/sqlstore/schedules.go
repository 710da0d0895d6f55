package sqlstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// ScheduleColumns are the columns ScanSchedule reads, in its order.
const ScheduleColumns = `id, project, spec, created_by, created_at, updated_at, paused, next_at, buffered_at`

// ScanSchedule reads a schedule (ScheduleColumns).
func ScanSchedule[T any](row Row, times Times[T]) (jobstore.Schedule, error) {
	var (
		sc                   jobstore.Schedule
		spec                 []byte
		createdAt, updatedAt T
		next, buffered       *T
	)
	if err := row.Scan(&sc.ID, &sc.Project, &spec, &sc.CreatedBy, &createdAt, &updatedAt, &sc.Paused, &next, &buffered); err != nil {
		return jobstore.Schedule{}, err
	}
	sc.Spec = append([]byte(nil), spec...)
	var err error
	for _, t := range []struct {
		to   *time.Time
		from *T
	}{{&sc.CreatedAt, &createdAt}, {&sc.UpdatedAt, &updatedAt}, {&sc.NextAt, next}, {&sc.BufferedAt, buffered}} {
		if *t.to, err = times.Null(t.from); err != nil {
			return jobstore.Schedule{}, err
		}
	}
	return sc, nil
}

// SlotColumns are the columns of schedule_slots (aliased s) ScanSlot
// reads, in its order, but the last: the slot's jobs as a JSON array of
// objects {id, status, phone, not_before_ms, granted_ms} (times in Unix
// milliseconds, null when none), which each dialect aggregates its own
// way.
const SlotColumns = `s.schedule_id, s.scheduled_at, s.outcome, s.count, s.through, s.recorded_at, s.detail, `

// ScanSlot reads a slot (SlotColumns and its jobs).
func ScanSlot[T any](row Row, times Times[T]) (jobstore.Slot, error) {
	var (
		sl           jobstore.Slot
		at, recorded T
		through      *T
		jobs         []byte
	)
	if err := row.Scan(&sl.ScheduleID, &at, &sl.Outcome, &sl.Count, &through, &recorded, &sl.Detail, &jobs); err != nil {
		return jobstore.Slot{}, err
	}
	var err error
	if sl.ScheduledAt, err = times(at); err != nil {
		return jobstore.Slot{}, err
	}
	if sl.RecordedAt, err = times(recorded); err != nil {
		return jobstore.Slot{}, err
	}
	if sl.Through, err = times.Null(through); err != nil {
		return jobstore.Slot{}, err
	}
	var raw []struct {
		ID        string `json:"id"`
		Status    string `json:"status"`
		Phone     string `json:"phone"`
		NotBefore *int64 `json:"not_before_ms"`
		Granted   *int64 `json:"granted_ms"`
	}
	if err := json.Unmarshal(jobs, &raw); err != nil {
		return jobstore.Slot{}, fmt.Errorf("decode the jobs of a slot: %w", err)
	}
	ms := func(v *int64) time.Time {
		if v == nil {
			return time.Time{}
		}
		return time.UnixMilli(*v).UTC()
	}
	for _, j := range raw {
		sl.Jobs = append(sl.Jobs, jobstore.SlotJob{ID: j.ID, Status: j.Status, Phone: j.Phone, NotBefore: ms(j.NotBefore), GrantedAt: ms(j.Granted)})
	}
	// A fan-out's jobs in their order: id-1, id-2, …, id-10.
	slices.SortFunc(sl.Jobs, func(a, b jobstore.SlotJob) int {
		return cmp.Or(cmp.Compare(len(a.ID), len(b.ID)), cmp.Compare(a.ID, b.ID))
	})
	return sl, nil
}

// ScheduleTx is one store's statements of a FireSlot transaction, run in
// the transaction the store opened.
type ScheduleTx interface {
	// Lock locks the schedule's row until the transaction ends and reads
	// whether it is paused and the slot it buffers (zero when none);
	// jobstore.ErrScheduleNotFound when there is no such schedule.
	Lock(ctx context.Context, id string) (paused bool, buffered time.Time, err error)
	// Live counts the queued and running jobs of the schedule.
	Live(ctx context.Context, id string) (int64, error)
	// InsertSlot inserts the slot's row unless the slot has one; it
	// reports whether it did.
	InsertSlot(ctx context.Context, sl jobstore.Slot) (bool, error)
	// FireBuffered turns the schedule's buffered slot at into a fired
	// one; it reports whether the slot was still buffered.
	FireBuffered(ctx context.Context, id string, at time.Time) (bool, error)
	// SetBuffered sets (zero: clears) the slot the schedule buffers.
	SetBuffered(ctx context.Context, id string, at time.Time) error
	// SetNext moves the schedule's next slot to next, never back; zero
	// ends the schedule.
	SetNext(ctx context.Context, id string, next time.Time) error
	// InsertJobs submits specs as APIStore.SubmitAll does.
	InsertJobs(ctx context.Context, specs []jobstore.JobSpec) ([]jobstore.Job, error)
}

// FireSlot is jobstore.ScheduleStore.FireSlot on one store's transaction:
// it records f's missed slots (those without an outcome), decides the
// outcome of f's slot by the overlap policy, inserts its row under the key
// (schedule, slot) and its jobs, and moves the schedule's next slot. A
// slot that has a row already ends it with jobstore.ErrSlotTaken: the
// caller rolls the transaction back.
func FireSlot(ctx context.Context, tx ScheduleTx, f jobstore.SlotFire) (jobstore.SlotResult, error) {
	paused, buffered, err := tx.Lock(ctx, f.ScheduleID)
	if err != nil {
		return jobstore.SlotResult{}, err
	}
	if paused && !f.Backfill {
		return jobstore.SlotResult{}, nil
	}
	var res jobstore.SlotResult
	if !f.Backfill && !f.Buffered {
		for _, m := range f.Missed {
			if _, err := tx.InsertSlot(ctx, jobstore.Slot{ScheduleID: f.ScheduleID, ScheduledAt: m, Outcome: jobstore.SlotMissed, Count: 1}); err != nil {
				return jobstore.SlotResult{}, err
			}
		}
		if r := f.Folded; r.Count > 0 {
			r.ScheduleID, r.Outcome = f.ScheduleID, jobstore.SlotMissed
			r.Detail = fmt.Sprintf("%d slots from %s to %s missed", r.Count, r.ScheduledAt.UTC().Format(time.RFC3339), r.Through.UTC().Format(time.RFC3339))
			if _, err := tx.InsertSlot(ctx, r); err != nil {
				return jobstore.SlotResult{}, err
			}
		}
	}
	if !f.Slot.IsZero() {
		if res, err = fire(ctx, tx, f, buffered); err != nil {
			return jobstore.SlotResult{}, err
		}
	}
	if !f.Backfill && !f.Buffered {
		if err := tx.SetNext(ctx, f.ScheduleID, f.Next); err != nil {
			return jobstore.SlotResult{}, err
		}
	}
	return res, nil
}

// fire decides and records the outcome of f's slot.
func fire(ctx context.Context, tx ScheduleTx, f jobstore.SlotFire, buffered time.Time) (jobstore.SlotResult, error) {
	taken := fmt.Errorf("fire schedule %s slot %s: %w", f.ScheduleID, f.Slot.UTC().Format(time.RFC3339), jobstore.ErrSlotTaken)
	live := int64(0)
	if !f.Backfill {
		var err error
		if live, err = tx.Live(ctx, f.ScheduleID); err != nil {
			return jobstore.SlotResult{}, err
		}
	}
	jobs := func(outcome string) (jobstore.SlotResult, error) {
		specs := slices.Clone(f.Jobs)
		for i := range specs {
			specs[i].ScheduleID, specs[i].ScheduledAt = f.ScheduleID, f.Slot
		}
		js, err := tx.InsertJobs(ctx, specs)
		if err != nil {
			return jobstore.SlotResult{}, err
		}
		return jobstore.SlotResult{Outcome: outcome, Jobs: js}, nil
	}
	if f.Buffered {
		if !buffered.Equal(f.Slot) {
			return jobstore.SlotResult{}, taken
		}
		if live > 0 {
			return jobstore.SlotResult{Outcome: jobstore.SlotBuffered}, nil
		}
		ok, err := tx.FireBuffered(ctx, f.ScheduleID, f.Slot)
		if err != nil {
			return jobstore.SlotResult{}, err
		}
		if !ok {
			return jobstore.SlotResult{}, taken
		}
		if err := tx.SetBuffered(ctx, f.ScheduleID, time.Time{}); err != nil {
			return jobstore.SlotResult{}, err
		}
		return jobs(jobstore.SlotFired)
	}
	sl := jobstore.Slot{ScheduleID: f.ScheduleID, ScheduledAt: f.Slot, Outcome: jobstore.SlotFired, Count: 1, Detail: f.Detail}
	if f.Backfill {
		sl.Outcome = jobstore.SlotBackfilled
	}
	if live > 0 && (f.Overlap == "" || f.Overlap == "skip" || f.Overlap == "buffer_one") {
		sl.Outcome = jobstore.SlotSkipped
		sl.Detail = fmt.Sprintf("%d jobs of an earlier slot still queued or running", live)
		if f.Overlap == "buffer_one" && buffered.IsZero() {
			sl.Outcome = jobstore.SlotBuffered
			sl.Detail = fmt.Sprintf("held until the %d jobs of an earlier slot end", live)
		}
	}
	ok, err := tx.InsertSlot(ctx, sl)
	if err != nil {
		return jobstore.SlotResult{}, err
	}
	if !ok {
		return jobstore.SlotResult{}, taken
	}
	switch sl.Outcome {
	case jobstore.SlotSkipped:
		return jobstore.SlotResult{Outcome: sl.Outcome}, nil
	case jobstore.SlotBuffered:
		if err := tx.SetBuffered(ctx, f.ScheduleID, f.Slot); err != nil {
			return jobstore.SlotResult{}, err
		}
		return jobstore.SlotResult{Outcome: sl.Outcome}, nil
	}
	return jobs(sl.Outcome)
}
