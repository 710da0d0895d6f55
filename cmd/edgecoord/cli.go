package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/internal/natsconn"
	"github.com/edgeagent/edgeagent/protocol"
)

const (
	progName = "edgecoord"

	// timeFormat is the log timestamp and how tables print times: RFC 3339
	// with milliseconds.
	timeFormat = cli.TimeFormat
)

// Exit statuses.
const (
	exitFailure = cli.ExitFailure // the command failed
	exitUsage   = cli.ExitUsage   // bad command line or invalid config
)

// exitCode maps the error returned by run to the process exit status.
func exitCode(err error) int { return cli.ExitCode(err) }

// run executes the command line args (without the program name), writing
// output to stdout and diagnostics to stderr. It reports every error itself;
// the caller only maps the result to an exit status with exitCode.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return newApp(stdout, stderr, startCoordinator).Run(ctx, args)
}

// newApp returns the command line of edgecoord with start as the
// coordinator's runtime.
func newApp(stdout, stderr io.Writer, start func(context.Context, *config.Coordinator, zerolog.Logger) error) *cli.App {
	return newAppWith(stdout, stderr, start, &mgmt{now: time.Now})
}

// newAppWith is newApp with the management commands' clock and read-only
// store opener of m.
func newAppWith(stdout, stderr io.Writer, start func(context.Context, *config.Coordinator, zerolog.Logger) error, m *mgmt) *cli.App {
	cmds := []*cli.Command{serveCommand(start), m.migrateCommand()}
	cmds = append(cmds, m.jobCommands()...)
	cmds = append(cmds, m.scheduleCommands()...)
	cmds = append(cmds, m.eventCommands()...)
	cmds = append(cmds, m.agentCommands()...)
	cmds = append(cmds, m.enrollCommands()...)
	cmds = append(cmds, m.effectCommands()...)
	cmds = append(cmds, m.tokenCommands()...)
	cmds = append(cmds, m.observationCommands()...)
	cmds = append(cmds, m.apkCommands()...)
	cmds = append(cmds, m.releaseCommands()...)
	cmds = append(cmds, m.rolloutCommands()...)
	cmds = append(cmds,
		cli.ValidateCommand(config.DefaultCoordinatorFile, config.LoadCoordinator),
		cli.VersionCommand(version),
	)
	return &cli.App{
		Name: progName,
		Description: progName + ` is the coordinator of the edge agents: it serves them over NATS, keeps
the job store, schedules jobs and reclaims expired leases.`,
		ExitHelp: cli.DaemonExitHelp,
		Commands: cmds,
		Stdout:   stdout, Stderr: stderr,
	}
}

// serveCommand runs the coordinator in the foreground until it is
// interrupted; "run" is the same command.
func serveCommand(start func(context.Context, *config.Coordinator, zerolog.Logger) error) *cli.Command {
	cmd := &cli.Command{Name: "serve", Aliases: []string{"run"}, Summary: "run the coordinator in the foreground until interrupted"}
	return cli.DaemonCommand(cmd, version, config.DefaultCoordinatorFile, config.LoadCoordinator,
		func(ctx context.Context, c *cli.Call, cfg *config.Coordinator, d cli.Daemon) error {
			w, level := cli.LogOutput(cfg.Log, c.Stderr)
			d.Log = zerolog.New(w).Level(level).With().Timestamp().Str("coordinator_id", cfg.CoordinatorID).Logger()
			return d.Run(ctx, c, func(ctx context.Context) error { return start(ctx, cfg, d.Log) })
		})
}

// mgmt is what the management commands share: the config file (the store
// to open and the NATS server for pushes to agents) and the clock ages are
// measured with. They talk to the database directly, so they work whether
// or not a coordinator runs, and to NATS only to push revokes and control
// commands.
type mgmt struct {
	configPath string
	cfg        *config.Coordinator
	now        func() time.Time
}

// flags defines the -c flag of a management command.
func (m *mgmt) flags(fs *flag.FlagSet) {
	fs.StringVar(&m.configPath, "c", config.DefaultCoordinatorFile, "read the configuration from `file`")
}

// load reads the config file.
func (m *mgmt) load(c *cli.Call) error {
	cfg, err := config.LoadCoordinator(m.configPath)
	if err != nil {
		return cli.ConfigError(c.Stderr, err)
	}
	m.cfg = cfg
	return nil
}

// open loads the config and opens the store. It does not migrate: only
// edgecoord migrate and serve do. A schema older than this binary's is
// refused with the advice to run edgecoord migrate.
func (m *mgmt) open(ctx context.Context, c *cli.Call) (jobstore.Store, error) {
	if err := m.load(c); err != nil {
		return nil, err
	}
	store, err := coordinator.OpenExistingStore(ctx, m.cfg.Store)
	if errors.Is(err, jobstore.ErrSchemaOutdated) {
		return nil, c.Failf("%v\nrun \"%s migrate -c %s\" with this binary first", err, progName, m.configPath)
	}
	return store, err
}

// connect dials NATS with the coordinator's credentials and waits up to the
// request timeout for the connection.
func (m *mgmt) connect() (*nats.Conn, error) {
	nc, err := natsconn.Connect(m.cfg.NATS, natsconn.Options{
		Name: "edgecoord cli", InboxPrefix: coordinator.InboxPrefix, Log: zerolog.Nop(),
	})
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(m.cfg.NATS.RequestTimeout.Duration())
	for !nc.IsConnected() {
		if time.Now().After(deadline) {
			nc.Close()
			return nil, fmt.Errorf("connect nats: not connected after %s", m.cfg.NATS.RequestTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nc, nil
}

// push sends a control command to an agent and returns its reply, or says
// why it could not.
func (m *mgmt) push(ctx context.Context, agentID string, ctl protocol.Control) ([]byte, error) {
	nc, err := m.connect()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, m.cfg.NATS.RequestTimeout.Duration())
	defer cancel()
	return coordinator.PushControl(ctx, nc, agentID, ctl)
}

// revoke publishes a revoke and flushes it to the server.
func (m *mgmt) revoke(tok fencing.Token, reason string) error {
	nc, err := m.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	return coordinator.PublishRevoke(nc, tok, reason, m.cfg.NATS.RequestTimeout.Duration())
}

// oneID is the positional argument of the commands that take one ID.
var oneID = cli.ExactArgs(1, "ID")

func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
