// Command edgelab runs the whole edgeagent system in one process on
// embedded defaults and prints what happened.
package main

import (
	"context"
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
	if err != nil {
		fmt.Fprintln(os.Stderr, "edgelab:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "bench" {
		return runBench(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("edgelab", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("v", false, "print the components' logs to stderr")
	ttl := fs.Duration("lease-ttl", 5*time.Second, "coordinator lease TTL")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: edgelab [-v] [-lease-ttl D]\n\nRuns one screenshot job end to end and the stale-worker experiment.")
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
