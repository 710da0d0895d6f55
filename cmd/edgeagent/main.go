// Command edgeagent is the daemon that runs on a home PC and drives the
// Android phones attached to it for an edgecoord coordinator: it takes jobs
// over NATS, captures screenshots, UI dumps and recordings, uploads them to
// S3-compatible storage and reports results, every one fenced by the job's
// token.
//
// Usage:
//
//	edgeagent run [-c file]              run the agent in the foreground
//	edgeagent enroll --coordinator URL CODE [-c file] [--install]
//	                                     make this PC an agent with a one-time code
//	edgeagent status [-c file]           show what the running agent is doing
//	edgeagent doctor [-c file]           check the setup and say how to fix it
//	edgeagent config validate [-c file]  check a config file
//	edgeagent version                    print the version
//	edgeagent help [command]             show help
//
// The config file defaults to /etc/edgeagent/config.yaml on Unix and
// C:\ProgramData\edgeagent\config.yaml on Windows; examples/agent.yaml
// documents every option. Exit status: 0 success, 1 failure, 2 bad usage or
// an invalid config, 75 (`run`) after a self-update swapped in a new binary
// or put the previous one back, for the service manager to start
// (docs/updates.md).
//
// The first SIGTERM or interrupt drains the agent: it takes no new job, lets
// running jobs finish for up to jobs.shutdown_timeout, releases the rest to
// the coordinator and exits 0. A second signal stops at once.
package main

import (
	"os"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/internal/redact"
)

// version is the release version, set at build time with
// -ldflags "-X main.version=v1.2.3" (`edgeagent version` prints it, hello
// reports it, and self-updates compare it with a release's;
// docs/updates.md). A build without it is "dev".
var version = "dev"

func main() {
	zerolog.TimeFieldFormat = timeFormat
	// No URL's query (a presigned URL's signature) in any logged error.
	zerolog.ErrorMarshalFunc = redact.ErrorMarshal
	// Started by the Windows service manager: run under its control.
	if code, ok := serviceMain(os.Args[1:]); ok {
		os.Exit(code)
	}
	ctx, hard, stop := cli.Signals() // drain, then stop at once
	code := exitCode(run(ctx, hard, os.Args[1:], os.Stdout, os.Stderr))
	stop()
	os.Exit(code)
}
