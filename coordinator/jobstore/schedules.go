package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Outcomes of a schedule's slot (docs/schedules.md, "Slots").
const (
	// SlotFired: the slot's jobs were queued.
	SlotFired = "fired"
	// SlotMissed: the slot came due while no coordinator evaluated the
	// schedule, and it was more than catch_up late when one did, or a
	// later slot was due by then.
	SlotMissed = "missed"
	// SlotSkipped: overlap skip (or buffer_one with a slot held already):
	// jobs of an earlier slot were still queued or running.
	SlotSkipped = "skipped"
	// SlotBuffered: overlap buffer_one: held until the jobs of the earlier
	// slot end, then fired (SlotFired).
	SlotBuffered = "buffered"
	// SlotBackfilled: fired by a backfill.
	SlotBackfilled = "backfilled"
)

// Errors of the schedule store.
var (
	// ErrScheduleNotFound: no schedule has that id.
	ErrScheduleNotFound = errors.New("schedule not found")
	// ErrSlotTaken: the slot has an outcome already (fired by another
	// coordinator, or recorded): nothing was written.
	ErrSlotTaken = errors.New("schedule slot has an outcome already")
	// ErrScheduleLimit: the project has as many schedules as it may.
	ErrScheduleLimit = errors.New("the project has as many schedules as it may have")
)

// MaxSchedulesPerProject bounds the schedules of one project that the API
// and the CLI create.
const MaxSchedulesPerProject = 10000

// Schedule is a stored schedule: its document (the schedule file as
// accepted) and its state.
type Schedule struct {
	ID      string
	Project string
	// Spec is the schedule file as accepted, as a JSON document (the
	// timing keys and the job).
	Spec      json.RawMessage
	CreatedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
	Paused    bool
	// NextAt is the first slot not evaluated yet; zero when the schedule
	// has ended.
	NextAt time.Time
	// BufferedAt is the slot overlap buffer_one holds; zero when none.
	BufferedAt time.Time
}

// Slot is the recorded outcome of one slot of a schedule, or of a run of
// missed slots (Count > 1: Count slots from ScheduledAt to Through).
type Slot struct {
	ScheduleID  string
	ScheduledAt time.Time
	Outcome     string
	Count       int64
	Through     time.Time // the last slot of a run; zero for one slot
	RecordedAt  time.Time // database clock
	Jobs        []SlotJob // the jobs it queued, by id
	Detail      string
}

// SlotJob is one job a slot queued, as it is now: on which phone, in
// which state, and when it was first granted (zero: never).
type SlotJob struct {
	ID        string
	Status    string
	Phone     string    // the phone it was granted or pinned to, "" when none yet
	NotBefore time.Time // its jitter share; zero: none
	GrantedAt time.Time // its first grant, database clock; zero: never granted
}

// SlotFire is one evaluation's write for one schedule: the slots it
// records as missed, the slot it fires with its jobs, and the schedule's
// next slot, all in one transaction.
type SlotFire struct {
	ScheduleID string
	// Slot is the slot to fire, zero when none. Its jobs are Jobs, their
	// ScheduleID and ScheduledAt set by the store.
	Slot time.Time
	Jobs []JobSpec
	// Detail is kept with the fired slot: why it queued no job (a fan-out
	// that matched no phone).
	Detail string
	// Overlap is the schedule's overlap policy (schedule.Overlap*): with
	// skip and buffer_one the slot fires only when no job of the schedule
	// is queued or running; cancel_previous and allow fire regardless (the
	// caller cancelled the live jobs first).
	Overlap string
	// Backfill fires Slot as SlotBackfilled, whatever the schedule's
	// pause, overlap and next slot; Missed and Next are ignored.
	Backfill bool
	// Buffered fires the slot the schedule holds (Schedule.BufferedAt, which
	// must equal Slot) when no job of the schedule is live.
	Buffered bool
	// Missed are slots to record as missed, Folded a run of older ones
	// (Count 0: none).
	Missed []time.Time
	Folded Slot
	// Next is the schedule's first slot after this evaluation; zero when
	// it has ended. The stored next slot never moves back.
	Next time.Time
}

// SlotResult is what FireSlot did with the slot.
type SlotResult struct {
	// Outcome is the slot's recorded outcome (SlotFired, SlotSkipped,
	// SlotBuffered, SlotBackfilled), "" when SlotFire had no slot or the
	// schedule is paused.
	Outcome string
	Jobs    []Job
}

// ScheduleFilter selects schedules for Schedules.
type ScheduleFilter struct {
	Projects []string // schedules of these projects; nil: every project
}

// ScheduleStore keeps schedules and the outcomes of their slots (migration
// 0014, docs/schedules.md). The slot clock is the database clock: due
// schedules are those whose next slot is not after it. Firing a slot
// inserts its outcome under the unique key (schedule, slot time) and its
// jobs in the transaction that moves the schedule's state, so any number
// of coordinators evaluating one schedule make at most one outcome, and
// one set of jobs, per slot. Both stores implement it.
type ScheduleStore interface {
	// CreateSchedule stores sc (ID, Project, Spec, CreatedBy) with its
	// first slot first(now), now the database clock. ErrScheduleLimit when
	// the project has limit schedules already (limit ≤ 0: no bound).
	CreateSchedule(ctx context.Context, sc Schedule, limit int, first func(now time.Time) time.Time) (Schedule, error)
	// GetSchedule returns a schedule, or ErrScheduleNotFound.
	GetSchedule(ctx context.Context, id string) (Schedule, error)
	// Schedules lists schedules by id.
	Schedules(ctx context.Context, f ScheduleFilter) ([]Schedule, error)
	// DeleteSchedule removes a schedule and its slots; the jobs it queued
	// stay. ErrScheduleNotFound when unknown.
	DeleteSchedule(ctx context.Context, id string) error
	// PauseSchedule pauses a schedule (nothing fires, nothing is recorded
	// missed) or resumes it with next(now) as its next slot, now the
	// database clock. ErrScheduleNotFound when unknown.
	PauseSchedule(ctx context.Context, id string, paused bool, next func(now time.Time) time.Time) (Schedule, error)
	// DueSchedules returns the database clock and up to limit schedules,
	// not paused, whose next slot is not after it or that hold a buffered
	// slot, the longest due first.
	DueSchedules(ctx context.Context, limit int) (time.Time, []Schedule, error)
	// FireSlot applies f in one transaction (SlotFire). When f's slot has
	// an outcome already nothing is written and the error wraps
	// ErrSlotTaken; missed slots with an outcome already are left as they
	// are.
	FireSlot(ctx context.Context, f SlotFire) (SlotResult, error)
	// ScheduleSlots lists the recorded slots of a schedule, newest first,
	// at most limit (≤ 0: 100).
	ScheduleSlots(ctx context.Context, id string, limit int) ([]Slot, error)
	// LiveScheduleJobs lists the queued and running jobs of a schedule.
	LiveScheduleJobs(ctx context.Context, id string) ([]Job, error)
}
