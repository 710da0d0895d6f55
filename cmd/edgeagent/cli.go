package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/config"
)

const (
	progName = "edgeagent"

	// timeFormat is the log timestamp: RFC 3339 with milliseconds.
	timeFormat = "2006-01-02T15:04:05.000Z07:00"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // the command failed
	exitUsage   = 2 // bad command line or invalid config
)

// exitError ends the process with code; whatever caused it has already been
// reported.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitCode maps the error returned by run to the process exit status.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	default:
		return exitFailure
	}
}

// run executes the command line args (without the program name), writing
// output to stdout and diagnostics to stderr. It reports every error itself;
// the caller only maps the result to an exit status with exitCode. Closing
// hardStop stops a running agent at once, even while it drains.
func run(ctx context.Context, hardStop <-chan struct{}, args []string, stdout, stderr io.Writer) error {
	a := newApp(stdout, stderr, startAgent)
	a.hardStop = hardStop
	return a.run(ctx, args)
}

// command is one subcommand with its own flags.
type command interface {
	// name is the command as typed, such as "config validate".
	name() string
	// summary is a one-line description.
	summary() string
	// flags returns the command's flag set, writing to w.
	flags(w io.Writer) *flag.FlagSet
	// run executes the command with the flag set already parsed.
	run(ctx context.Context, fs *flag.FlagSet) error
}

// app is the command-line interface.
type app struct {
	stdout, stderr io.Writer
	commands       []command
	hardStop       <-chan struct{} // see run
}

func newApp(stdout, stderr io.Writer, start startFunc) *app {
	a := &app{stdout: stdout, stderr: stderr}
	a.commands = []command{
		&runCommand{app: a, start: start},
		&statusCommand{app: a},
		&doctorCommand{app: a},
		&validateCommand{app: a},
		&versionCommand{app: a},
	}
	a.commands = append(a.commands, serviceCommands(a)...)
	return a
}

func (a *app) run(ctx context.Context, args []string) error {
	err := a.dispatch(ctx, args)
	var ee *exitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(a.stderr, "%s: %v\n", progName, err)
	}
	return err
}

func (a *app) dispatch(ctx context.Context, args []string) error {
	if len(args) == 0 {
		a.usage(a.stderr)
		return &exitError{exitUsage}
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return a.help(args[1:])
	}
	cmd, rest := a.find(args)
	if cmd == nil {
		return a.unknown(args)
	}
	fs := cmd.flags(a.stderr)
	fs.Usage = func() { a.commandUsage(fs.Output(), cmd, fs) }
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{exitUsage} // the flag package has printed the problem and the usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(a.stderr, "%s %s: unexpected argument %q\n", progName, cmd.name(), fs.Arg(0))
		fs.Usage()
		return &exitError{exitUsage}
	}
	return cmd.run(ctx, fs)
}

// find returns the command named by the leading words of args and the
// remaining arguments.
func (a *app) find(args []string) (command, []string) {
	for _, cmd := range a.commands {
		words := strings.Fields(cmd.name())
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			return cmd, args[len(words):]
		}
	}
	return nil, nil
}

// group returns the commands whose name starts with prefix and a space, such
// as "config validate" for "config".
func (a *app) group(prefix string) []command {
	var cmds []command
	for _, cmd := range a.commands {
		if strings.HasPrefix(cmd.name(), prefix+" ") {
			cmds = append(cmds, cmd)
		}
	}
	return cmds
}

// unknown reports a command line that names no command.
func (a *app) unknown(args []string) error {
	if group := a.group(args[0]); len(group) > 0 {
		if len(args) > 1 {
			fmt.Fprintf(a.stderr, "%s: unknown command %q\n", progName, args[0]+" "+args[1])
		}
		a.groupUsage(a.stderr, args[0], group)
		return &exitError{exitUsage}
	}
	fmt.Fprintf(a.stderr, "%s: unknown command %q\n\n", progName, args[0])
	a.usage(a.stderr)
	return &exitError{exitUsage}
}

// help prints the help asked for on stdout.
func (a *app) help(args []string) error {
	if len(args) == 0 {
		a.usage(a.stdout)
		return nil
	}
	if cmd, rest := a.find(args); cmd != nil && len(rest) == 0 {
		fs := cmd.flags(a.stdout)
		a.commandUsage(a.stdout, cmd, fs)
		return nil
	}
	if group := a.group(args[0]); len(group) > 0 && len(args) == 1 {
		a.groupUsage(a.stdout, args[0], group)
		return nil
	}
	return a.unknown(args)
}

func (a *app) usage(w io.Writer) {
	fmt.Fprintf(w, `Usage: %s <command> [flags]

%s runs jobs from an edgecoord coordinator on the Android phones attached
to this computer.

Commands:
`, progName, progName)
	a.listCommands(w, a.commands, "help [command]\tshow help for a command")
	fmt.Fprintf(w, `
Run "%s help <command>" for a command's flags.
Exit status: 0 success, 1 failure, 2 bad usage or invalid config.
`, progName)
}

