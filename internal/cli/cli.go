// Package cli is the command-line framework of edgeagent, edgecoord and
// edgelab: commands and command groups ("job show"), aliases listed once in
// the help, flags before, between or after the positional arguments, a
// common --json option, "help [command]" and -h/--help, and one meaning of
// the exit status: 0 success, 1 failure, 2 bad usage (and, for the daemons,
// an invalid config file).
//
// A program builds an App with its commands and calls Run with the command
// line; main maps the returned error to the exit status with ExitCode.
// Errors are reported by Run: a command returns either an ordinary error
// (printed as "prog: error", exit 1) or, after printing what went wrong
// itself, Exit(code).
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Exit statuses.
const (
	ExitOK      = 0
	ExitFailure = 1 // the command failed
	ExitUsage   = 2 // bad command line (or invalid config file)
)

// ExitError ends the program with Code; whatever caused it has already been
// reported.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ExitCode returns the exit status.
func (e *ExitError) ExitCode() int { return e.Code }

// Exit returns the error that ends the program with code, the problem
// having been reported already.
func Exit(code int) error { return &ExitError{Code: code} }

// exitCoder is an error that carries its exit status.
type exitCoder interface{ ExitCode() int }

// ExitCode maps the error returned by App.Run to the process exit status:
// 0 for nil and for a help request, the code of an error that carries one
// (ExitError), else 1.
func ExitCode(err error) int {
	var ec exitCoder
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ec):
		return ec.ExitCode()
	default:
		return ExitFailure
	}
}

// reported reports whether err has been printed already.
func reported(err error) bool {
	var ec exitCoder
	return errors.Is(err, flag.ErrHelp) || errors.As(err, &ec)
}

// Command is one command of an App.
type Command struct {
	// Name is the command as typed, one or more words: "version",
	// "job show". Commands whose names share a first word form a group
	// ("job"), listed by "help job".
	Name string
	// Aliases are other names of the same command, listed once in the help
	// next to Name.
	Aliases []string
	// Summary is a one-line description, lower case, without a period.
	Summary string
	// Args names the positional arguments in the usage line, such as "ID"
	// or "ID [key=value ...]"; empty means the command takes none.
	Args string
	// CheckArgs, when set, checks the positional arguments; an error is a
	// usage error. Without it any number is accepted when Args is set.
	CheckArgs func(args []string) error
	// JSON adds the --json flag (Call.JSON); JSONHelp is its help text.
	JSON     bool
	JSONHelp string
	// Flags, when set, defines the command's flags.
	Flags func(fs *flag.FlagSet)
	// Raw commands get their arguments unparsed (Call.Args) and parse
	// them with ParseFlags themselves; "help CMD" runs them with -h.
	Raw bool
	// Run executes the command.
	Run func(ctx context.Context, c *Call) error
}

// names returns the name and the aliases.
func (c *Command) names() []string { return append([]string{c.Name}, c.Aliases...) }

// Call is one run of a command.
type Call struct {
	App     *App
	Command *Command
	// Name is the command's name as typed: its Name or an alias.
	Name string
	// Args are the positional arguments.
	Args []string
	// JSON is the --json flag of a command with JSON set.
	JSON           bool
	Stdout, Stderr io.Writer
	// Flags is the parsed flag set.
	Flags *flag.FlagSet
}

// PrintJSON writes v to standard output as indented JSON.
func (c *Call) PrintJSON(v any) error {
	enc := json.NewEncoder(c.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Table returns a writer of aligned columns (cells separated by tabs) on
// standard output; Flush it.
func (c *Call) Table() *tabwriter.Writer { return NewTable(c.Stdout) }

// NewTable returns a writer of aligned columns on w, as every table of the
// programs is printed.
func NewTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// Warnf prints "warning: ..." on standard error.
func (c *Call) Warnf(format string, a ...any) {
	fmt.Fprintf(c.Stderr, "warning: "+format+"\n", a...)
}

// Usagef reports a bad command line as "prog command: ..." and returns the
// exit status for it.
func (c *Call) Usagef(format string, a ...any) error {
	fmt.Fprintf(c.Stderr, "%s %s: %s\n", c.App.Name, c.Name, fmt.Sprintf(format, a...))
	return Exit(ExitUsage)
}

// Failf reports a failure as "prog: ..." and returns the exit status for
// it.
func (c *Call) Failf(format string, a ...any) error {
	fmt.Fprintf(c.Stderr, "%s: %s\n", c.App.Name, fmt.Sprintf(format, a...))
	return Exit(ExitFailure)
}

// App is a program's command line.
type App struct {
	// Name is the program as typed: "edgecoord".
	Name string
	// Description is the paragraph of the help after the usage line.
	Description string
	// ExitHelp ends the help, such as "Exit status: 0 success, 1 failure,
	// 2 bad usage." (that one when empty).
	ExitHelp string
	// Default names the command run when the command line names none (it
	// is empty or starts with a flag); without one such a command line is a
	// usage error.
	Default  string
	Commands []*Command

	Stdout, Stderr io.Writer
}

// Run executes the command line args (without the program name). It
// reports every error itself; the caller only maps the result to an exit
// status with ExitCode.
func (a *App) Run(ctx context.Context, args []string) error {
	err := a.dispatch(ctx, args)
	if err != nil && !reported(err) {
		fmt.Fprintf(a.Stderr, "%s: %v\n", a.Name, err)
	}
	return err
}

func (a *App) dispatch(ctx context.Context, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "help", "-h", "-help", "--help":
			return a.help(args[1:])
		}
	}
	if a.Default != "" && (len(args) == 0 || strings.HasPrefix(args[0], "-")) {
		args = append(strings.Fields(a.Default), args...)
	}
	if len(args) == 0 {
		a.usage(a.Stderr)
		return Exit(ExitUsage)
	}
	cmd, rest := a.Find(args)
	if cmd == nil {
		return a.unknown(args)
	}
	return a.runCommand(ctx, cmd, typed(args, rest), rest)
}

