package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/testkit/chaos"
	"github.com/edgeagent/edgeagent/testkit/pgcluster"
)

// chaosCommand is `edgelab chaos`: seeded random fault schedules against
// the whole system, every history checked. It fails when a schedule broke a
// rule or could not run.
func chaosCommand() *cli.Command {
	var o chaosFlags
	return &cli.Command{
		Name:    "chaos",
		Summary: "run seeded random fault schedules against agents, coordinators, the job store, NATS and storage, and check every history",
		Flags:   o.define,
		Run: func(ctx context.Context, c *cli.Call) error {
			return runChaos(ctx, o, c.Stdout, c.Stderr)
		},
	}
}

// chaosFlags are the flags of edgelab chaos.
type chaosFlags struct {
	schedules, parallel, stopAfter, show int
	natsNodes                            int
	seed                                 int64
	store, pgDSN, s3ep, s3ak, s3sk       string
	htmlDir, outDir, kinds               string
	ttl                                  time.Duration
	verbose                              bool
}

func (o *chaosFlags) define(fs *flag.FlagSet) {
	fs.IntVar(&o.schedules, "schedules", 100, "number of schedules to run")
	fs.Int64Var(&o.seed, "seed", 1, "seed of the first schedule; schedule i runs seed+i")
	fs.StringVar(&o.store, "store", chaos.StoreSQLite, "job store: sqlite (a database file per schedule) or postgres")
	fs.StringVar(&o.pgDSN, "postgres-dsn", os.Getenv("EDGE_TEST_POSTGRES_URL"), "postgres: a database (over TCP) where the role may create schemas; each schedule gets one; empty starts a throwaway cluster with initdb (default $EDGE_TEST_POSTGRES_URL)")
	fs.IntVar(&o.natsNodes, "nats-cluster", 1, "NATS servers: 1 is one embedded server; 3 is a cluster of embedded servers joined by routes, with the nats-node-kill fault (needs -store postgres)")
	fs.StringVar(&o.s3ep, "s3-endpoint", "", "S3 server (host:port, plain HTTP) to use instead of an in-process one; each schedule creates and removes a bucket")
	fs.StringVar(&o.s3ak, "s3-access-key", os.Getenv("EDGE_CHAOS_S3_ACCESS_KEY"), "access key for -s3-endpoint (default $EDGE_CHAOS_S3_ACCESS_KEY)")
	fs.StringVar(&o.s3sk, "s3-secret-key", os.Getenv("EDGE_CHAOS_S3_SECRET_KEY"), "secret key for -s3-endpoint (default $EDGE_CHAOS_S3_SECRET_KEY)")
	fs.IntVar(&o.parallel, "parallel", 8, "schedules run at once")
	fs.DurationVar(&o.ttl, "lease-ttl", 500*time.Millisecond, "coordinator lease TTL; every other timing of a schedule is derived from it")
	fs.IntVar(&o.stopAfter, "stop-after", 0, "stop after this many failed schedules (0: run them all)")
	fs.IntVar(&o.show, "show", 3, "print the history of at most this many failed schedules")
	fs.StringVar(&o.htmlDir, "html", "", "write porcupine's view of non-linearizable histories into `dir`")
	fs.BoolVar(&o.verbose, "verbose", false, "print a line per schedule and the components' warnings to stderr")
	fs.BoolVar(&o.verbose, "v", false, "short for -verbose")
	fs.StringVar(&o.outDir, "out", "", "write the full history of every failed schedule into `dir` (chaos-<seed>.txt)")
	fs.StringVar(&o.kinds, "faults", "", "comma-separated fault kinds to draw from (default every kind: "+kindNames(chaos.DefaultKinds(1))+"; on a cluster also "+kindNames(chaos.ClusterKinds)+")")
}