func (a *app) groupUsage(w io.Writer, group string, cmds []command) {
	fmt.Fprintf(w, "Usage: %s %s <command> [flags]\n\nCommands:\n", progName, group)
	a.listCommands(w, cmds)
}

// listCommands prints an aligned table of cmds followed by extra rows,
// each "name\tsummary".
func (a *app) listCommands(w io.Writer, cmds []command, extra ...string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, cmd := range cmds {
		fmt.Fprintf(tw, "  %s\t%s\n", cmd.name(), cmd.summary())
	}
	for _, row := range extra {
		fmt.Fprintf(tw, "  %s\n", row)
	}
	tw.Flush()
}

func (a *app) commandUsage(w io.Writer, cmd command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s %s [flags]\n\n%s.\n", progName, cmd.name(), upperFirst(cmd.summary()))
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprintf(w, "\nFlags:\n")
		out := fs.Output()
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(out)
	}
}

// runCommand runs the agent in the foreground until it is interrupted.
type runCommand struct {
	app        *app
	start      startFunc
	configPath string
}

func (c *runCommand) name() string    { return "run" }
func (c *runCommand) summary() string { return "run the agent in the foreground until interrupted" }

func (c *runCommand) flags(w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name(), flag.ContinueOnError)
	fs.SetOutput(w)
	fs.StringVar(&c.configPath, "c", config.DefaultAgentFile, "read the configuration from `file`")
	return fs
}

func (c *runCommand) run(ctx context.Context, _ *flag.FlagSet) error {
	cfg, err := config.LoadAgent(c.configPath)
	if err != nil {
		return reportLoadError(c.app.stderr, err)
	}
	root, sw := newLogger(cfg.Log, c.app.stderr)
	log := root.With().Str("agent_id", cfg.AgentID).Logger()
	for _, w := range cfg.Warnings() {
		log.Warn().Msg(w)
	}
	log.Info().Str("version", version).Str("config", c.configPath).Msg("starting edgeagent")
	if err := c.start(ctx, c.app.hardStop, cfg, logging{root: root, level: sw}); err != nil && (ctx.Err() == nil || !errors.Is(err, context.Canceled)) {
		log.Error().Err(err).Msg("edgeagent stopped with an error")
		return &exitError{exitFailure}
	}
	log.Info().Msg("edgeagent stopped")
	return nil
}

// validateCommand checks a config file.
type validateCommand struct {
	app        *app
	configPath string
}

func (c *validateCommand) name() string { return "config validate" }
func (c *validateCommand) summary() string {
	return "check a config file and report every problem in it"
}

func (c *validateCommand) flags(w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name(), flag.ContinueOnError)
	fs.SetOutput(w)
	fs.StringVar(&c.configPath, "c", config.DefaultAgentFile, "check the configuration in `file`")
	return fs
}

func (c *validateCommand) run(context.Context, *flag.FlagSet) error {
	cfg, err := config.LoadAgent(c.configPath)
	if err != nil {
		return reportLoadError(c.app.stderr, err)
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(c.app.stderr, "warning: %s\n", w)
	}
	fmt.Fprintln(c.app.stdout, "ok")
	return nil
}

// versionCommand prints the version.
type versionCommand struct{ app *app }

func (c *versionCommand) name() string    { return "version" }
func (c *versionCommand) summary() string { return "print the version" }

func (c *versionCommand) flags(w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name(), flag.ContinueOnError)
	fs.SetOutput(w)
	return fs
}

func (c *versionCommand) run(context.Context, *flag.FlagSet) error {
	fmt.Fprintf(c.app.stdout, "%s %s (%s %s/%s)\n", progName, version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// reportLoadError prints the problems of an invalid config, one per line,
// and returns the exit status for them; other errors are returned as they
// are.
func reportLoadError(w io.Writer, err error) error {
	var ps config.Problems
	if !errors.As(err, &ps) {
		return err
	}
	for _, p := range ps {
		fmt.Fprintln(w, p.String())
	}
	return &exitError{exitUsage}
}

// newLogger returns the root logger configured by cfg, writing to w, and
// the switch that changes its level while the agent runs (the log_level
// setting).
func newLogger(cfg config.Log, w io.Writer) (zerolog.Logger, *agent.LevelSwitch) {
	level, err := zerolog.ParseLevel(cfg.Level)
	if err != nil {
		level = zerolog.InfoLevel // unreachable after Validate
	}
	if cfg.Format == config.LogFormatConsole {
		w = zerolog.ConsoleWriter{Out: w, NoColor: !isTerminal(w), TimeFormat: timeFormat}
	}
	sw := agent.NewLevelSwitch(w, level)
	return zerolog.New(sw).Level(zerolog.TraceLevel).With().Timestamp().Logger(), sw
}

// isTerminal reports whether w is a character device such as a console.
func isTerminal(w io.Writer) bool {
	if runtime.GOOS == "windows" {
		return false // older consoles show escape codes literally
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