// typed returns the command name as typed: args without rest.
func typed(args, rest []string) string {
	return strings.Join(args[:len(args)-len(rest)], " ")
}

func (a *App) runCommand(ctx context.Context, cmd *Command, name string, args []string) error {
	call := &Call{App: a, Command: cmd, Name: name, Stdout: a.Stdout, Stderr: a.Stderr}
	if cmd.Raw {
		call.Args = args
		return cmd.Run(ctx, call)
	}
	fs := a.flagSet(cmd, call, a.Stderr)
	pos, err := ParseFlags(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return Exit(ExitUsage) // the flag package has printed the problem and the usage
	}
	if err := cmd.checkArgs(pos); err != nil {
		fmt.Fprintf(a.Stderr, "%s %s: %v\n", a.Name, name, err)
		fs.Usage()
		return Exit(ExitUsage)
	}
	call.Args, call.Flags = pos, fs
	return cmd.Run(ctx, call)
}

func (c *Command) checkArgs(args []string) error {
	switch {
	case c.CheckArgs != nil:
		return c.CheckArgs(args)
	case c.Args == "" && len(args) > 0:
		return fmt.Errorf("unexpected argument %q", args[0])
	}
	return nil
}

// ExactArgs is a CheckArgs that wants n arguments, named what in the error
// ("ID").
func ExactArgs(n int, what string) func([]string) error {
	return func(args []string) error {
		if len(args) != n {
			return fmt.Errorf("want %s, got %d arguments", countOf(n, what), len(args))
		}
		return nil
	}
}

func countOf(n int, what string) string {
	switch n {
	case 1:
		return "one " + what
	case 2:
		return "two " + what
	}
	return fmt.Sprintf("%d %s", n, what)
}

// flagSet returns the flag set of cmd writing to w, with --json bound to
// call.
func (a *App) flagSet(cmd *Command, call *Call, w io.Writer) *flag.FlagSet {
	fs := NewFlagSet(a.Name+" "+call.Name, w)
	if cmd.Flags != nil {
		cmd.Flags(fs)
	}
	if cmd.JSON {
		help := cmd.JSONHelp
		if help == "" {
			help = "print JSON for scripts instead of text"
		}
		fs.BoolVar(&call.JSON, "json", false, help)
	}
	fs.Usage = func() { a.commandUsage(fs.Output(), cmd, call.Name, fs) }
	return fs
}

// NewFlagSet returns an empty flag set that reports errors (to w) instead
// of exiting, for ParseFlags.
func NewFlagSet(name string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	return fs
}

// ParseFlags parses args into fs, flags standing before, between or after
// the positional arguments ("job show ID --json"), and returns the
// positional arguments. After "--" everything is positional. A parse error
// has been printed with the usage; -h, -help and --help return
// flag.ErrHelp.
func ParseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// fs.Parse stops at the first non-flag; "--" is consumed by it.
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// ParseFlagsOnly parses args into fs for a program or Raw command that
// takes no positional arguments. A bad command line has been reported
// (with the usage) when it returns an error that ExitCode maps to 2; -h
// returns flag.ErrHelp.
func ParseFlagsOnly(fs *flag.FlagSet, args []string) error {
	pos, err := ParseFlags(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return err
	case err != nil:
		return Exit(ExitUsage)
	case len(pos) > 0:
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), pos[0])
		fs.Usage()
		return Exit(ExitUsage)
	}
	return nil
}

