package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/testkit/clitest"
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
		{"help bench", []string{"help", "bench"}, 0, "Usage: edgelab bench [flags] [stop|commit|capacity|footprint|step|mcp|sse|hostile|schedules|all]...", ""},
		{"help bench schedules flag", []string{"help", "bench"}, 0, "-schedules-duration duration", ""},
		{"help bench step flag", []string{"help", "bench"}, 0, "-step-turns int", ""},
		{"help bench mcp flag", []string{"help", "bench"}, 0, "-mcp-turns int", ""},
		{"help bench sse flag", []string{"help", "bench"}, 0, "-sse-watchers int", ""},
		{"help bench hostile flag", []string{"help", "bench"}, 0, "-hostile-streams int", ""},
		{"help bench coordinator", []string{"help", "bench", "coordinator"}, 0, "-lease-ttl duration", ""},
		{"unknown command", []string{"bogus"}, 2, "", `edgelab: unknown command "bogus"`},
		{"unknown flag of the lab", []string{"-x"}, 2, "", "flag provided but not defined: -x"},
		{"chaos with an argument", []string{"chaos", "extra"}, 2, "", `edgelab chaos: unexpected argument "extra"`},
		{"unknown scenario", []string{"bench", "nope"}, 2, "", `edgelab bench: unknown scenario "nope"`},
		{"bench coordinator with an argument", []string{"bench", "coordinator", "extra"}, 2, "", `unexpected argument "extra"`},
		{"chaos bad value", []string{"chaos", "--schedules", "0"}, 1, "", "edgelab: -schedules must be positive"},
	}, runLab)
}

// TestBenchStep runs `edgelab bench step` briefly, on SQLite: its table
// comes out with every column filled.
func TestBenchStep(t *testing.T) {
	code, out, errOut := runLab(t, "bench", "-store", "sqlite", "-in-process", "-step-turns", "3", "step")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{"== step", "Interactive step round trip: tap + screenshot 720×1280", "overhead p50", "sqlite  3 "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestBenchSchedules runs `edgelab bench schedules` briefly, on SQLite:
// its table comes out with the slots fired and their lag.
func TestBenchSchedules(t *testing.T) {
	code, out, errOut := runLab(t, "bench", "-store", "sqlite", "-schedules", "5", "-schedules-every", "1s",
		"-schedules-duration", "2s", "-schedules-interval", "100ms", "schedules")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{"== schedules", "Recurring schedules on one coordinator: evaluation cost and fire lag", "lag p50 ms", "sqlite  5 "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestBenchMCP runs `edgelab bench mcp` briefly, on SQLite: its table
// comes out with both ways and their difference.
func TestBenchMCP(t *testing.T) {
	code, out, errOut := runLab(t, "bench", "-store", "sqlite", "-in-process", "-mcp-turns", "3", "mcp")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{"== mcp", "Tool-call round trip over MCP beside the sessions API: tap + screenshot 720×1280", "sqlite  http        3 ", "sqlite  mcp         3 ", "mcp − http"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// cliCase is a command line and what it must do, written without field
// names.
type cliCase clitest.Case
