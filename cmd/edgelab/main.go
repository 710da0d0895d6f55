// Command edgelab runs the whole edgeagent system in one process on
// embedded defaults and prints what happened.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/internal/lab"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "edgelab:", err)
		os.Exit(1)
	}
}

// run dispatches the subcommands: run (the default), chaos and bench.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "bench":
			return runBench(ctx, args[1:], stdout, stderr)
		case "chaos":
			return runChaos(ctx, args[1:], stdout, stderr)
		case "run":
			return runLab(ctx, args[1:], stdout, stderr)
		}
	}
	return runLab(ctx, args, stdout, stderr)
}

// runLab is `edgelab` and `edgelab run`: one screenshot job end to end and
// the stale-worker experiment.
func runLab(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("edgelab", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("v", false, "print the components' logs to stderr")
	ttl := fs.Duration("lease-ttl", 5*time.Second, "coordinator lease TTL")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: edgelab [run] [-v] [-lease-ttl D]\n       edgelab chaos [flags]   (see edgelab chaos -h)\n       edgelab bench [flags]   (see edgelab bench -h)\n\nRuns one screenshot job end to end and the stale-worker experiment.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := zerolog.Nop()
	if *verbose {
		log = zerolog.New(zerolog.ConsoleWriter{Out: stderr}).With().Timestamp().Logger()
	}
	return lab.RunAll(ctx, lab.Options{LeaseTTL: *ttl, Log: log}, stdout)
}
