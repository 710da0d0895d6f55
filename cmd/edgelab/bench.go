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

	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/testkit/bench"
)

// benchScenarios are the scenarios of `edgelab bench`, in the order "all"
// runs them.
var benchScenarios = []string{"stop", "commit", "capacity", "footprint", "step", "mcp", "sse", "hostile", "schedules"}

// benchCommand is `edgelab bench`: it runs the named scenarios (all when
// none or "all" is named) and prints their tables.
func benchCommand() *cli.Command {
	var o benchFlags
	return &cli.Command{
		Name:    "bench",
		Summary: "run benchmark scenarios and print their tables",
		Args:    "[" + strings.Join(benchScenarios, "|") + "|all]...",
		CheckArgs: func(names []string) error {
			for _, n := range names {
				if n != "all" && !slices.Contains(benchScenarios, n) {
					return fmt.Errorf("unknown scenario %q (want %s or all)", n, strings.Join(benchScenarios, ", "))
				}
			}
			return nil
		},
		Flags: o.define,
		Run: func(ctx context.Context, c *cli.Call) error {
			return runBench(ctx, o, c.Args, c.Stdout, c.Stderr)
		},
	}
}

// benchCoordinatorCommand is `edgelab bench coordinator`, the coordinator
// process the commit and capacity scenarios start; it parses its own flags.
func benchCoordinatorCommand() *cli.Command {
	return &cli.Command{
		Name:    "bench coordinator",
		Summary: "serve a coordinator for the commit and capacity scenarios (started by them)",
		Raw:     true,
		Run: func(ctx context.Context, c *cli.Call) error {
			return bench.ServeCoordinator(ctx, c.Args, c.Stdout, c.Stderr)
		},
	}
}

// benchFlags are the flags of edgelab bench.
type benchFlags struct {
	stores, pgURL, dir, profile, agentCounts, agentBin string
	inProcess, verbose                                 bool
	stops, fenceStops, pairs, senders, commitJobs      int
	stepTurns, mcpTurns                                int
	sequential, rounds, roundPairs                     int
	stopTTL, margin, commitDur, capDur, jobEvery, work time.Duration
	idle                                               time.Duration
	sseWatchers, sseEvents                             int
	sseEvery                                           time.Duration
	ssePolls                                           string
	schedules                                          int
	schedDur, schedEvery, schedInterval                time.Duration
	coordBin                                           string
	hostileJobs, hostileStreams, hostileTokens         int
	floodRate, floodMax, slowBodies                    int
	hostileJobEvery, hostileHB, slowFor                time.Duration
}

