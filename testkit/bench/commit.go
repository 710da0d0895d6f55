package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
)

// CommitOptions configures the fenced commit scenario.
type CommitOptions struct {
	Common
	Drivers []string // stores to run, sqlite and/or postgres
	// Senders is how many agents send results at once, each on its own
	// NATS connection, one request in flight each (default 64).
	Senders  int
	Jobs     int           // in-progress jobs seeded for the throughput run (default 120000)
	Warmup   time.Duration // before the measured window (default 2s)
	Duration time.Duration // measured window (default 10s)
	// Sequential is how many accepted and how many stale results one
	// agent sends one after the other, interleaved (default 1000).
	Sequential int
	// Rounds and Pairs shape the fenced against unfenced comparison:
	// Rounds rounds of Pairs statement pairs, the two statements of a pair
	// back to back in alternating order (defaults 30 and 500).
	Rounds, Pairs int
	// StaleJobs is the size of the stale-writer experiment (default 20).
	StaleJobs int
}

func (o *CommitOptions) defaults() {
	if len(o.Drivers) == 0 {
		o.Drivers = []string{DriverSQLite}
	}
	if o.Senders <= 0 {
		o.Senders = 64
	}
	if o.Jobs <= 0 {
		o.Jobs = 120000
	}
	if o.Warmup <= 0 {
		o.Warmup = 2 * time.Second
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Sequential <= 0 {
		o.Sequential = 1000
	}
	if o.Rounds <= 0 {
		o.Rounds = 30
	}
	if o.Pairs <= 0 {
		o.Pairs = 500
	}
	if o.StaleJobs <= 0 {
		o.StaleJobs = 20
	}
}

// ThroughputRow is the fenced commit throughput of one store through NATS.
type ThroughputRow struct {
	Driver     string
	Senders    int
	Commits    int64 // accepted in the window
	Window     time.Duration
	Latency    Summary
	Errors     int64
	LastErr    string
	CoordCPU   float64 // cores
	CoordRSS   int64
	DBCPU      float64 // cores, throwaway PostgreSQL only
	BenchCPU   float64 // cores: senders and NATS server
	Separate   bool
	Statements []StatementStat // pg_stat_statements over the window
}

// PerSecond is the accepted commits per second.
func (r ThroughputRow) PerSecond() float64 {
	if r.Window <= 0 {
		return 0
	}
	return float64(r.Commits) / r.Window.Seconds()
}

// StatementStat is one line of pg_stat_statements.
type StatementStat struct {
	Query       string
	Calls       int64
	TotalMS     float64
	MeanMS      float64
	SharePct    float64
	RowsPerCall float64
}

// SequentialRow compares, for one store, one agent's accepted results with
// its stale ones (409), sent one after the other through NATS.
type SequentialRow struct {
	Driver   string
	Accepted Summary
	Stale    Summary
}

// UpdateRow compares the fenced statement with the same statement without
// the token on the same kind of rows.
type UpdateRow struct {
	Driver    string
	Statement string
	Fenced    Summary // per-statement round trip
	Unfenced  Summary
	Ratios    Floats  // per-round mean(fenced)/mean(unfenced)
	Pooled    float64 // total fenced / total unfenced
	// ServerRatio is the ratio of the mean execution times inside the
	// server (pg_stat_statements), 0 when unknown.
	ServerRatio              float64
	ServerFenced, ServerUnf  float64 // ms
	Rounds, PairsPerRound    int
	FencedRows, UnfencedRows int64 // rows each variant changed (all of them)
}

// CommitReport is what the commit scenario measured.
type CommitReport struct {
	Machine     Machine
	Throughput  []ThroughputRow
	Sequential  []SequentialRow
	Experiment  []sqlstore.ExperimentResult
	ExpDrivers  []string
	Updates     []UpdateRow
	Warnings    []string
	PGVersion   string
	ProfilePath map[string]string
}

// Commit runs the fenced commit scenario on each store.
func Commit(ctx context.Context, o CommitOptions) (*CommitReport, error) {
	o.defaults()
	rep := &CommitReport{Machine: DescribeMachine(), ProfilePath: map[string]string{}}
	if o.Postgres != nil {
		rep.PGVersion = o.Postgres.Version
	}
	for _, d := range o.Drivers {
		o.logf("commit: %s: throughput through NATS", d)
		tr, seq, prof, err := commitThroughput(ctx, &o, d)
		if err != nil {
			return rep, fmt.Errorf("commit throughput on %s: %w", d, err)
		}
		rep.Throughput = append(rep.Throughput, tr)
		rep.Sequential = append(rep.Sequential, seq)
		if prof != "" {
			rep.ProfilePath[d] = prof
		}
		o.logf("commit: %s: stale-writer experiment and fenced against unfenced UPDATE", d)
		ex, ups, err := commitStatements(ctx, &o, d)
		if err != nil {
			return rep, fmt.Errorf("fenced against unfenced on %s: %w", d, err)
		}
		rep.Experiment = append(rep.Experiment, ex...)
		for range ex {
			rep.ExpDrivers = append(rep.ExpDrivers, d)
		}
		rep.Updates = append(rep.Updates, ups...)
	}
	return rep, nil
}

func commitCoordConfig() CoordConfig {
	return CoordConfig{
		LeaseTTL: 30 * time.Second, ReapInterval: time.Second, ScheduleInterval: 500 * time.Millisecond,
		HeartbeatEvery: 5 * time.Second, OfflineAfter: 15 * time.Second, LogLevel: zerolog.InfoLevel,
	}
}

func commitThroughput(ctx context.Context, o *CommitOptions, driver string) (ThroughputRow, SequentialRow, string, error) {
	row := ThroughputRow{Driver: driver, Senders: o.Senders}
	seq := SequentialRow{Driver: driver}
	sys, err := startSystem(ctx, &o.Common, "commit", driver, commitCoordConfig(), coordSeparate)
	if err != nil {
		return row, seq, "", err
	}
	defer sys.Close()
	row.Separate = sys.Separate()
	spec := seedSpec{jobPrefix: "cm-", n: o.Jobs, agentPrefix: "cm-", agents: o.Senders, boot: "bench", gen: 1}
	if err := seedJobs(ctx, driver, sys.DSN, spec); err != nil {
		return row, seq, "", err
	}
	conns := make([]*nats.Conn, o.Senders)
	for i := range conns {
		if conns[i], err = sys.Conn(spec.agentID(i), ""); err != nil {
			return row, seq, "", err
		}
	}
	res, _ := json.Marshal(map[string]any{"artifacts": []string{}, "steps": 2})

	var (
		measuring  atomic.Bool
		commits    atomic.Int64
		errs       atomic.Int64
		lat        Durations
		lastErrMu  sync.Mutex
		lastErr    error
		wg         sync.WaitGroup
		runCtx, cf = context.WithCancel(ctx)
	)
	defer cf()
	for i := range o.Senders {
		wg.Go(func() {
			subj := protocol.CoordSubject(spec.agentID(i), protocol.VerbResult)
			for g := i; g < spec.n && runCtx.Err() == nil; g += o.Senders {
				tok := fencing.Token{JobID: spec.jobID(g), Owner: spec.owner(i), Generation: spec.gen}
				start := time.Now()
				var rr protocol.ResultReply
				rctx, cancel := context.WithTimeout(runCtx, 10*time.Second)
				err := natsrpc.Request(rctx, conns[i], subj, protocol.Result{Token: tok, Result: res}, &rr)
				cancel()
				if runCtx.Err() != nil {
					return
				}
				if err != nil {
					errs.Add(1)
					lastErrMu.Lock()
					lastErr = err
					lastErrMu.Unlock()
					continue
				}
				if measuring.Load() {
					commits.Add(1)
					lat.Add(time.Since(start))
				}
			}
		})
	}
	sleepCtx(ctx, o.Warmup)
	resetStatements(ctx, sys)
	c0, d0, b0 := sys.SampleCoord(), sys.SampleDB(), SampleSelf()
	start := time.Now()
	measuring.Store(true)
	sleepCtx(ctx, o.Duration)
	measuring.Store(false)
	row.Window = time.Since(start)
	c1, d1, b1 := sys.SampleCoord(), sys.SampleDB(), SampleSelf()
	cf()
	wg.Wait()
	row.Commits = commits.Load()
	row.Latency = lat.Summary()
	row.Errors = errs.Load()
	if lastErr != nil {
		row.LastErr = lastErr.Error()
	}
	row.CoordCPU = CPUUse(c0, c1)
	row.CoordRSS = c1.RSS
	row.DBCPU = CPUUse(d0, d1)
	if sys.Separate() {
		row.BenchCPU = CPUUse(b0, b1)
	}
	row.Statements = readStatements(ctx, sys)
	if row.Commits > 0 && spec.n-int(row.Commits) < o.Senders {
		o.logf("commit: %s: the senders ran out of seeded jobs; raise -commit-jobs", driver)
	}

	// One agent, one request at a time: accepted results and stale ones
	// (the job was reassigned to another boot), interleaved.
	sspec := seedSpec{jobPrefix: "sq-", n: 2 * o.Sequential, agentPrefix: "sq-", agents: 1, boot: "new", gen: 2}
	if err := seedJobs(ctx, driver, sys.DSN, sspec); err != nil {
		return row, seq, "", err
	}
	nc, err := sys.Conn(sspec.agentID(0), "")
	if err != nil {
		return row, seq, "", err
	}
	subj := protocol.CoordSubject(sspec.agentID(0), protocol.VerbResult)
	var acc, stale []time.Duration
	for g := range 2 * o.Sequential {
		tok := fencing.Token{JobID: sspec.jobID(g), Owner: sspec.owner(0), Generation: 2}
		wantStale := g%2 == 1
		if wantStale {
			tok.Owner, tok.Generation = sspec.agentID(0)+"/old", 1
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := natsrpc.Request(rctx, nc, subj, protocol.Result{Token: tok, Result: res}, &protocol.ResultReply{})
		cancel()
		d := time.Since(start)
		switch {
		case wantStale && errors.Is(err, fencing.ErrStale):
			stale = append(stale, d)
		case !wantStale && err == nil:
			acc = append(acc, d)
		default:
			return row, seq, "", fmt.Errorf("sequential result %s (stale %v): %v", tok, wantStale, err)
		}
	}
	seq.Accepted, seq.Stale = Summarize(acc), Summarize(stale)
	prof := ""
	if o.ProfileDir != "" && sys.Separate() {
		prof = filepath.Join(o.ProfileDir, fmt.Sprintf("coordinator-commit-%s.pprof", driver))
	}
	if err := sys.StopCoord(); err != nil {
		o.logf("commit: %s: coordinator: %v", driver, err)
	}
	return row, seq, prof, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func resetStatements(ctx context.Context, sys *system) {
	if sys.Driver != DriverPostgres || sys.common.Postgres == nil || !sys.common.Postgres.Statements {
		return
	}
	conn, err := pgx.Connect(ctx, sys.DSN)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, `SELECT pg_stat_statements_reset()`)
}

func readStatements(ctx context.Context, sys *system) []StatementStat {
	if sys.Driver != DriverPostgres || sys.common.Postgres == nil || !sys.common.Postgres.Statements {
		return nil
	}
	conn, err := pgx.Connect(ctx, sys.DSN)
	if err != nil {
		return nil
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
		SELECT query, calls, total_exec_time, mean_exec_time,
		       100 * total_exec_time / NULLIF(sum(total_exec_time) OVER (), 0), rows::float8 / NULLIF(calls, 0)
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC LIMIT 8`)
	if err != nil {
		return nil
	}
	out, _ := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StatementStat, error) {
		var s StatementStat
		var share, rpc *float64
		err := r.Scan(&s.Query, &s.Calls, &s.TotalMS, &s.MeanMS, &share, &rpc)
		if share != nil {
			s.SharePct = *share
		}
		if rpc != nil {
			s.RowsPerCall = *rpc
		}
		s.Query = oneLine(s.Query, 90)
		return s, err
	})
	return out
}

func oneLine(q string, n int) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > n {
		q = q[:n] + "…"
	}
	return q
}

// PrintCommit writes the tables of the commit scenario.
func PrintCommit(w io.Writer, r *CommitReport) {
	t := Table{Title: "Fenced commits through NATS (result requests, closed loop)",
		Header: []string{"store", "senders", "commits/s", "p50 ms", "p99 ms", "max ms", "coordinator CPU", "coordinator RSS MiB", "PostgreSQL CPU", "senders+NATS CPU", "errors"}}
	for _, x := range r.Throughput {
		db := "-"
		if x.Driver == DriverPostgres && x.DBCPU > 0 {
			db = pct(x.DBCPU)
		}
		bench := "-"
		if x.Separate {
			bench = pct(x.BenchCPU)
		}
		t.Add(x.Driver, fmt.Sprint(x.Senders), fmt.Sprintf("%.0f", x.PerSecond()), ms(x.Latency.P50), ms(x.Latency.P99), ms(x.Latency.Max),
			pct(x.CoordCPU), mib(x.CoordRSS), db, bench, fmt.Sprint(x.Errors))
		if x.LastErr != "" {
			t.Notes = append(t.Notes, x.Driver+": last error: "+x.LastErr)
		}
	}
	t.Notes = append(t.Notes, "CPU as a share of one core over the window (200% = both cores of a 2-core machine).")
	t.Print(w)
	c := Table{Title: "CPU per accepted commit over the same window, and the rate those costs allow on this machine's cores",
		Header: []string{"store", "coordinator µs", "PostgreSQL µs", "senders+NATS µs", "total µs", "CPU-bound ceiling (nproc ÷ total)"}}
	for _, x := range r.Throughput {
		n := float64(x.Commits)
		if n == 0 || !x.Separate {
			continue
		}
		win := x.Window.Seconds() * 1e6
		co, db, be := x.CoordCPU*win/n, x.DBCPU*win/n, x.BenchCPU*win/n
		dbs := "-"
		if x.Driver == DriverPostgres && x.DBCPU > 0 {
			dbs = fmt.Sprintf("%.0f", db)
		}
		total := co + db + be
		c.Add(x.Driver, fmt.Sprintf("%.0f", co), dbs, fmt.Sprintf("%.0f", be), fmt.Sprintf("%.0f", total),
			fmt.Sprintf("%.0f/s", float64(r.Machine.NProc)*1e6/total))
	}
	if len(c.Rows) > 0 {
		c.Notes = append(c.Notes, "SQLite runs inside the coordinator process; the senders and the NATS server share this process.")
		c.Print(w)
	}
	for _, x := range r.Throughput {
		if len(x.Statements) == 0 {
			continue
		}
		st := Table{Title: "PostgreSQL statements during the throughput window (pg_stat_statements, top by total time)",
			Header: []string{"calls", "share", "mean ms", "rows/call", "statement"}}
		for _, s := range x.Statements {
			st.Add(fmt.Sprint(s.Calls), fmt.Sprintf("%.1f%%", s.SharePct), fmt.Sprintf("%.3f", s.MeanMS), fmt.Sprintf("%.2f", s.RowsPerCall), s.Query)
		}
		st.Print(w)
	}
	for d, p := range r.ProfilePath {
		fmt.Fprintf(w, "coordinator CPU profile (%s): %s\n", d, p)
	}
	s := Table{Title: "One agent, one request at a time: accepted results and stale ones (409), interleaved",
		Header: []string{"store", "accepted p50 ms", "accepted p99 ms", "accepted mean ms", "stale p50 ms", "stale p99 ms", "stale mean ms", "published stale write"}}
	for _, x := range r.Sequential {
		s.Add(x.Driver, ms(x.Accepted.P50), ms(x.Accepted.P99), ms(x.Accepted.Mean), ms(x.Stale.P50), ms(x.Stale.P99), ms(x.Stale.Mean), "≈3.4 ms")
	}
	s.Print(w)
	e := Table{Title: "Stale-writer experiment (claimed by A, reassigned to B, B commits, A's late write arrives)",
		Header: []string{"store", "mode", "stale writes accepted", "new results overwritten", "new results surviving"}}
	for i, x := range r.Experiment {
		mode := "unfenced"
		if x.Fenced {
			mode = "fenced"
		}
		e.Add(r.ExpDrivers[i], mode, fmt.Sprintf("%d/%d", x.StaleAccepted, x.Jobs), fmt.Sprintf("%d/%d", x.Overwritten, x.Jobs), fmt.Sprintf("%d/%d", x.Survived, x.Jobs))
	}
	e.Print(w)
	u := Table{Title: "Fenced UPDATE against the same UPDATE without the token (same rows, pairs back to back, order alternating)",
		Header: []string{"store", "statement", "fenced mean µs", "unfenced mean µs", "ratio median", "IQR", "min–max", "pooled", "server-side ratio"}}
	for _, x := range r.Updates {
		server := "-"
		if x.ServerRatio > 0 {
			server = fmt.Sprintf("%.3f (%.1f / %.1f µs)", x.ServerRatio, 1000*x.ServerFenced, 1000*x.ServerUnf)
		}
		u.Add(x.Driver, x.Statement, fmt.Sprintf("%.1f", us(x.Fenced.Mean)), fmt.Sprintf("%.1f", us(x.Unfenced.Mean)),
			fmt.Sprintf("%.3f", x.Ratios.Median), fmt.Sprintf("%.3f–%.3f", x.Ratios.Q1, x.Ratios.Q3),
			fmt.Sprintf("%.3f–%.3f", x.Ratios.Min, x.Ratios.Max), fmt.Sprintf("%.3f", x.Pooled), server)
	}
	if len(r.Updates) > 0 {
		x := r.Updates[0]
		u.Notes = append(u.Notes, fmt.Sprintf("%d rounds of %d pairs per statement; ratio = mean fenced / mean unfenced round trip of a round; published: ≈1.05; target ≤ 1.03.", x.Rounds, x.PairsPerRound))
	}
	u.Print(w)
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
