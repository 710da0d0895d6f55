package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
)

// TimeFormat is how the programs print times, in logs and tables: RFC 3339
// with milliseconds, so that columns of times line up.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// DaemonExitHelp is the end of the help of the daemons, whose invalid
// config files are bad usage.
const DaemonExitHelp = "Exit status: 0 success, 1 failure, 2 bad usage or invalid config."

// ConfigError reports the problems of an invalid config file on w, one per
// line, and returns the exit status for them (2); other errors are
// returned as they are.
func ConfigError(w io.Writer, err error) error {
	var ps config.Problems
	if !errors.As(err, &ps) {
		return err
	}
	for _, p := range ps {
		fmt.Fprintln(w, p.String())
	}
	return Exit(ExitUsage)
}

// VersionCommand is "version": it prints the program's version and the Go
// release and platform it was built with.
func VersionCommand(version string) *Command {
	return &Command{
		Name:    "version",
		Summary: "print the version",
		Run: func(_ context.Context, c *Call) error {
			_, err := fmt.Fprintf(c.Stdout, "%s %s (%s %s/%s)\n", c.App.Name, version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}

// Config is a loaded config file, which may warn about what it holds.
type Config interface{ Warnings() []string }

// ValidateCommand is "config validate": load reads the config file at a
// path (default defaultPath). It prints "ok" and the config's warnings, or
// every problem of an invalid file (exit 2).
func ValidateCommand[C Config](defaultPath string, load func(path string) (C, error)) *Command {
	var path string
	return &Command{
		Name:    "config validate",
		Summary: "check a config file and report every problem in it",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&path, "c", defaultPath, "check the configuration in `file`")
		},
		Run: func(_ context.Context, c *Call) error {
			cfg, err := load(path)
			if err != nil {
				return ConfigError(c.Stderr, err)
			}
			for _, w := range cfg.Warnings() {
				c.Warnf("%s", w)
			}
			_, err = fmt.Fprintln(c.Stdout, "ok")
			return err
		},
	}
}

// LogOutput returns where a daemon configured with cfg logs when its log
// goes to w, and the configured level: w itself for JSON lines, or a
// console writer (coloured on a terminal).
func LogOutput(cfg config.Log, w io.Writer) (io.Writer, zerolog.Level) {
	level, err := zerolog.ParseLevel(cfg.Level)
	if err != nil {
		level = zerolog.InfoLevel // unreachable after Validate
	}
	if cfg.Format == config.LogFormatConsole {
		w = zerolog.ConsoleWriter{Out: w, NoColor: !isTerminal(w), TimeFormat: TimeFormat}
	}
	return w, level
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

// DaemonCommand completes cmd as the command that runs a daemon in the
// foreground: it reads the config file of the -c flag (default
// defaultPath) with load, an invalid one being exit status 2, and calls
// start with it and the Daemon to run it with (its Log left to start).
func DaemonCommand[C Config](cmd *Command, version, defaultPath string, load func(path string) (C, error),
	start func(ctx context.Context, c *Call, cfg C, d Daemon) error) *Command {
	var path string
	cmd.Flags = func(fs *flag.FlagSet) {
		fs.StringVar(&path, "c", defaultPath, "read the configuration from `file`")
	}
	cmd.Run = func(ctx context.Context, c *Call) error {
		cfg, err := load(path)
		if err != nil {
			return ConfigError(c.Stderr, err)
		}
		return start(ctx, c, cfg, Daemon{Version: version, ConfigPath: path, Warnings: cfg.Warnings()})
	}
	return cmd
}

// Daemon runs a daemon in the foreground until ctx is cancelled: it logs
// the config's warnings and the start, runs start, and logs how it ended.
// A cancellation is a clean stop; any other error of start is exit
// status 1.
type Daemon struct {
	Version    string
	ConfigPath string
	Warnings   []string
	Log        zerolog.Logger
}

// Run runs start as the daemon of the program c runs.
func (d Daemon) Run(ctx context.Context, c *Call, start func(context.Context) error) error {
	for _, w := range d.Warnings {
		d.Log.Warn().Msg(w)
	}
	d.Log.Info().Str("version", d.Version).Str("config", d.ConfigPath).Msg("starting " + c.App.Name)
	if err := start(ctx); err != nil && (ctx.Err() == nil || !errors.Is(err, context.Canceled)) {
		d.Log.Error().Err(err).Msg(c.App.Name + " stopped with an error")
		return Exit(ExitFailure)
	}
	d.Log.Info().Msg(c.App.Name + " stopped")
	return nil
}