// runChaos runs the schedules o asks for.
func runChaos(ctx context.Context, o chaosFlags, stdout, stderr io.Writer) error {
	if o.schedules <= 0 {
		return errors.New("-schedules must be positive")
	}
	if o.natsNodes < 1 || o.natsNodes > chaos.MaxNATSNodes {
		return fmt.Errorf("-nats-cluster %d: want 1 (one server) to %d", o.natsNodes, chaos.MaxNATSNodes)
	}
	if o.natsNodes > 1 && o.store != chaos.StorePostgres {
		return fmt.Errorf("-nats-cluster %d runs two coordinators on one PostgreSQL: add -store postgres", o.natsNodes)
	}
	opts := chaos.Options{Shape: chaos.Shape{LeaseTTL: o.ttl, NATSNodes: o.natsNodes}, Store: o.store, PostgresDSN: o.pgDSN}
	if o.kinds != "" {
		for _, k := range strings.Split(o.kinds, ",") {
			k = strings.TrimSpace(k)
			if !slices.Contains(chaos.AllKinds, chaos.Kind(k)) {
				return fmt.Errorf("unknown fault kind %q (want %s)", k, kindNames(chaos.AllKinds))
			}
			opts.Shape.Kinds = append(opts.Shape.Kinds, chaos.Kind(k))
		}
	}
	if o.s3ep != "" {
		opts.S3 = &chaos.S3Target{Endpoint: o.s3ep, AccessKey: o.s3ak, SecretKey: o.s3sk}
	}
	if opts.Store == chaos.StorePostgres && opts.PostgresDSN == "" {
		// Validate the rest first: a bad flag should not cost an initdb.
		probe := opts
		probe.PostgresDSN = "postgres://"
		if err := probe.Validate(); err != nil {
			return err
		}
		c, err := pgcluster.Start(pgcluster.Options{MaxConnections: 300})
		if err != nil {
			return fmt.Errorf("start postgres: %w (give -postgres-dsn)", err)
		}
		defer c.Stop()
		opts.PostgresDSN = c.DSN("postgres")
		fmt.Fprintf(stderr, "edgelab chaos: started a throwaway PostgreSQL in %s\n", c.Dir())
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	if o.verbose {
		opts.Log = zerolog.New(zerolog.ConsoleWriter{Out: stderr}).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	}
	nats := "one NATS server"
	if o.natsNodes > 1 {
		nats = fmt.Sprintf("a %d-node NATS cluster", o.natsNodes)
	}
	fmt.Fprintf(stdout, "edgelab chaos: schedules %d…%d on %s, %s, lease TTL %s, %d at once\n",
		o.seed, o.seed+int64(o.schedules)-1, o.store, nats, o.ttl, o.parallel)
	var (
		mu     sync.Mutex
		shown  int
		done   int
		failed int
		start  = time.Now()
	)
	st := chaos.RunMany(ctx, opts, chaos.RunOptions{
		Seed: o.seed, Schedules: o.schedules, Parallel: o.parallel, StopAfter: o.stopAfter,
		OnResult: func(r *chaos.Result) {
			mu.Lock()
			defer mu.Unlock()
			done++
			if r.Failed() {
				failed++
			}
			switch {
			case o.verbose:
				status := "ok"
				if r.Err != nil {
					status = "could not run: " + r.Err.Error()
				} else if r.Failed() {
					status = fmt.Sprintf("FAILED (%d violations)", len(r.Report.Violations))
				}
				fmt.Fprintf(stderr, "schedule %d: %s in %s\n", r.Seed, status, r.Took.Round(time.Millisecond))
			case done%100 == 0:
				fmt.Fprintf(stderr, "%d schedules, %d failed, %s\n", done, failed, time.Since(start).Round(time.Second))
			}
			if !r.Failed() {
				return
			}
			if r.Err != nil {
				fmt.Fprintf(stdout, "\nschedule %d could not run: %v\n", r.Seed, r.Err)
				return
			}
			fmt.Fprintf(stdout, "\nschedule %d FAILED (reproduce: edgelab chaos -seed %d -schedules 1 -store %s -nats-cluster %d -lease-ttl %s):\n", r.Seed, r.Seed, o.store, o.natsNodes, o.ttl)
			for _, v := range r.Report.Violations {
				fmt.Fprintf(stdout, "  %s\n", v)
			}
			if o.outDir != "" {
				if err := writeHistory(o.outDir, r); err != nil {
					fmt.Fprintf(stderr, "edgelab chaos: %v\n", err)
				}
			}
			if shown < o.show {
				shown++
				r.History.Format(stdout, r.Report, r.Report.FailedJobs()...)
			}
			if o.htmlDir != "" && len(r.Report.Illegal) > 0 {
				files, err := r.Report.WriteVisualization(o.htmlDir)
				if err != nil {
					fmt.Fprintf(stderr, "edgelab chaos: %v\n", err)
				}
				for _, f := range files {
					fmt.Fprintf(stdout, "  linearizability view: %s\n", f)
				}
			}
		},
	})
	fmt.Fprintln(stdout)
	st.Print(stdout)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("chaos run interrupted: %w", err)
	}
	if !st.OK() {
		return fmt.Errorf("%d of %d schedules failed", len(st.Failed), st.Schedules)
	}
	return nil
}

func kindNames(kinds []chaos.Kind) string {
	var names []string
	for _, k := range kinds {
		names = append(names, string(k))
	}
	return strings.Join(names, ",")
}

// writeHistory writes a failed schedule's whole history into dir.
func writeHistory(dir string, r *chaos.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("chaos-%d.txt", r.Seed)))
	if err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	for _, v := range r.Report.Violations {
		fmt.Fprintf(f, "%s\n", v)
	}
	r.History.Format(f, r.Report)
	if err := f.Close(); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}
