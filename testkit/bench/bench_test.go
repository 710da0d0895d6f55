package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// serveEnv makes the test binary the coordinator process of a scenario
// (ServeCoordinator with the arguments after "--").
const serveEnv = "EDGE_BENCH_TEST_SERVE_COORDINATOR"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		args := os.Args
		for i, a := range args {
			if a == "--" {
				args = args[i+1:]
				break
			}
		}
		err := ServeCoordinator(ctx, args, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	testenv.Main(m)
}

// coordCommand runs the coordinator in a process of its own: this test
// binary again.
func coordCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	return cmd
}

func common(t *testing.T) Common {
	var log bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(log.String())
		}
	})
	return Common{Log: &log}
}

// commonWithPostgres is common with a throwaway PostgreSQL cluster, stopped
// at the end of the test.
func commonWithPostgres(t *testing.T, ctx context.Context) Common {
	c := common(t)
	pg, err := OpenPostgres(ctx, "")
	if err != nil {
		testenv.Missing(t, "postgres: %v", err)
	}
	t.Cleanup(func() { pg.Close() })
	c.Postgres = pg
	return c
}

// The scenarios at a tiny scale: they run their whole code path; the
// figures are not checked.

func TestStopScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// A lease long enough that a loaded machine's stale holder still asks
	// (and is told 409) before its lease runs out.
	r, err := Stop(ctx, StopOptions{Common: common(t), Stops: 3, FenceStops: 1, Pairs: 2,
		LeaseTTL: 5 * time.Second, SafetyMargin: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	PrintStop(&out, r)
	for _, way := range []string{StopRevoke, StopStaleBusy, StopStaleRenew, StopSelfFence, StopLeaseOnly} {
		if !strings.Contains(out.String(), way) {
			t.Errorf("no %s row:\n%s", way, out.String())
		}
	}
	for _, row := range r.Rows {
		if row.Way == StopStaleBusy || row.Way == StopStaleRenew {
			for _, s := range row.Samples {
				if s.Verb409 == "" {
					t.Errorf("%s: a stop without a 409: %+v", row.Way, s)
				}
			}
		}
	}
}

func TestCommitScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := common(t)
	drivers := []string{DriverSQLite}
	if !testing.Short() {
		pg, err := OpenPostgres(ctx, testenv.Postgres(t))
		if err != nil {
			t.Fatal(err)
		}
		defer pg.Close()
		c.Postgres = pg
		drivers = append(drivers, DriverPostgres)
	}
	r, err := Commit(ctx, CommitOptions{Common: c, Drivers: drivers, Senders: 3, Jobs: 300,
		Warmup: 50 * time.Millisecond, Duration: 300 * time.Millisecond, Sequential: 5, Rounds: 2, Pairs: 5, StaleJobs: 3})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	PrintCommit(&out, r)
	for _, x := range r.Throughput {
		if x.Commits == 0 || x.Errors != 0 {
			t.Errorf("%s: %d commits, %d errors (%s)", x.Driver, x.Commits, x.Errors, x.LastErr)
		}
	}
	for i, x := range r.Experiment {
		if x.Fenced && (x.StaleAccepted != 0 || x.Survived != x.Jobs) {
			t.Errorf("%s: fenced experiment let a stale write through: %+v", r.ExpDrivers[i], x)
		}
	}
	if len(r.Updates) != 2*len(drivers) {
		t.Errorf("%d update rows for %d stores:\n%s", len(r.Updates), len(drivers), out.String())
	}
}

func TestCapacityScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := common(t)
	c.CoordCommand = coordCommand
	r, err := Capacity(ctx, CapacityOptions{Common: c, Agents: []int{2, 4}, Warmup: 100 * time.Millisecond,
		Duration: 800 * time.Millisecond, JobEvery: 400 * time.Millisecond, Work: 10 * time.Millisecond,
		Grace: 5 * time.Second, Heartbeat: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	PrintCapacity(&out, r)
	for _, x := range r.Rows {
		if !x.Separate {
			t.Errorf("%d agents: the coordinator ran in this process", x.Agents)
		}
		if x.Assigned == 0 || x.Committed == 0 || x.Errors != 0 {
			t.Errorf("%d agents: %d/%d assigned, %d committed, %d errors (%s)\n%s", x.Agents, x.Assigned, x.Submitted, x.Committed, x.Errors, x.LastErr, out.String())
		}
	}
}

func TestFootprintScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the edgeagent binary")
	}
	if runtime.GOOS != "linux" {
		t.Skip("samples /proc")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	r, err := Footprint(ctx, FootprintOptions{Common: common(t), Idle: time.Second, Settle: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Phases) != 2 {
		t.Fatalf("%d phases", len(r.Phases))
	}
	for _, p := range r.Phases {
		if p.RSSEnd <= 0 || !p.Connected {
			t.Errorf("phase %+v", p)
		}
	}
}

func TestStepScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := Step(ctx, StepOptions{Common: common(t), Turns: 5, Warmup: 1, Width: 360, Height: 640})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	PrintStep(&out, r)
	if len(r.Rows) != 1 {
		t.Fatalf("%d rows:\n%s", len(r.Rows), out.String())
	}
	x := r.Rows[0]
	if x.Turns != 5 || x.RoundTrip.N != 5 || x.Phone.N != 5 || x.Capture.P50 <= 0 || x.PNGBytes == 0 || !strings.Contains(out.String(), "overhead p50") {
		t.Fatalf("row %+v\n%s", x, out.String())
	}
}

func TestMCPScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := MCP(ctx, MCPOptions{Common: common(t), Turns: 4, Warmup: 1, Width: 360, Height: 640})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	PrintMCP(&out, r)
	if len(r.Rows) != 1 {
		t.Fatalf("%d rows:\n%s", len(r.Rows), out.String())
	}
	x := r.Rows[0]
	for _, p := range []MCPWay{x.MCP, x.HTTP} {
		if p.Turn.N != 4 || p.Tap.N != 4 || p.Shot.N != 4 || p.Phone.N != 4 || p.Turn.P50 <= 0 {
			t.Errorf("way %+v", p)
		}
	}
	if x.Turns != 4 || x.PNGBytes == 0 || x.MCP.TotalCalls != 8 || !strings.Contains(out.String(), "mcp − http") {
		t.Fatalf("row %+v\n%s", x, out.String())
	}
}

func TestHostileScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the edgecoord binary")
	}
	if runtime.GOOS != "linux" {
		t.Skip("samples /proc")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	r, err := Hostile(ctx, HostileOptions{Common: common(t), Jobs: 5, JobEvery: 20 * time.Millisecond, Streams: 40, StreamTokens: 2,
		FloodRate: 2000, FloodMax: 5000, SlowBodies: 2, ReadTimeout: time.Second, SlowFor: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	PrintHostile(&out, r)
	t.Log(out.String())
	for _, p := range []HostilePhase{r.Quiet, r.Hostile} {
		if p.Succeeded != 5 || p.Heartbeat.N == 0 || p.RSSMax <= 0 {
			t.Errorf("%s: %d of 5 jobs succeeded, %d heartbeats, RSS %d", p.Name, p.Succeeded, p.Heartbeat.N, p.RSSMax)
		}
	}
	h := r.Hostile
	if h.StreamsAdmitted+h.StreamsRefused != 40 || h.StreamsAdmitted == 0 || h.StreamsRefused == 0 {
		t.Errorf("streams: %d admitted, %d refused, %d other; want 40 answered, some of each", h.StreamsAdmitted, h.StreamsRefused, h.StreamsOther)
	}
	if h.SlowCut != 2 {
		t.Errorf("slow bodies: %d cut off, %d open, %d failed; want 2 cut off", h.SlowCut, h.SlowOpen, h.SlowOther)
	}
	if h.FloodSent == 0 {
		t.Error("no flood sent")
	}
}
