package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestChaosCommand runs `edgelab chaos` for one schedule on its defaults
// (SQLite, in-process S3) and checks what it prints.
func TestChaosCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"chaos", "-schedules", "1", "-seed", "7",
		"-faults", "nats-restart,storage-outage,coordinator-restart"}, &out, &errOut)
	if err != nil {
		t.Fatalf("edgelab chaos: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{"schedules 7…7 on sqlite", "stale writes accepted", "results lost", "duplicate acceptances", "faults injected"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestChaosCommandRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"chaos", "-faults", "meteor-strike"},
		{"chaos", "-store", "oracle"},
		{"chaos", "-store", "postgres", "-postgres-dsn", ""},
		{"chaos", "-schedules", "0"},
		{"chaos", "extra"},
	} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, &out, &errOut); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
