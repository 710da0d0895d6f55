package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/internal/cli"
)

// TestCommandLine checks the help and the usage errors of edgelab; none of
// them runs the lab.
func TestCommandLine(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // substring; "" means stdout must be empty
		wantStderr string // substring; "" means stderr must be empty
	}{
		{"help", []string{"help"}, 0, "Usage: edgelab <command> [flags]", ""},
		{"help lists the commands", []string{"help"}, 0, "  chaos ", ""},
		{"-h", []string{"-h"}, 0, "Without a\ncommand it runs the lab", ""},
		{"help run", []string{"help", "run"}, 0, "-lease-ttl duration", ""},
		{"help chaos", []string{"help", "chaos"}, 0, "-schedules int", ""},
		{"help bench", []string{"help", "bench"}, 0, "Usage: edgelab bench [flags] [stop|commit|capacity|footprint|all]...", ""},
		{"help bench coordinator", []string{"help", "bench", "coordinator"}, 0, "-lease-ttl duration", ""},
		{"unknown command", []string{"bogus"}, 2, "", `edgelab: unknown command "bogus"`},
		{"unknown flag of the lab", []string{"-x"}, 2, "", "flag provided but not defined: -x"},
		{"chaos with an argument", []string{"chaos", "extra"}, 2, "", `edgelab chaos: unexpected argument "extra"`},
		{"unknown scenario", []string{"bench", "nope"}, 2, "", `edgelab bench: unknown scenario "nope"`},
		{"bench coordinator with an argument", []string{"bench", "coordinator", "extra"}, 2, "", `unexpected argument "extra"`},
		{"chaos bad value", []string{"chaos", "--schedules", "0"}, 1, "", "edgelab: -schedules must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := cli.ExitCode(run(t.Context(), tt.args, &out, &errOut))
			if code != tt.wantCode {
				t.Errorf("exit status = %d, want %d", code, tt.wantCode)
			}
			check := func(name, got, want string) {
				if want == "" && got != "" || !strings.Contains(got, want) {
					t.Errorf("%s = %q, want it to contain %q", name, got, want)
				}
			}
			check("stdout", out.String(), tt.wantStdout)
			check("stderr", errOut.String(), tt.wantStderr)
		})
	}
}