func (o *benchFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&o.stores, "store", "sqlite,postgres", "stores to run on: sqlite, postgres or both (comma-separated)")
	fs.StringVar(&o.pgURL, "postgres-url", os.Getenv("EDGE_BENCH_POSTGRES_URL"), "PostgreSQL server to create the benchmark databases on (a role that may CREATE DATABASE); empty starts a throwaway cluster with initdb (default $EDGE_BENCH_POSTGRES_URL)")
	fs.StringVar(&o.dir, "dir", "", "keep databases, logs and profiles in `dir` (default: a temporary directory, removed)")
	fs.StringVar(&o.profile, "profile", "", "write a CPU profile of the coordinator process of each commit and capacity run into `dir`")
	fs.BoolVar(&o.inProcess, "in-process", false, "run the coordinator in this process instead of a process of its own (its CPU and RSS are then this process's)")
	fs.BoolVar(&o.verbose, "v", false, "print progress to stderr")
	fs.IntVar(&o.stops, "stops", 1000, "stop: stops per way for revoke and 409")
	fs.IntVar(&o.fenceStops, "fence-stops", 100, "stop: stops for the self-fence deadline and the lease-expiry baseline")
	fs.IntVar(&o.pairs, "pairs", 4, "stop: agent pairs stopping jobs at once")
	fs.DurationVar(&o.stopTTL, "stop-ttl", 3*time.Second, "stop: lease TTL")
	fs.DurationVar(&o.margin, "safety-margin", 500*time.Millisecond, "stop: the agents' self-fence safety margin")
	fs.IntVar(&o.senders, "senders", 64, "commit: agents sending results at once")
	fs.IntVar(&o.commitJobs, "commit-jobs", 120000, "commit: in-progress jobs seeded for the throughput run")
	fs.DurationVar(&o.commitDur, "commit-duration", 10*time.Second, "commit: measured window")
	fs.IntVar(&o.sequential, "sequential", 1000, "commit: accepted and stale results sent one at a time")
	fs.IntVar(&o.rounds, "rounds", 30, "commit: rounds of the fenced against unfenced UPDATE")
	fs.IntVar(&o.roundPairs, "round-pairs", 500, "commit: statement pairs per round")
	fs.StringVar(&o.agentCounts, "agents", "100,300,1000", "capacity: simulated agent counts")
	fs.DurationVar(&o.capDur, "capacity-duration", 30*time.Second, "capacity: measured window per agent count")
	fs.DurationVar(&o.jobEvery, "job-every", 10*time.Second, "capacity: each agent gets a job this often on average")
	fs.DurationVar(&o.work, "work", time.Second, "capacity: time a job takes on the agent besides its steps")
	fs.StringVar(&o.agentBin, "agent-bin", "", "footprint: edgeagent binary (default: go build ./cmd/edgeagent)")
	fs.DurationVar(&o.idle, "idle", 30*time.Second, "footprint: idle time sampled")
	fs.IntVar(&o.stepTurns, "step-turns", 500, "step: measured turns of tap + screenshot (720×1280), one HTTP call each")
	fs.IntVar(&o.mcpTurns, "mcp-turns", 500, "mcp: measured turns of tap + screenshot (720×1280) per way: two MCP tool calls, and the same two steps over the sessions API")
	fs.IntVar(&o.sseWatchers, "sse-watchers", 1000, "sse: concurrent event streams")
	fs.IntVar(&o.sseEvents, "sse-events", 200, "sse: jobs submitted (one event each)")
	fs.DurationVar(&o.sseEvery, "sse-every", 50*time.Millisecond, "sse: time between two submits")
	fs.StringVar(&o.coordBin, "coord-bin", "", "hostile: edgecoord binary (default: go build ./cmd/edgecoord)")
	fs.IntVar(&o.hostileJobs, "hostile-jobs", 100, "hostile: one-step jobs of the well-behaved agent per phase")
	fs.DurationVar(&o.hostileJobEvery, "hostile-job-every", 250*time.Millisecond, "hostile: time between two submits of the well-behaved workload")
	fs.DurationVar(&o.hostileHB, "hostile-heartbeat", 200*time.Millisecond, "hostile: agents.heartbeat of the coordinator")
	fs.IntVar(&o.hostileStreams, "hostile-streams", 2000, "hostile: event-stream attempts, half /api/v1/events, half /ui/events")
	fs.IntVar(&o.hostileTokens, "hostile-tokens", 80, "hostile: read tokens the stream attempts are spread over")
	fs.IntVar(&o.floodRate, "flood-rate", 20000, "hostile: heartbeats a second of the flooding agent")
	fs.IntVar(&o.floodMax, "flood-max", 2000000, "hostile: at most this many flood heartbeats")
	fs.IntVar(&o.slowBodies, "slow-bodies", 50, "hostile: connections sending a body at 1 byte/s")
	fs.DurationVar(&o.slowFor, "slow-for", 45*time.Second, "hostile: how long a slow body is sent at most")
	fs.StringVar(&o.ssePolls, "sse-poll", "100ms", "sse: broker poll intervals, one run each (comma-separated durations)")
	fs.IntVar(&o.schedules, "schedules", 10000, "schedules: recurring schedules on the coordinator")
	fs.DurationVar(&o.schedDur, "schedules-duration", 3*time.Minute, "schedules: measured window")
	fs.DurationVar(&o.schedEvery, "schedules-every", 0, "schedules: give every schedule this interval (all due at once); 0: hourly cron expressions at minute i mod 60")
	fs.DurationVar(&o.schedInterval, "schedules-interval", time.Second, "schedules: the schedule loop's interval (schedules.interval)")
}

