package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/installer"
)

// envServicePassword holds the password of the Windows account given to
// install --user; it is read from the environment so that it stays out of
// the command line.
const envServicePassword = "EDGEAGENT_SERVICE_PASSWORD"

// stopMargin is how much longer than jobs.shutdown_timeout the service
// manager waits for the agent to stop.
const stopMargin = 15 * time.Second

// serviceCommands are the commands that install and control the service:
// "service install|uninstall|start|stop|restart|status" and, but for
// status (which is the agent's own), the same at the top level.
func serviceCommands(a *app) []command {
	var cmds []command
	for _, prefix := range []string{"", "service "} {
		cmds = append(cmds,
			&installCommand{app: a, prefix: prefix},
			&controlCommand{app: a, prefix: prefix, verb: "uninstall",
				help: "stop and remove the service (configuration, state and logs stay)",
				do:   (*installer.Service).Uninstall, done: "removed service %s"},
			&controlCommand{app: a, prefix: prefix, verb: "start",
				help: "start the service", do: (*installer.Service).Start, done: "started service %s"},
			&controlCommand{app: a, prefix: prefix, verb: "stop",
				help: "stop the service, waiting for running jobs to drain",
				do:   (*installer.Service).Stop, done: "stopped service %s"},
			&controlCommand{app: a, prefix: prefix, verb: "restart",
				help: "stop the service, waiting for the drain, and start it again",
				do:   (*installer.Service).Restart, done: "restarted service %s"},
		)
	}
	return append(cmds, &serviceStatusCommand{app: a})
}

// installCommand installs the service.
type installCommand struct {
	app        *app
	prefix     string
	configPath string
	user       string
	dryRun     bool
}

func (c *installCommand) name() string { return c.prefix + "install" }
func (c *installCommand) summary() string {
	return "install edgeagent as a service that runs at boot (systemd or Windows)"
}

func (c *installCommand) flags(w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name(), flag.ContinueOnError)
	fs.SetOutput(w)
	fs.StringVar(&c.configPath, "config", config.DefaultAgentFile, "the service runs with the configuration in `file`")
	fs.StringVar(&c.configPath, "c", config.DefaultAgentFile, "short for -config")
	fs.StringVar(&c.user, "user", "", "run the service as `account` (default: the edgeagent user on Linux, created if missing; LocalSystem on Windows; a Windows account's password is read from "+envServicePassword+")")
	fs.BoolVar(&c.dryRun, "dry-run", false, "print what would be installed (the systemd unit, or the Windows service settings) and change nothing")
	return fs
}

func (c *installCommand) run(context.Context, *flag.FlagSet) error {
	opts := c.options()
	if c.dryRun {
		text, err := installer.Describe(opts)
		if err != nil {
			return err
		}
		fmt.Fprint(c.app.stdout, text)
		return nil
	}
	svc, err := installer.New(opts)
	if err != nil {
		return err
	}
	if err := svc.Install(); err != nil {
		return err
	}
	for _, w := range svc.Warnings() {
		fmt.Fprintf(c.app.stderr, "warning: %s\n", w)
	}
	fmt.Fprintf(c.app.stdout, "installed service %s; start it with: %s start\n", installer.Name, progName)
	return nil
}

// options returns the service's options for the flags. A config that
// exists and is valid gives the state directory and the drain's length;
// a missing or invalid one is warned about, since it can be written or
// fixed before the service starts.
func (c *installCommand) options() installer.Options {
	opts := installer.Options{
		ConfigPath: c.configPath,
		User:       c.user,
		Password:   os.Getenv(envServicePassword),
	}
	cfg, err := config.LoadAgent(c.configPath)
	var ps config.Problems
	switch {
	case err == nil:
		opts.StateDir = cfg.StateDir
		opts.StopTimeout = cfg.Jobs.ShutdownTimeout.Duration() + stopMargin
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(c.app.stderr, "warning: %s does not exist yet; write it (see examples/agent.yaml) before starting the service\n", c.configPath)
	case errors.As(err, &ps):
		fmt.Fprintf(c.app.stderr, "warning: the service will not start until these problems in %s are fixed:\n", c.configPath)
		for _, p := range ps {
			fmt.Fprintf(c.app.stderr, "  %s\n", p)
		}
	default:
		fmt.Fprintf(c.app.stderr, "warning: %v\n", err)
	}
	return opts
}

// controlCommand is a service command without flags: uninstall, start,
// stop, restart.
type controlCommand struct {
	app    *app
	prefix string
	verb   string
	help   string
	do     func(*installer.Service) error
	done   string // printed on success, with the service name
}

func (c *controlCommand) name() string    { return c.prefix + c.verb }
func (c *controlCommand) summary() string { return c.help }

func (c *controlCommand) flags(w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name(), flag.ContinueOnError)
	fs.SetOutput(w)
	return fs
}

func (c *controlCommand) run(context.Context, *flag.FlagSet) error {
	svc, err := installer.New(installer.Options{})
	if err != nil {
		return err
	}
	if err := c.do(svc); err != nil {
		return err
	}
	fmt.Fprintf(c.app.stdout, c.done+"\n", installer.Name)
	return nil
}

// serviceStatusCommand prints the state of the service.
type serviceStatusCommand struct{ app *app }

func (c *serviceStatusCommand) name() string { return "service status" }
func (c *serviceStatusCommand) summary() string {
	return "print whether the service is installed and running"
}

func (c *serviceStatusCommand) flags(w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name(), flag.ContinueOnError)
	fs.SetOutput(w)
	return fs
}

func (c *serviceStatusCommand) run(context.Context, *flag.FlagSet) error {
	svc, err := installer.New(installer.Options{})
	if err != nil {
		return err
	}
	st, err := svc.Status()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.app.stdout, "service %s: %s\n", installer.Name, st)
	return nil
}

// serviceMain runs the command line args as the Windows service when the
// service control manager started this process, and then reports true with
// the exit status. Otherwise it does nothing and reports false. A stop of
// the service cancels the command's context, which drains the agent (there
// is no hard stop: the service manager ends the process when the stop
// timeout has passed); its output goes to the service's log file and the
// Event Log.
func serviceMain(args []string) (code int, ok bool) {
	if !installer.IsService() {
		return 0, false
	}
	err := installer.RunService(installer.Name, func(ctx context.Context, stderr io.Writer) error {
		return run(ctx, nil, args, stderr, stderr)
	})
	return exitCode(err), true
}
