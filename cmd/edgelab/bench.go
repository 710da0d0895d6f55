package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/internal/bench"
)

// benchScenarios are the scenarios of `edgelab bench`, in the order "all"
// runs them.
var benchScenarios = []string{"stop", "commit", "capacity", "footprint"}

// runBench is `edgelab bench`: it runs the named scenarios (all when none
// or "all" is named) and prints their tables. `edgelab bench coordinator`
// is the coordinator process the commit and capacity scenarios start.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "coordinator" {
		return bench.ServeCoordinator(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("edgelab bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		stores      = fs.String("store", "sqlite,postgres", "stores to run on: sqlite, postgres or both (comma-separated)")
		pgURL       = fs.String("postgres-url", os.Getenv("EDGE_BENCH_POSTGRES_URL"), "PostgreSQL server to create the benchmark databases on (a role that may CREATE DATABASE); empty starts a throwaway cluster with initdb (default $EDGE_BENCH_POSTGRES_URL)")
		dir         = fs.String("dir", "", "keep databases, logs and profiles in `dir` (default: a temporary directory, removed)")
		profile     = fs.String("profile", "", "write a CPU profile of the coordinator process of each commit and capacity run into `dir`")
		inProcess   = fs.Bool("in-process", false, "run the coordinator in this process instead of a process of its own (its CPU and RSS are then this process's)")
		verbose     = fs.Bool("v", false, "print progress to stderr")
		stops       = fs.Int("stops", 1000, "stop: stops per way for revoke and 409")
		fenceStops  = fs.Int("fence-stops", 100, "stop: stops for the self-fence deadline and the lease-expiry baseline")
		pairs       = fs.Int("pairs", 4, "stop: agent pairs stopping jobs at once")
		stopTTL     = fs.Duration("stop-ttl", 3*time.Second, "stop: lease TTL")
		margin      = fs.Duration("safety-margin", 500*time.Millisecond, "stop: the agents' self-fence safety margin")
		senders     = fs.Int("senders", 64, "commit: agents sending results at once")
		commitJobs  = fs.Int("commit-jobs", 120000, "commit: in-progress jobs seeded for the throughput run")
		commitDur   = fs.Duration("commit-duration", 10*time.Second, "commit: measured window")
		sequential  = fs.Int("sequential", 1000, "commit: accepted and stale results sent one at a time")
		rounds      = fs.Int("rounds", 30, "commit: rounds of the fenced against unfenced UPDATE")
		roundPairs  = fs.Int("round-pairs", 500, "commit: statement pairs per round")
		agentCounts = fs.String("agents", "100,300,1000", "capacity: simulated agent counts")
		capDur      = fs.Duration("capacity-duration", 30*time.Second, "capacity: measured window per agent count")
		jobEvery    = fs.Duration("job-every", 10*time.Second, "capacity: each agent gets a job this often on average")
		work        = fs.Duration("work", time.Second, "capacity: time a job takes on the agent besides its steps")
		agentBin    = fs.String("agent-bin", "", "footprint: edgeagent binary (default: go build ./cmd/edgeagent into a temp dir)")
		idle        = fs.Duration("idle", 30*time.Second, "footprint: idle time sampled")
	)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: edgelab bench [flags] [%s|all]...\n\nRuns benchmark scenarios and prints their tables.\n\n", strings.Join(benchScenarios, "|"))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	names := fs.Args()
	if len(names) == 0 || slices.Contains(names, "all") {
		names = benchScenarios
	}
	for _, n := range names {
		if !slices.Contains(benchScenarios, n) {
			return fmt.Errorf("unknown scenario %q (want %s or all)", n, strings.Join(benchScenarios, ", "))
		}
	}
	var drivers []string
	for _, d := range strings.Split(*stores, ",") {
		switch d = strings.TrimSpace(d); d {
		case bench.DriverSQLite, bench.DriverPostgres:
			drivers = append(drivers, d)
		case "":
		default:
			return fmt.Errorf("-store: unknown store %q (want sqlite, postgres)", d)
		}
	}
	counts, err := parseInts(*agentCounts)
	if err != nil {
		return fmt.Errorf("-agents: %w", err)
	}
	common := bench.Common{Dir: *dir, ProfileDir: *profile}
	if *verbose {
		common.Log = stderr
	}
	if !*inProcess {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find own executable: %w", err)
		}
		common.CoordCommand = func(args ...string) *exec.Cmd {
			return exec.Command(exe, append([]string{"bench", "coordinator"}, args...)...)
		}
	}
	if *profile != "" {
		if err := os.MkdirAll(*profile, 0o755); err != nil {
			return fmt.Errorf("create profile dir: %w", err)
		}
	}
	needPG := slices.Contains(drivers, bench.DriverPostgres) && (slices.Contains(names, "commit") || slices.Contains(names, "capacity"))
	if needPG {
		pg, err := bench.OpenPostgres(ctx, *pgURL)
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		defer pg.Close()
		common.Postgres = pg
	}
	fmt.Fprintf(stdout, "edgelab bench: %s\n", bench.DescribeMachine())
	if common.Postgres != nil {
		fmt.Fprintf(stdout, "PostgreSQL %s", common.Postgres.Version)
		if *pgURL == "" {
			fmt.Fprint(stdout, " (throwaway cluster, fsync off)")
		}
		fmt.Fprintln(stdout)
	}
	for _, n := range names {
		fmt.Fprintf(stdout, "\n== %s (load average %s)\n", n, bench.LoadAvg())
		start := time.Now()
		switch n {
		case "stop":
			r, err := bench.Stop(ctx, bench.StopOptions{Common: common, Stops: *stops, FenceStops: *fenceStops, Pairs: *pairs, LeaseTTL: *stopTTL, SafetyMargin: *margin})
			if r != nil {
				bench.PrintStop(stdout, r)
			}
			if err != nil {
				return err
			}
		case "commit":
			r, err := bench.Commit(ctx, bench.CommitOptions{Common: common, Drivers: drivers, Senders: *senders, Jobs: *commitJobs,
				Duration: *commitDur, Sequential: *sequential, Rounds: *rounds, Pairs: *roundPairs})
			if r != nil {
				bench.PrintCommit(stdout, r)
			}
			if err != nil {
				return err
			}
		case "capacity":
			r, err := bench.Capacity(ctx, bench.CapacityOptions{Common: common, Drivers: drivers, Agents: counts, Duration: *capDur, JobEvery: *jobEvery, Work: *work})
			if r != nil {
				bench.PrintCapacity(stdout, r)
			}
			if err != nil {
				return err
			}
		case "footprint":
			r, err := bench.Footprint(ctx, bench.FootprintOptions{Common: common, AgentBin: *agentBin, Idle: *idle})
			if r != nil {
				bench.PrintFootprint(stdout, r)
			}
			if err != nil {
				return err
			}
		}
		fmt.Fprintf(stdout, "(%s took %v; load average now %s)\n", n, time.Since(start).Round(time.Second), bench.LoadAvg())
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, errors.New("want positive integers separated by commas, got " + strconv.Quote(s))
		}
		out = append(out, n)
	}
	return out, nil
}
