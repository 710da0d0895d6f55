package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// CapacityOptions configures the capacity scenario.
type CapacityOptions struct {
	Common
	Drivers  []string
	Agents   []int         // agent counts (default 100, 300, 1000)
	Warmup   time.Duration // after every agent said hello (default 5s)
	Duration time.Duration // measured window (default 30s)
	// JobEvery: jobs are submitted at Agents/JobEvery per second, so that
	// each agent gets one this often on average (default 10s).
	JobEvery time.Duration
	// Work is what a job takes on the agent besides its steps (default 1s).
	Work time.Duration
	// Grace is how long after the window jobs submitted in it may still be
	// assigned and committed (default 15s).
	Grace time.Duration
	// Heartbeat is the heartbeat interval the coordinator asks for
	// (default 5s, the coordinator's default).
	Heartbeat time.Duration
}

func (o *CapacityOptions) defaults() {
	if len(o.Drivers) == 0 {
		o.Drivers = []string{DriverSQLite}
	}
	if len(o.Agents) == 0 {
		o.Agents = []int{100, 300, 1000}
	}
	if o.Warmup <= 0 {
		o.Warmup = 5 * time.Second
	}
	if o.Duration <= 0 {
		o.Duration = 30 * time.Second
	}
	if o.JobEvery <= 0 {
		o.JobEvery = 10 * time.Second
	}
	if o.Work <= 0 {
		o.Work = time.Second
	}
	if o.Grace <= 0 {
		o.Grace = 15 * time.Second
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 5 * time.Second
	}
}

// CapacityRow is one agent count on one store.
type CapacityRow struct {
	Driver     string
	Agents     int
	Window     time.Duration
	Heartbeats float64 // accepted per second
	HBLatency  Summary
	Submitted  int
	Assigned   int // of the jobs submitted in the window
	Committed  int64
	Assign     Summary // submit → assign received by the agent
	Commit     Summary // result request round trip
	CoordCPU   float64
	CoordRSS   int64
	CoordHWM   int64
	DBCPU      float64
	Errors     int64
	HBErrors   int64
	LastErr    string
	Separate   bool
	Startup    time.Duration // every agent connected and said hello
	Wakeup     Summary       // 1 ms sleeps of this process: how late they woke up in the window
}

// CapacityReport is what the capacity scenario measured.
type CapacityReport struct {
	Machine Machine
	Options CapacityOptions
	Rows    []CapacityRow
}

// Capacity runs the capacity scenario: for each store and agent count, a
// fresh database and coordinator, that many protocol-level agents (each
// with its own NATS connection and a simulated phone) and a steady stream
// of small jobs.
func Capacity(ctx context.Context, o CapacityOptions) (*CapacityReport, error) {
	o.defaults()
	rep := &CapacityReport{Machine: DescribeMachine(), Options: o}
	for _, d := range o.Drivers {
		for _, n := range o.Agents {
			o.logf("capacity: %s: %d agents", d, n)
			row, err := capacityRun(ctx, &o, d, n)
			if err != nil {
				return rep, fmt.Errorf("capacity %s with %d agents: %w", d, n, err)
			}
			rep.Rows = append(rep.Rows, row)
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
		}
	}
	return rep, nil
}

// capacityTask is the job of the capacity run: a launch, a tap and a UI
// dump that is registered as an artifact.
var capacityTask = protocol.Task{Steps: []protocol.Step{
	{Op: protocol.OpLaunch, Package: "com.android.settings"},
	{Op: protocol.OpTap, X: 360, Y: 640},
	{Op: protocol.OpUIDump, Name: "screen.xml"},
}}