// runBench runs the scenarios names with the flags o.
func runBench(ctx context.Context, o benchFlags, names []string, stdout, stderr io.Writer) error {
	if len(names) == 0 || slices.Contains(names, "all") {
		names = benchScenarios
	}
	var drivers []string
	for _, d := range strings.Split(o.stores, ",") {
		switch d = strings.TrimSpace(d); d {
		case bench.DriverSQLite, bench.DriverPostgres:
			drivers = append(drivers, d)
		case "":
		default:
			return fmt.Errorf("-store: unknown store %q (want sqlite, postgres)", d)
		}
	}
	counts, err := parseInts(o.agentCounts)
	if err != nil {
		return fmt.Errorf("-agents: %w", err)
	}
	common := bench.Common{Dir: o.dir, ProfileDir: o.profile}
	if o.verbose {
		common.Log = stderr
	}
	if !o.inProcess {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find own executable: %w", err)
		}
		common.CoordCommand = func(args ...string) *exec.Cmd {
			return exec.Command(exe, append([]string{"bench", "coordinator"}, args...)...)
		}
	}
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return fmt.Errorf("create profile dir: %w", err)
		}
	}
	needPG := slices.Contains(drivers, bench.DriverPostgres) && (slices.Contains(names, "commit") || slices.Contains(names, "capacity") || slices.Contains(names, "step") || slices.Contains(names, "mcp") || slices.Contains(names, "sse") || slices.Contains(names, "schedules"))
	if needPG {
		pg, err := bench.OpenPostgres(ctx, o.pgURL)
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		defer pg.Close()
		common.Postgres = pg
	}
	fmt.Fprintf(stdout, "edgelab bench: %s\n", bench.DescribeMachine())
	if common.Postgres != nil {
		fmt.Fprintf(stdout, "PostgreSQL %s", common.Postgres.Version)
		if o.pgURL == "" {
			fmt.Fprint(stdout, " (throwaway cluster, fsync off)")
		}
		fmt.Fprintln(stdout)
	}
	for _, n := range names {
		fmt.Fprintf(stdout, "\n== %s (load average %s)\n", n, bench.LoadAvg())
		start := time.Now()
		switch n {
		case "stop":
			r, err := bench.Stop(ctx, bench.StopOptions{Common: common, Stops: o.stops, FenceStops: o.fenceStops, Pairs: o.pairs, LeaseTTL: o.stopTTL, SafetyMargin: o.margin})
			if r != nil {
				bench.PrintStop(stdout, r)
			}
			if err != nil {
				return err
			}
		case "commit":
			r, err := bench.Commit(ctx, bench.CommitOptions{Common: common, Drivers: drivers, Senders: o.senders, Jobs: o.commitJobs,
				Duration: o.commitDur, Sequential: o.sequential, Rounds: o.rounds, Pairs: o.roundPairs})
			if r != nil {
				bench.PrintCommit(stdout, r)
			}
			if err != nil {
				return err
			}
		case "capacity":
			r, err := bench.Capacity(ctx, bench.CapacityOptions{Common: common, Drivers: drivers, Agents: counts, Duration: o.capDur, JobEvery: o.jobEvery, Work: o.work})
			if r != nil {
				bench.PrintCapacity(stdout, r)
			}
			if err != nil {
				return err
			}
		case "step":
			r, err := bench.Step(ctx, bench.StepOptions{Common: common, Drivers: drivers, Turns: o.stepTurns})
			if r != nil {
				bench.PrintStep(stdout, r)
			}
			if err != nil {
				return err
			}
		case "mcp":
			r, err := bench.MCP(ctx, bench.MCPOptions{Common: common, Drivers: drivers, Turns: o.mcpTurns})
			if r != nil {
				bench.PrintMCP(stdout, r)
			}
			if err != nil {
				return err
			}
		case "sse":
			var polls []time.Duration
			for _, f := range strings.Split(o.ssePolls, ",") {
				d, err := time.ParseDuration(strings.TrimSpace(f))
				if err != nil || d <= 0 {
					return fmt.Errorf("-sse-poll: %q is not a positive duration", f)
				}
				polls = append(polls, d)
			}
			r, err := bench.SSE(ctx, bench.SSEOptions{Common: common, Drivers: drivers, Watchers: o.sseWatchers, Events: o.sseEvents, Every: o.sseEvery, Intervals: polls})
			if r != nil {
				bench.PrintSSE(stdout, r)
			}
			if err != nil {
				return err
			}
		case "schedules":
			if o.schedules <= 0 || o.schedDur <= 0 || o.schedEvery < 0 || o.schedInterval <= 0 {
				return errors.New("-schedules, -schedules-duration and -schedules-interval must be positive, -schedules-every not negative")
			}
			r, err := bench.Schedules(ctx, bench.SchedulesOptions{Common: common, Drivers: drivers, Schedules: o.schedules,
				Duration: o.schedDur, Every: o.schedEvery, Interval: o.schedInterval})
			if r != nil {
				bench.PrintSchedules(stdout, r)
			}
			if err != nil {
				return err
			}
		case "hostile":
			r, err := bench.Hostile(ctx, bench.HostileOptions{Common: common, CoordBin: o.coordBin, Jobs: o.hostileJobs, JobEvery: o.hostileJobEvery,
				Heartbeat: o.hostileHB, Streams: o.hostileStreams, StreamTokens: o.hostileTokens, FloodRate: o.floodRate, FloodMax: o.floodMax,
				SlowBodies: o.slowBodies, SlowFor: o.slowFor})
			if r != nil {
				bench.PrintHostile(stdout, r)
			}
			if err != nil {
				return err
			}
		case "footprint":
			r, err := bench.Footprint(ctx, bench.FootprintOptions{Common: common, AgentBin: o.agentBin, Idle: o.idle})
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
