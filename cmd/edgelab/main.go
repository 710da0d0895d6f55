// Command edgelab runs the whole edgeagent system in one process on
// embedded defaults and prints what happened.
//
// Usage:
//
//	edgelab [run] [-v] [-lease-ttl D]   one screenshot job end to end and the stale-worker experiment
//	edgelab chaos [flags]               seeded fault schedules, every history checked
//	edgelab bench [flags] [scenario...] the benchmark scenarios
//	edgelab help [command]              show help
//
// Exit status: 0 success, 1 failure, 2 bad usage.
package main

import (
	"context"
	"flag"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/testkit/lab"
)

func main() {
	ctx, _, stop := cli.Signals()
	code := cli.ExitCode(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
	stop()
	os.Exit(code)
}

// run executes the command line: run (the default), chaos and bench.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	app := &cli.App{
		Name: "edgelab",
		Description: `edgelab runs the whole edgeagent system in one process: NATS, an SQLite
coordinator, an in-process S3 and agents with simulated phones. Without a
command it runs the lab (edgelab run).`,
		Default:  "run",
		Commands: []*cli.Command{labCommand(), chaosCommand(), benchCommand(), benchCoordinatorCommand()},
		Stdout:   stdout, Stderr: stderr,
	}
	return app.Run(ctx, args)
}

// labCommand is `edgelab` and `edgelab run`: one screenshot job end to end
// and the stale-worker experiment.
func labCommand() *cli.Command {
	var (
		verbose bool
		ttl     time.Duration
	)
	return &cli.Command{
		Name:    "run",
		Summary: "run one screenshot job end to end and the stale-worker experiment (the default command)",
		Flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&verbose, "v", false, "print the components' logs to stderr")
			fs.DurationVar(&ttl, "lease-ttl", 5*time.Second, "coordinator lease TTL")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			log := zerolog.Nop()
			if verbose {
				log = zerolog.New(zerolog.ConsoleWriter{Out: c.Stderr}).With().Timestamp().Logger()
			}
			return lab.RunAll(ctx, lab.Options{LeaseTTL: ttl, Log: log}, c.Stdout)
		},
	}
}