func capacityRun(ctx context.Context, o *CapacityOptions, driver string, n int) (CapacityRow, error) {
	row := CapacityRow{Driver: driver, Agents: n}
	cc := CoordConfig{
		LeaseTTL: 30 * time.Second, ReapInterval: time.Second, ScheduleInterval: 500 * time.Millisecond,
		HeartbeatEvery: o.Heartbeat, OfflineAfter: 3 * o.Heartbeat, LogLevel: zerolog.InfoLevel,
	}
	sys, err := startSystem(ctx, &o.Common, fmt.Sprintf("capacity-%d", n), driver, cc, coordSeparate)
	if err != nil {
		return row, err
	}
	defer sys.Close()
	row.Separate = sys.Separate()

	var (
		mu         sync.Mutex
		queuedAt   = map[string]time.Time{} // job id → its Submit returned
		assignedAt = map[string]time.Time{} // job id → its assign reached the agent
	)
	stats := &agentStats{}
	stats.onAssign = func(jobID string, at time.Time) {
		mu.Lock()
		assignedAt[jobID] = at
		mu.Unlock()
	}
	agents := make([]*simAgent, n)
	startAt := time.Now()
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var startErr atomic.Value
	actx, stopAgents := context.WithCancel(ctx)
	defer func() {
		stopAgents()
		for _, a := range agents {
			if a != nil {
				a.stop()
			}
		}
	}()
	for i := range n {
		id := fmt.Sprintf("cap-%04d", i)
		nc, err := sys.Conn(id, "")
		if err != nil {
			return row, err
		}
		phone := capture.NewSimulated(capture.SimOptions{Serial: fmt.Sprintf("sim-%04d", i), Model: "Pixel 8"})
		agents[i] = newSimAgent(id, nc, phone, 1, o.Work, stats)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := agents[i].start(actx); err != nil {
				startErr.Store(err)
			}
		})
	}
	wg.Wait()
	if err, _ := startErr.Load().(error); err != nil {
		return row, err
	}
	row.Startup = time.Since(startAt)
	sleepCtx(ctx, o.Warmup)

	// The window: submit at n/JobEvery per second, evenly spread.
	rate := float64(n) / o.JobEvery.Seconds()
	interval := time.Duration(float64(time.Second) / rate)
	c0, d0 := sys.SampleCoord(), sys.SampleDB()
	hb0 := stats.heartbeats.Load()
	probe := startProbe()
	start := time.Now()
	stats.measureFrom.Store(start.UnixNano())
	end := start.Add(o.Duration)
	var hwm int64
	nextSample := start.Add(time.Second)
	var subWG sync.WaitGroup
	for next := start; next.Before(end) && ctx.Err() == nil; next = next.Add(interval) {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		id := fmt.Sprintf("cap-%d-%08x", n, rand.Uint32())
		subWG.Go(func() {
			if _, err := sys.Store.Submit(ctx, jobstore.JobSpec{ID: id, Task: capacityTask}); err != nil {
				stats.fail(fmt.Errorf("submit: %w", err))
				return
			}
			mu.Lock()
			queuedAt[id] = time.Now()
			mu.Unlock()
		})
		row.Submitted++
		sys.Kick()
		if time.Now().After(nextSample) {
			if s := sys.SampleCoord(); s.RSS > hwm {
				hwm = s.RSS
			}
			nextSample = nextSample.Add(time.Second)
		}
	}
	subWG.Wait()
	row.Window = time.Since(start)
	row.Wakeup = probe.Stop()
	c1, d1 := sys.SampleCoord(), sys.SampleDB()
	hb1 := stats.heartbeats.Load()
	stats.measureFrom.Store(0)
	// Jobs submitted in the window may still be assigned and committed.
	assignedCount := func() int {
		n := 0
		for id := range queuedAt {
			if _, ok := assignedAt[id]; ok {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(o.Grace)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		mu.Lock()
		a := assignedCount()
		mu.Unlock()
		if a >= row.Submitted {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	var assignLat []time.Duration
	for id, q := range queuedAt {
		if a, ok := assignedAt[id]; ok {
			// A job can be assigned before its Submit call has returned.
			assignLat = append(assignLat, max(0, a.Sub(q)))
		}
	}
	row.Assign = Summarize(assignLat)
	row.Assigned = len(assignLat)
	mu.Unlock()
	row.Heartbeats = float64(hb1-hb0) / row.Window.Seconds()
	row.HBLatency = stats.hbLatency.Summary()
	row.Commit = stats.commitLat.Summary()
	row.Committed = int64(row.Commit.N)
	row.CoordCPU = CPUUse(c0, c1)
	row.CoordRSS = c1.RSS
	row.CoordHWM = max(hwm, c1.HWM)
	row.DBCPU = CPUUse(d0, d1)
	row.Errors = stats.errs.Load()
	row.HBErrors = stats.hbErrors.Load()
	if stats.lastErr != nil {
		row.LastErr = stats.lastErr.Error()
	}
	return row, nil
}

// PrintCapacity writes the tables of the capacity scenario.
func PrintCapacity(w io.Writer, r *CapacityReport) {
	o := r.Options
	t := Table{Title: fmt.Sprintf("Capacity: simulated agents against one coordinator (heartbeat every %v, one job per agent every %v on average, %v of work each)", o.Heartbeat, o.JobEvery, o.Work),
		Header: []string{"store", "agents", "heartbeats/s", "heartbeat p99 ms", "jobs", "assign p50 ms", "assign p99 ms", "commit p50 ms", "commit p99 ms", "coordinator CPU", "coordinator RSS MiB", "PostgreSQL CPU", "errors", "wakeup p99 ms"}}
	for _, x := range r.Rows {
		db := "-"
		if x.Driver == DriverPostgres && x.DBCPU > 0 {
			db = pct(x.DBCPU)
		}
		t.Add(x.Driver, fmt.Sprint(x.Agents), fmt.Sprintf("%.1f", x.Heartbeats), ms(x.HBLatency.P99),
			fmt.Sprintf("%d/%d", x.Assigned, x.Submitted), ms(x.Assign.P50), ms(x.Assign.P99), ms(x.Commit.P50), ms(x.Commit.P99),
			pct(x.CoordCPU), fmt.Sprintf("%s (peak %s)", mib(x.CoordRSS), mib(x.CoordHWM)), db, fmt.Sprint(x.Errors+x.HBErrors), ms(x.Wakeup.P99))
		if x.LastErr != "" {
			t.Notes = append(t.Notes, fmt.Sprintf("%s/%d: last error: %s", x.Driver, x.Agents, x.LastErr))
		}
	}
	t.Notes = append(t.Notes, "jobs: assigned/submitted in the window; assign: from the job stored (Submit returned) to the agent holding the assign; commit: result request round trip.",
		"wakeup: how late a 1 ms sleep of the load generator woke up during the window (the machine's own floor under the latencies).")
	t.Print(w)
	g := Table{Title: "Growth against the smallest run of the same store (value at N ÷ value at the smallest N)",
		Header: []string{"store", "agents", "agents ×", "heartbeats/s ×", "assign p99 ×", "commit p99 ×", "coordinator CPU ×", "coordinator RSS ×"}}
	base := map[string]CapacityRow{}
	for _, x := range r.Rows {
		b, ok := base[x.Driver]
		if !ok || x.Agents < b.Agents {
			base[x.Driver] = x
		}
	}
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	for _, x := range r.Rows {
		b := base[x.Driver]
		g.Add(x.Driver, fmt.Sprint(x.Agents), ratio(float64(x.Agents), float64(b.Agents)), ratio(x.Heartbeats, b.Heartbeats),
			ratio(float64(x.Assign.P99), float64(b.Assign.P99)), ratio(float64(x.Commit.P99), float64(b.Commit.P99)),
			ratio(x.CoordCPU, b.CoordCPU), ratio(float64(x.CoordRSS), float64(b.CoordRSS)))
	}
	g.Print(w)
}