// Find returns the command named by the leading words of args (by its name
// or an alias; the longest match wins) and the remaining arguments, or nil.
func (a *App) Find(args []string) (*Command, []string) {
	var (
		best  *Command
		words int
	)
	for _, cmd := range a.Commands {
		for _, name := range cmd.names() {
			w := strings.Fields(name)
			if len(w) > words && len(args) >= len(w) && slices.Equal(args[:len(w)], w) {
				best, words = cmd, len(w)
			}
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, args[words:]
}

// group returns the commands with a name (or alias) in group prefix, such
// as "config validate" for "config".
func (a *App) group(prefix string) []*Command {
	var cmds []*Command
	for _, cmd := range a.Commands {
		if slices.ContainsFunc(cmd.names(), func(n string) bool { return strings.HasPrefix(n, prefix+" ") }) {
			cmds = append(cmds, cmd)
		}
	}
	return cmds
}

// unknown reports a command line that names no command.
func (a *App) unknown(args []string) error {
	if group := a.group(args[0]); len(group) > 0 {
		if len(args) > 1 && isHelp(args[1]) {
			// "job --help" asks for the group's help.
			a.groupUsage(a.Stdout, args[0], group)
			return nil
		}
		if len(args) > 1 {
			fmt.Fprintf(a.Stderr, "%s: unknown command %q\n", a.Name, args[0]+" "+args[1])
		}
		a.groupUsage(a.Stderr, args[0], group)
		return Exit(ExitUsage)
	}
	fmt.Fprintf(a.Stderr, "%s: unknown command %q\n\n", a.Name, args[0])
	a.usage(a.Stderr)
	return Exit(ExitUsage)
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

// help prints the help asked for on standard output.
func (a *App) help(args []string) error {
	if len(args) == 0 {
		a.usage(a.Stdout)
		return nil
	}
	if cmd, rest := a.Find(args); cmd != nil && len(rest) == 0 {
		call := &Call{App: a, Command: cmd, Name: typed(args, rest), Stdout: a.Stdout, Stderr: a.Stdout}
		if cmd.Raw {
			call.Args = []string{"-h"}
			return cmd.Run(context.Background(), call)
		}
		a.commandUsage(a.Stdout, cmd, call.Name, a.flagSet(cmd, call, a.Stdout))
		return nil
	}
	if group := a.group(args[0]); len(group) > 0 && len(args) == 1 {
		a.groupUsage(a.Stdout, args[0], group)
		return nil
	}
	return a.unknown(args)
}

func (a *App) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s <command> [flags]\n\n", a.Name)
	if a.Description != "" {
		fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(a.Description))
	}
	fmt.Fprintf(w, "Commands:\n")
	a.listCommands(w, "", a.Commands, "help [command]\tshow help for a command")
	exit := a.ExitHelp
	if exit == "" {
		exit = "Exit status: 0 success, 1 failure, 2 bad usage."
	}
	fmt.Fprintf(w, "\nRun \"%s help <command>\" for a command's flags.\n%s\n", a.Name, exit)
}

func (a *App) groupUsage(w io.Writer, group string, cmds []*Command) {
	fmt.Fprintf(w, "Usage: %s %s <command> [flags]\n\nCommands:\n", a.Name, group)
	a.listCommands(w, group+" ", cmds)
}

// listCommands prints an aligned table of cmds, each with its aliases
// (those starting with prefix first), followed by extra rows, each
// "name\tsummary".
func (a *App) listCommands(w io.Writer, prefix string, cmds []*Command, extra ...string) {
	tw := NewTable(w)
	for _, cmd := range cmds {
		names := cmd.names()
		slices.SortStableFunc(names, func(x, y string) int {
			return boolInt(!strings.HasPrefix(x, prefix)) - boolInt(!strings.HasPrefix(y, prefix))
		})
		fmt.Fprintf(tw, "  %s\t%s\n", strings.Join(names, ", "), cmd.Summary)
	}
	for _, row := range extra {
		fmt.Fprintf(tw, "  %s\n", row)
	}
	tw.Flush()
}

// commandUsage prints the help of cmd, typed as name.
func (a *App) commandUsage(w io.Writer, cmd *Command, name string, fs *flag.FlagSet) {
	args := ""
	if cmd.Args != "" {
		args = " " + cmd.Args
	}
	fmt.Fprintf(w, "Usage: %s %s [flags]%s\n\n%s.\n", a.Name, name, args, upperFirst(cmd.Summary))
	if others := slices.DeleteFunc(cmd.names(), func(n string) bool { return n == name }); len(others) > 0 {
		fmt.Fprintf(w, "Also: %s %s.\n", a.Name, strings.Join(others, ", "+a.Name+" "))
	}
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

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
