// Command edgeagent is the daemon that runs on a home PC and drives the
// Android phones attached to it for an edgecoord coordinator: it takes jobs
// over NATS, captures screenshots, UI dumps and recordings, uploads them to
// S3-compatible storage and reports results, every one fenced by the job's
// token.
//
// Usage:
//
//	edgeagent run [-c file]              run the agent in the foreground
//	edgeagent config validate [-c file]  check a config file
//	edgeagent version                    print the version
//	edgeagent help [command]             show help
//
// The config file defaults to /etc/edgeagent/config.yaml on Unix and
// C:\ProgramData\edgeagent\config.yaml on Windows; examples/agent.yaml
// documents every option. Exit status: 0 success, 1 failure, 2 bad usage or
// an invalid config.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"
)

// version is the release version, set at build time with
// -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	zerolog.TimeFieldFormat = timeFormat
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := exitCode(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
	stop()
	os.Exit(code)
}
