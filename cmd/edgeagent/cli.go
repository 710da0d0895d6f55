package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/internal/cli"
)

const (
	progName = "edgeagent"

	// timeFormat is the log timestamp: RFC 3339 with milliseconds.
	timeFormat = cli.TimeFormat
)

// Exit status of a failed command, for exitError.
const exitFailure = cli.ExitFailure

// exitError ends the process with code; whatever caused it has already been
// reported.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }
func (e *exitError) ExitCode() int { return e.code }

// exitCode maps the error returned by run to the process exit status.
func exitCode(err error) int { return cli.ExitCode(err) }

// run executes the command line args (without the program name), writing
// output to stdout and diagnostics to stderr. It reports every error itself;
// the caller only maps the result to an exit status with exitCode. Closing
// hardStop stops a running agent at once, even while it drains.
func run(ctx context.Context, hardStop <-chan struct{}, args []string, stdout, stderr io.Writer) error {
	a := newApp(stdout, stderr, startAgent)
	a.hardStop = hardStop
	return a.run(ctx, args)
}

// app is the command-line interface: the output streams the commands write
// to, and the clock the status command measures ages with.
type app struct {
	stdout, stderr io.Writer
	now            func() time.Time
	cli            *cli.App
	hardStop       <-chan struct{} // see run
}

func newApp(stdout, stderr io.Writer, start startFunc) *app {
	a := &app{stdout: stdout, stderr: stderr, now: time.Now}
	a.cli = &cli.App{
		Name: progName,
		Description: progName + ` runs jobs from an edgecoord coordinator on the Android phones attached
to this computer.`,
		ExitHelp: cli.DaemonExitHelp,
		Stdout:   stdout, Stderr: stderr,
	}
	a.cli.Commands = []*cli.Command{
		a.runCommand(start),
		a.statusCommand(),
		adapt(&doctorCommand{app: a}),
		cli.ValidateCommand(config.DefaultAgentFile, config.LoadAgent),
		cli.VersionCommand(version),
		a.enrollCommand(),
	}
	a.cli.Commands = append(a.cli.Commands, adaptAll(serviceCommands(a))...)
	return a
}

func (a *app) run(ctx context.Context, args []string) error { return a.cli.Run(ctx, args) }

// command is a command written as a type with its own flag set (doctor and
// the service commands); adapt makes it a cli.Command.
type command interface {
	// name is the command as typed, such as "service install".
	name() string
	// summary is a one-line description.
	summary() string
	// flags returns the command's flag set, writing to w.
	flags(w io.Writer) *flag.FlagSet
	// run executes the command with the flag set already parsed.
	run(ctx context.Context, fs *flag.FlagSet) error
}

// adapt returns cmd as a cli.Command named cmd.name() with aliases.
func adapt(cmd command, aliases ...string) *cli.Command {
	var own *flag.FlagSet
	return &cli.Command{
		Name: cmd.name(), Aliases: aliases, Summary: cmd.summary(),
		Flags: func(fs *flag.FlagSet) {
			own = cmd.flags(io.Discard)
			own.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
		},
		Run: func(ctx context.Context, _ *cli.Call) error { return cmd.run(ctx, own) },
	}
}

// adaptAll adapts cmds, making a command that is another's name without
// its group ("install" for "service install") an alias of it.
func adaptAll(cmds []command) []*cli.Command {
	names := map[string]bool{}
	for _, cmd := range cmds {
		names[cmd.name()] = true
	}
	var out []*cli.Command
	for _, cmd := range cmds {
		if short, ok := strings.CutPrefix(cmd.name(), "service "); ok && names[short] {
			continue // listed under its short name
		}
		var aliases []string
		if names["service "+cmd.name()] {
			aliases = append(aliases, "service "+cmd.name())
		}
		out = append(out, adapt(cmd, aliases...))
	}
	return out
}

// runCommand runs the agent in the foreground until it is interrupted.
func (a *app) runCommand(start startFunc) *cli.Command {
	cmd := &cli.Command{Name: "run", Summary: "run the agent in the foreground until interrupted"}
	return cli.DaemonCommand(cmd, version, config.DefaultAgentFile, config.LoadAgent,
		func(ctx context.Context, c *cli.Call, cfg *config.Agent, d cli.Daemon) error {
			root, sw := newLogger(cfg.Log, c.Stderr)
			d.Log = root.With().Str("agent_id", cfg.AgentID).Logger()
			logs := logging{root: root, level: sw}
			var exit error // an exit for a self-update
			if err := d.Run(ctx, c, func(ctx context.Context) error {
				return updateExit(start(ctx, a.hardStop, cfg, logs), &exit)
			}); err != nil {
				return err
			}
			return exit
		})
}

// newLogger returns the root logger configured by cfg, writing to w, and
// the switch that changes its level while the agent runs (the log_level
// setting).
func newLogger(cfg config.Log, w io.Writer) (zerolog.Logger, *agent.LevelSwitch) {
	out, level := cli.LogOutput(cfg, w)
	sw := agent.NewLevelSwitch(out, level)
	return zerolog.New(sw).Level(zerolog.TraceLevel).With().Timestamp().Logger(), sw
}
