package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
)

// testApp is an App with a group ("job show", "job list"), an aliased
// command and a default, recording what the commands ran with.
type testApp struct {
	*App
	out, errOut bytes.Buffer
	ran         []string
	verbose     bool
	limit       int
}

func newTestApp(def string) *testApp {
	ta := &testApp{}
	record := func(_ context.Context, c *Call) error {
		ta.ran = append(ta.ran, fmt.Sprintf("%s args=%q json=%v verbose=%v limit=%d", c.Command.Name, c.Args, c.JSON, ta.verbose, ta.limit))
		return nil
	}
	ta.App = &App{
		Name:        "prog",
		Description: "prog does things.",
		Default:     def,
		Stdout:      &ta.out, Stderr: &ta.errOut,
		Commands: []*Command{
			{Name: "serve", Aliases: []string{"run"}, Summary: "serve until interrupted", Run: record,
				Flags: func(fs *flag.FlagSet) { fs.BoolVar(&ta.verbose, "v", false, "talk more") }},
			{Name: "job show", Summary: "show a job", Args: "ID", CheckArgs: ExactArgs(1, "ID"), JSON: true, Run: record},
			{Name: "job list", Summary: "list jobs", JSON: true, Run: record,
				Flags: func(fs *flag.FlagSet) { fs.IntVar(&ta.limit, "limit", 0, "at most `n` jobs") }},
			{Name: "fail", Summary: "fail", Run: func(context.Context, *Call) error { return errors.New("open store: locked") }},
			{Name: "usage", Summary: "misuse", Run: func(_ context.Context, c *Call) error { return c.Usagef("-f is required") }},
		},
	}
	return ta
}

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		def        string
		args       []string
		wantCode   int
		wantRan    string // "" means nothing ran
		wantStdout string // substring; "" means stdout must be empty
		wantStderr string // substring; "" means stderr must be empty
	}{
		{"no arguments", "", nil, 2, "", "", "Usage: prog <command> [flags]"},
		{"help", "", []string{"help"}, 0, "", "Usage: prog <command>", ""},
		{"-h", "", []string{"-h"}, 0, "", "prog does things.", ""},
		{"--help", "", []string{"--help"}, 0, "", "help [command]", ""},
		{"help lists an alias once", "", []string{"help"}, 0, "", "  serve, run ", ""},
		{"help command", "", []string{"help", "job", "show"}, 0, "", "Usage: prog job show [flags] ID\n\nShow a job.\n\nFlags:\n  -json", ""},
		{"help alias", "", []string{"help", "run"}, 0, "", "Usage: prog run [flags]\n\nServe until interrupted.\nAlso: prog serve.", ""},
		{"help group", "", []string{"help", "job"}, 0, "", "Usage: prog job <command> [flags]\n\nCommands:\n  job show  show a job\n  job list  list jobs\n", ""},
		{"help unknown", "", []string{"help", "bogus"}, 2, "", "", `prog: unknown command "bogus"`},
		{"unknown command", "", []string{"bogus"}, 2, "", "", `prog: unknown command "bogus"`},
		{"group without command", "", []string{"job"}, 2, "", "", "Usage: prog job <command>"},
		{"unknown group command", "", []string{"job", "kill"}, 2, "", "", `prog: unknown command "job kill"`},
		{"group --help", "", []string{"job", "--help"}, 0, "", "Usage: prog job <command> [flags]\n\nCommands:\n  job show  show a job\n  job list  list jobs\n", ""},
		{"group -h", "", []string{"job", "-h"}, 0, "", "Usage: prog job <command>", ""},
		{"group help", "", []string{"job", "help"}, 0, "", "Usage: prog job <command>", ""},
		{"alias runs the command", "", []string{"run", "-v"}, 0, `serve args=[] json=false verbose=true limit=0`, "", ""},
		{"flag after argument", "", []string{"job", "show", "J1", "--json"}, 0, `job show args=["J1"] json=true verbose=false limit=0`, "", ""},
		{"flag before argument", "", []string{"job", "show", "-json", "J1"}, 0, `job show args=["J1"] json=true verbose=false limit=0`, "", ""},
		{"after -- all is positional", "", []string{"job", "show", "--", "--json"}, 0, `job show args=["--json"] json=false verbose=false limit=0`, "", ""},
		{"flag with value", "", []string{"job", "list", "--limit", "3", "--json"}, 0, `job list args=[] json=true verbose=false limit=3`, "", ""},
		{"missing argument", "", []string{"job", "show"}, 2, "", "", "prog job show: want one ID, got 0 arguments\nUsage: prog job show [flags] ID"},
		{"unexpected argument", "", []string{"job", "list", "x"}, 2, "", "", `prog job list: unexpected argument "x"`},
		{"unknown flag", "", []string{"job", "list", "-x"}, 2, "", "", "flag provided but not defined: -x\nUsage: prog job list [flags]"},
		{"bad flag value", "", []string{"job", "list", "-limit", "many"}, 2, "", "", `invalid value "many" for flag -limit`},
		{"command -h", "", []string{"job", "list", "-h"}, 0, "", "", "Usage: prog job list [flags]\n\nList jobs.\n\nFlags:\n  -json\n"},
		{"failure", "", []string{"fail"}, 1, "", "", "prog: open store: locked\n"},
		{"usage error of a command", "", []string{"usage"}, 2, "", "", "prog usage: -f is required\n"},
		{"default command", "serve", nil, 0, `serve args=[] json=false verbose=false limit=0`, "", ""},
		{"default command with flags", "serve", []string{"-v"}, 0, `serve args=[] json=false verbose=true limit=0`, "", ""},
		{"help with a default", "serve", []string{"help"}, 0, "", "Commands:", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ta := newTestApp(tt.def)
			code := ExitCode(ta.Run(t.Context(), tt.args))
			if code != tt.wantCode {
				t.Errorf("exit status = %d, want %d", code, tt.wantCode)
			}
			if got := strings.Join(ta.ran, "; "); got != tt.wantRan {
				t.Errorf("ran %q, want %q", got, tt.wantRan)
			}
			check := func(name, got, want string) {
				if want == "" && got != "" || !strings.Contains(got, want) {
					t.Errorf("%s = %q, want it to contain %q", name, got, want)
				}
			}
			check("stdout", ta.out.String(), tt.wantStdout)
			check("stderr", ta.errOut.String(), tt.wantStderr)
		})
	}
}

