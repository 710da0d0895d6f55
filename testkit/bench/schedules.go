package bench

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule"
	"github.com/edgeagent/edgeagent/coordinator/schedule/firing"
	"github.com/edgeagent/edgeagent/protocol"
)

// SchedulesOptions configure the schedules scenario.
type SchedulesOptions struct {
	Common
	Drivers   []string
	Schedules int           // recurring schedules on the coordinator (default 10,000)
	Duration  time.Duration // measured window (default 3m)
	// Every, when set, makes every schedule `every: Every` with overlap
	// allow, all of them due at once each interval; zero gives each an hourly cron expression at
	// minute i mod 60 (`17 * * * *`), about Schedules/60 due at the start
	// of every minute.
	Every time.Duration
	// Interval is the schedule loop's (schedules.interval); default
	// firing.DefaultInterval.
	Interval time.Duration
}

// SchedulesRun is one store.
type SchedulesRun struct {
	Driver    string
	Schedules int
	Interval  time.Duration
	Create    time.Duration // time to create every schedule
	Window    time.Duration
	Slots     int     // slots due in the window (from its start on the database clock), fired
	Missed    int     // slots recorded missed
	Lag       Summary // slot → its job queued (the job's created_at, database clock)
	CPU       time.Duration
	DBCPU     time.Duration // the throwaway PostgreSQL cluster's; 0 for SQLite (in CPU) or an external server
	Passes    int64         // DueSchedules reads
	Read      int64         // schedules those reads returned
	Fires     int64         // FireSlot transactions
}

// SchedulesReport is the result of the schedules scenario.
type SchedulesReport struct{ Runs []SchedulesRun }

// scheduleStore is a store that keeps schedules.
type scheduleStore interface {
	jobstore.Store
	jobstore.ScheduleStore
}

// countingSchedules counts the schedule loop's store calls.
type countingSchedules struct {
	scheduleStore
	passes, read, fires atomic.Int64
}

func (c *countingSchedules) DueSchedules(ctx context.Context, limit int) (time.Time, []jobstore.Schedule, error) {
	now, due, err := c.scheduleStore.DueSchedules(ctx, limit)
	c.passes.Add(1)
	c.read.Add(int64(len(due)))
	return now, due, err
}

func (c *countingSchedules) FireSlot(ctx context.Context, f jobstore.SlotFire) (jobstore.SlotResult, error) {
	c.fires.Add(1)
	return c.scheduleStore.FireSlot(ctx, f)
}

