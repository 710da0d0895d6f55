// Package firing is the coordinator's schedule loop (docs/schedules.md):
// every schedules.interval it reads the schedules due on the database
// clock and fires their slots through the store, whose unique key per
// slot makes any number of coordinators doing so at once fire each slot
// at most once.
package firing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule"
	"github.com/edgeagent/edgeagent/fencing"
)

// Defaults of Options.
const (
	DefaultInterval = time.Second
	DefaultBatch    = 500
)

// Options configure a Loop.
type Options struct {
	// Store must implement jobstore.ScheduleStore.
	Store jobstore.Store
	// Interval is the time between two passes; default DefaultInterval.
	Interval time.Duration
	// Batch is how many due schedules one read returns; default
	// DefaultBatch. A pass reads again while a read comes back full.
	Batch int
	// Submit is how a slot's jobs are made (api.SlotJobs): the job
	// defaults, the phone rule and who counts as online for a fan-out.
	Submit api.SubmitOptions
	// Revoke tells the agent of a job that overlap cancel_previous
	// cancelled; nil: the agent learns it at its next fenced call.
	Revoke func(tok fencing.Token, reason string)
	// Registerer takes the loop's metrics; nil: none registered.
	Registerer prometheus.Registerer
	Log        zerolog.Logger
}

// Loop evaluates due schedules.
type Loop struct {
	o     Options
	store jobstore.ScheduleStore
	fires *prometheus.CounterVec
	lag   prometheus.Histogram
}

// New returns the loop of o.
func New(o Options) (*Loop, error) {
	ss, ok := o.Store.(jobstore.ScheduleStore)
	if !ok {
		return nil, fmt.Errorf("schedules: the store %T keeps no schedules", o.Store)
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	l := &Loop{o: o, store: ss,
		fires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "schedule_fires_total",
			Help: "Slots of schedules this coordinator recorded, by outcome: fired, missed, skipped, buffered (held by overlap buffer_one), backfilled.",
		}, []string{"outcome"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "schedule_lag_seconds",
			Help:    "Time from a slot to its jobs being queued (database clock), for the slots this coordinator fired.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600},
		}),
	}
	for _, outcome := range []string{jobstore.SlotFired, jobstore.SlotMissed, jobstore.SlotSkipped, jobstore.SlotBuffered, jobstore.SlotBackfilled} {
		l.fires.WithLabelValues(outcome)
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(l.fires); err != nil {
			return nil, fmt.Errorf("schedules: register metrics: %w", err)
		}
		if err := o.Registerer.Register(l.lag); err != nil {
			return nil, fmt.Errorf("schedules: register metrics: %w", err)
		}
	}
	return l, nil
}