// TestAliasListedOnce checks that an alias is not a line of its own in the
// help.
func TestAliasListedOnce(t *testing.T) {
	ta := newTestApp("")
	if err := ta.Run(t.Context(), []string{"help"}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(ta.out.String(), "run"); n != 1 {
		t.Errorf("the alias run appears %d times in the help:\n%s", n, ta.out.String())
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{flag.ErrHelp, 0},
		{errors.New("boom"), 1},
		{Exit(2), 2},
		{fmt.Errorf("wrapped: %w", Exit(1)), 1},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestParseFlagsOnly(t *testing.T) {
	var errOut bytes.Buffer
	fs := NewFlagSet("prog sub", &errOut)
	n := fs.Int("n", 1, "count")
	if err := ParseFlagsOnly(fs, []string{"-n", "3"}); err != nil || *n != 3 {
		t.Fatalf("parse: %v, n=%d", err, *n)
	}
	err := ParseFlagsOnly(fs, []string{"extra"})
	if ExitCode(err) != 2 || !strings.Contains(errOut.String(), `prog sub: unexpected argument "extra"`) {
		t.Fatalf("extra argument: %v, %q", err, errOut.String())
	}
	if err := ParseFlagsOnly(fs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
}

func TestPrintJSON(t *testing.T) {
	var out bytes.Buffer
	c := &Call{Stdout: &out}
	if err := c.PrintJSON(map[string]int{"a": 1}); err != nil || out.String() != "{\n  \"a\": 1\n}\n" {
		t.Fatalf("PrintJSON: %v %q", err, out.String())
	}
}
