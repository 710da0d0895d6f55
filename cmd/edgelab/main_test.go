package main

import (
	"bytes"
	"testing"

	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/internal/cli/clitest"
)

// runLab runs the edgelab command line and returns the exit status and the
// output.
func runLab(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = cli.ExitCode(run(t.Context(), args, &out, &errOut))
	return code, out.String(), errOut.String()
}

// TestCommandLine checks the help and the usage errors of edgelab; none of
// them runs the lab.
func TestCommandLine(t *testing.T) {
	clitest.Run(t, []cliCase{
		{"help", []string{"help"}, 0, "Usage: edgelab <command> [flags]", ""},
		{"help lists the commands", []string{"help"}, 0, "  chaos ", ""},
		{"-h", []string{"-h"}, 0, "Without a\ncommand it runs the lab", ""},
		{"help run", []string{"help", "run"}, 0, "-lease-ttl duration", ""},
		{"help chaos", []string{"help", "chaos"}, 0, "-schedules int", ""},
		{"help bench", []string{"help", "bench"}, 0, "Usage: edgelab bench [flags] [stop|commit|capacity|footprint|sse|all]...", ""},
		{"help bench coordinator", []string{"help", "bench", "coordinator"}, 0, "-lease-ttl duration", ""},
		{"unknown command", []string{"bogus"}, 2, "", `edgelab: unknown command "bogus"`},
		{"unknown flag of the lab", []string{"-x"}, 2, "", "flag provided but not defined: -x"},
		{"chaos with an argument", []string{"chaos", "extra"}, 2, "", `edgelab chaos: unexpected argument "extra"`},
		{"unknown scenario", []string{"bench", "nope"}, 2, "", `edgelab bench: unknown scenario "nope"`},
		{"bench coordinator with an argument", []string{"bench", "coordinator", "extra"}, 2, "", `unexpected argument "extra"`},
		{"chaos bad value", []string{"chaos", "--schedules", "0"}, 1, "", "edgelab: -schedules must be positive"},
	}, runLab)
}

// cliCase is a command line and what it must do, written without field
// names.
type cliCase clitest.Case
