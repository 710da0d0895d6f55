// Command edgecoord is the reference coordinator of the edge agents: it
// serves them over NATS, keeps the job store (SQLite by default, or
// PostgreSQL), schedules jobs onto agents and reclaims expired leases, and
// accepts a result only from the holder of the job's current fencing token.
//
// Usage:
//
//	edgecoord serve [-c file]            run the coordinator in the foreground (alias: run)
//	edgecoord migrate                    create or upgrade the store's schema, say what it did
//	edgecoord job submit -f job.yaml     queue a job
//	edgecoord job list                   list jobs and what queued ones wait for
//	edgecoord job show ID                a job's generations and every write attempt
//	edgecoord job cancel ID              cancel a job, revoking its lease
//	edgecoord agent list                 list agents
//	edgecoord agent show ID              one agent: phones, jobs, settings
//	edgecoord agent status ID            ask a connected agent for its status document
//	edgecoord agent drain|resume ID      stop or restart giving an agent jobs
//	edgecoord agent config ID [k=v ...]  show or change an agent's runtime settings
//	edgecoord nats init --dir DIR        make the NATS operator, accounts and keys agents are enrolled with
//	edgecoord agent enroll NAME          print a one-time code that enrolls an agent (edgeagent enroll)
//	edgecoord agent revoke NAME          cut an agent off NATS and retry its running jobs elsewhere
//	edgecoord effect list                list effect intents (those in doubt need a decision) and outbox messages
//	edgecoord effect show KEY            one effect: state, receipt, evidence
//	edgecoord effect resolve KEY --done|--retry   decide an effect in doubt
//	edgecoord token create --project P [--scopes S] [--name N]   create an HTTP API token, printed once
//	edgecoord token list                 list API tokens (never their secrets)
//	edgecoord token revoke NAME|ID       revoke an API token
//	edgecoord config validate [-c file]  check a config file
//	edgecoord version                    print the version
//	edgecoord help [command]             show help
//
// The management commands work on the database the config names, whether or
// not a coordinator runs, and reach agents through NATS; --json makes them
// print JSON for scripts, and flags may follow the arguments. Only migrate
// and serve change the schema: the management commands refuse a schema
// older than the binary's. docs/operations.md describes running the
// coordinator; docs/api.md its HTTP API (api.listen), for which the token
// commands make credentials.
//
// The config file defaults to /etc/edgecoord/config.yaml on Unix and
// C:\ProgramData\edgecoord\config.yaml on Windows;
// examples/coordinator.yaml documents every option. Exit status: 0 success,
// 1 failure, 2 bad usage or an invalid config.
package main

import (
	"os"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/internal/redact"
)

// version is the release version, set at build time with
// -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	zerolog.TimeFieldFormat = timeFormat
	// No URL's query (a presigned URL's signature) in any logged error.
	zerolog.ErrorMarshalFunc = redact.ErrorMarshal
	ctx, _, stop := cli.Signals()
	code := exitCode(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
	stop()
	os.Exit(code)
}