// Run runs a pass every interval until ctx ends. A failed pass is logged
// and the next one tries again. Passes start just after the whole
// multiples of the interval on the database clock (the slots of cron
// expressions and of most intervals fall on them), so a slot is read soon
// after it is due rather than up to an interval later.
func (l *Loop) Run(ctx context.Context) error {
	for {
		now, err := l.pass(ctx)
		if err != nil && ctx.Err() == nil {
			l.o.Log.Warn().Err(err).Msg("evaluate schedules")
		}
		t := time.NewTimer(l.untilNext(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// passSlack is how long after a multiple of the interval a pass starts:
// room for the database's clock to be a little ahead of the read.
const passSlack = 5 * time.Millisecond

// untilNext is the wait until just after the next multiple of the
// interval on the database clock, given the database clock read at
// dbNow by a pass that started at read (local monotonic clock); a full
// interval when the pass read no clock.
func (l *Loop) untilNext(r passClock) time.Duration {
	if r.db.IsZero() {
		return l.o.Interval
	}
	dbNow := r.db.Add(time.Since(r.read))
	next := dbNow.Truncate(l.o.Interval).Add(l.o.Interval)
	return next.Sub(dbNow) + passSlack
}

// passClock is the database clock a pass read, and when (local clock).
type passClock struct {
	db   time.Time
	read time.Time
}

// fireWorkers bounds the schedules one pass evaluates at once: slots due
// at the same second (every hourly schedule at the full hour) are fired
// side by side instead of one transaction after another.
const fireWorkers = 8

// Pass evaluates every schedule due now on the database clock.
func (l *Loop) Pass(ctx context.Context) error {
	_, err := l.pass(ctx)
	return err
}

func (l *Loop) pass(ctx context.Context) (passClock, error) {
	seen := map[string]bool{}
	var first passClock
	for range 100 {
		read := time.Now()
		now, due, err := l.store.DueSchedules(ctx, l.o.Batch)
		if err != nil {
			return first, err
		}
		if first.db.IsZero() {
			first = passClock{db: now, read: read}
		}
		var fresh []jobstore.Schedule
		for _, sc := range due {
			if !seen[sc.ID] {
				seen[sc.ID] = true
				fresh = append(fresh, sc)
			}
		}
		if err := l.evaluateAll(ctx, fresh, now); err != nil {
			return first, err
		}
		if len(due) < l.o.Batch || len(fresh) == 0 {
			return first, nil
		}
	}
	return first, nil
}

// evaluateAll evaluates scs at now, at most fireWorkers at once, and
// returns every error.
func (l *Loop) evaluateAll(ctx context.Context, scs []jobstore.Schedule, now time.Time) error {
	errs := make([]error, len(scs))
	sem := make(chan struct{}, fireWorkers)
	var wg sync.WaitGroup
	for i, sc := range scs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = l.Evaluate(ctx, sc, now)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Evaluate does what schedule sc calls for at now (the database clock):
// fires the slot overlap buffer_one holds once the earlier jobs ended,
// then records the slots due since its next one (schedule.Plan: the
// latest fires when within catch_up, the older ones are missed).
func (l *Loop) Evaluate(ctx context.Context, sc jobstore.Schedule, now time.Time) error {
	_, spec, err := api.ScheduleFromStore(sc)
	if err != nil {
		return err
	}
	if !sc.BufferedAt.IsZero() {
		// The held slot waits while the earlier jobs live: its jobs are
		// made (a fan-out reads the agents) only once they ended.
		live, err := l.store.LiveScheduleJobs(ctx, sc.ID)
		if err != nil {
			return err
		}
		if len(live) == 0 {
			if err := l.fire(ctx, sc, jobstore.SlotFire{ScheduleID: sc.ID, Slot: sc.BufferedAt, Buffered: true}, now); err != nil {
				return err
			}
		}
	}
	if sc.NextAt.IsZero() || sc.NextAt.After(now) {
		return nil
	}
	p := spec.Plan(sc.NextAt, now)
	f := jobstore.SlotFire{ScheduleID: sc.ID, Slot: p.Fire, Overlap: spec.Policy, Missed: p.Missed, Next: p.Next}
	if p.Folded.Count > 0 {
		f.Folded = jobstore.Slot{ScheduledAt: p.Folded.First, Through: p.Folded.Last, Count: p.Folded.Count}
	}
	if !p.Fire.IsZero() && spec.Policy == schedule.OverlapCancelPrevious {
		if err := l.cancelBefore(ctx, sc.ID, p.Fire); err != nil {
			return err
		}
	}
	return l.fire(ctx, sc, f, now)
}

// fire makes the jobs of f's slot and applies f, counting what it
// recorded. A slot another coordinator took is no error.
func (l *Loop) fire(ctx context.Context, sc jobstore.Schedule, f jobstore.SlotFire, now time.Time) error {
	if !f.Slot.IsZero() {
		var err error
		if f.Jobs, f.Detail, err = api.SlotJobs(ctx, l.o.Store, sc, f.Slot, l.o.Submit); err != nil {
			return err
		}
	}
	res, err := l.store.FireSlot(ctx, f)
	if errors.Is(err, jobstore.ErrSlotTaken) || errors.Is(err, jobstore.ErrScheduleNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	missed := int64(len(f.Missed)) + f.Folded.Count
	if missed > 0 {
		l.fires.WithLabelValues(jobstore.SlotMissed).Add(float64(missed))
		l.o.Log.Warn().Str("schedule", sc.ID).Int64("slots", missed).Msg("schedule slots missed")
	}
	switch res.Outcome {
	case "":
	case jobstore.SlotBuffered:
		if !f.Buffered {
			l.fires.WithLabelValues(res.Outcome).Inc()
		}
	default:
		l.fires.WithLabelValues(res.Outcome).Inc()
	}
	if res.Outcome == jobstore.SlotFired {
		at := now
		if len(res.Jobs) > 0 {
			at = res.Jobs[0].CreatedAt
		}
		l.lag.Observe(max(0, at.Sub(f.Slot).Seconds()))
		l.o.Log.Debug().Str("schedule", sc.ID).Time("slot", f.Slot).Int("jobs", len(res.Jobs)).Str("detail", f.Detail).Msg("schedule slot fired")
	}
	return nil
}

// cancelBefore cancels the queued and running jobs of schedule id fired
// for slots before slot (overlap cancel_previous), revoking the running
// ones. Jobs of slot itself, fired by another coordinator already, stay.
func (l *Loop) cancelBefore(ctx context.Context, id string, slot time.Time) error {
	live, err := l.store.LiveScheduleJobs(ctx, id)
	if err != nil {
		return err
	}
	for _, j := range live {
		if !j.ScheduledAt.Before(slot) {
			continue
		}
		reason := "cancelled by schedule " + id + ": the slot " + slot.UTC().Format(time.RFC3339) + " came (overlap cancel_previous)"
		tok, err := l.o.Store.Cancel(ctx, j.ID, reason)
		if errors.Is(err, jobstore.ErrConflict) || errors.Is(err, jobstore.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if tok != (fencing.Token{}) && l.o.Revoke != nil {
			l.o.Revoke(tok, reason)
		}
	}
	return nil
}