// Schedules runs the schedules scenario: one coordinator's schedule loop
// (coordinator/schedule/firing, docs/schedules.md) evaluating Schedules
// recurring schedules for Duration; it measures the process's CPU (and
// PostgreSQL's), the loop's store reads, and the lag from each slot to
// its job being queued, on the database clock.
func Schedules(ctx context.Context, o SchedulesOptions) (*SchedulesReport, error) {
	if o.Schedules <= 0 {
		o.Schedules = 10000
	}
	if o.Duration <= 0 {
		o.Duration = 3 * time.Minute
	}
	if o.Interval <= 0 {
		o.Interval = firing.DefaultInterval
	}
	dir, done, err := o.workDir("schedules")
	if err != nil {
		return nil, err
	}
	defer done()
	rep := &SchedulesReport{}
	for _, d := range o.Drivers {
		js, closeStore, err := o.openStore(ctx, d, dir, "schedules.db")
		if err != nil {
			return rep, err
		}
		if js == nil {
			continue
		}
		st, ok := js.(scheduleStore)
		if !ok {
			closeStore()
			return rep, fmt.Errorf("schedules: the store %T keeps no schedules", js)
		}
		o.logf("schedules: %s, %d schedules, %s", d, o.Schedules, o.Duration)
		r, err := schedulesRun(ctx, o, st, d == DriverPostgres)
		closeStore()
		r.Driver = d
		rep.Runs = append(rep.Runs, r)
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func schedulesRun(ctx context.Context, o SchedulesOptions, st scheduleStore, pg bool) (SchedulesRun, error) {
	r := SchedulesRun{Schedules: o.Schedules, Interval: o.Interval}
	start := time.Now()
	job := api.JobRequest{Device: protocol.DeviceSelector{Tags: []string{"bench"}},
		Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "shot.png"}}}
	for i := range o.Schedules {
		req := api.ScheduleRequest{Job: job}
		req.Job.Project = fmt.Sprintf("bench-%d", i%10)
		if o.Every > 0 {
			// No agent runs the jobs: with the default overlap (skip) a
			// slot would find the previous one's still queued.
			req.Every, req.Overlap = o.Every.String(), schedule.OverlapAllow
		} else {
			req.Cron = fmt.Sprintf("%d * * * *", i%60)
		}
		if _, err := api.CreateSchedule(ctx, st, req, api.SubmitOptions{SubmittedBy: "bench"}, schedule.Limits{MinEvery: schedule.MinEveryFloor}); err != nil {
			return r, fmt.Errorf("create schedule %d: %w", i, err)
		}
	}
	r.Create = time.Since(start)
	o.logf("schedules: created %d in %s", o.Schedules, r.Create.Round(time.Millisecond))

	cs := &countingSchedules{scheduleStore: st}
	l, err := firing.New(firing.Options{Store: cs, Interval: o.Interval, Log: zerolog.Nop()})
	if err != nil {
		return r, err
	}
	// Slots that came due while the schedules were being created are fired
	// before the window and not measured: the window's slots are those from
	// its start on the database clock.
	if err := l.Pass(ctx); err != nil {
		return r, err
	}
	since, _, err := st.DueSchedules(ctx, 1)
	if err != nil {
		return r, err
	}
	cs.passes.Store(0)
	cs.read.Store(0)
	cs.fires.Store(0)
	self0 := SampleSelf()
	var db0 ProcSample
	if pg {
		db0 = o.Postgres.Sample()
	}
	from := time.Now()
	lctx, stop := context.WithTimeout(ctx, o.Duration)
	_ = l.Run(lctx)
	stop()
	r.Window = time.Since(from)
	self1 := SampleSelf()
	r.CPU = self1.CPU - self0.CPU
	if pg && db0.OK {
		if db1 := o.Postgres.Sample(); db1.OK {
			r.DBCPU = db1.CPU - db0.CPU
		}
	}
	r.Passes, r.Read, r.Fires = cs.passes.Load(), cs.read.Load(), cs.fires.Load()

	jobs, err := st.ListJobs(ctx, jobstore.JobFilter{})
	if err != nil {
		return r, err
	}
	var lag Durations
	for _, j := range jobs {
		if j.ScheduleID != "" && !j.ScheduledAt.Before(since) {
			lag.Add(j.CreatedAt.Sub(j.ScheduledAt))
			r.Slots++
		}
	}
	r.Lag = lag.Summary()
	scs, err := st.Schedules(ctx, jobstore.ScheduleFilter{})
	if err != nil {
		return r, err
	}
	for _, sc := range scs {
		slots, err := st.ScheduleSlots(ctx, sc.ID, 0)
		if err != nil {
			return r, err
		}
		for _, sl := range slots {
			if sl.Outcome == jobstore.SlotMissed && !sl.ScheduledAt.Before(since) {
				r.Missed += int(max(sl.Count, 1))
			}
		}
	}
	return r, nil
}

// PrintSchedules prints the schedules table.
func PrintSchedules(w io.Writer, r *SchedulesReport) {
	t := Table{Title: "Recurring schedules on one coordinator: evaluation cost and fire lag",
		Header: []string{"store", "schedules", "loop interval", "window", "slots fired", "missed", "lag p50 ms", "p99 ms", "max ms",
			"CPU s/min", "PostgreSQL CPU s/min", "due reads/min", "schedules read/min", "fire tx/min", "create all"}}
	for _, x := range r.Runs {
		perMin := func(v float64) string { return fmt.Sprintf("%.1f", v/x.Window.Minutes()) }
		db := "-"
		if x.DBCPU > 0 {
			db = perMin(x.DBCPU.Seconds())
		}
		t.Add(x.Driver, fmt.Sprint(x.Schedules), x.Interval.String(), x.Window.Round(time.Second).String(), fmt.Sprint(x.Slots), fmt.Sprint(x.Missed),
			ms(x.Lag.P50), ms(x.Lag.P99), ms(x.Lag.Max), perMin(x.CPU.Seconds()), db,
			perMin(float64(x.Passes)), perMin(float64(x.Read)), perMin(float64(x.Fires)), x.Create.Round(time.Second).String())
	}
	t.Notes = append(t.Notes, "one schedule loop in this process on the store; the lag runs from the slot to the created_at of its job (database clock) and includes the wait for the loop's next pass.")
	t.Print(w)
}
