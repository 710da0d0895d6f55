package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/testkit/testenv"
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

// TestChaosCommandCluster runs `edgelab chaos --nats-cluster 3` for two
// schedules whose faults are node kills, on PostgreSQL.
func TestChaosCommandCluster(t *testing.T) {
	dsn := testenv.Postgres(t)
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"chaos", "-schedules", "2", "-seed", "11", "-parallel", "2",
		"-nats-cluster", "3", "-store", "postgres", "-postgres-dsn", dsn, "-faults", "nats-node-kill"}, &out, &errOut)
	if err != nil {
		t.Fatalf("edgelab chaos: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{"schedules 11…12 on postgres, a 3-node NATS cluster", "stale writes accepted"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nats-node-kill" {
			if n, _ := strconv.Atoi(f[1]); n == 0 {
				t.Errorf("no node killed: %s", line)
			}
			return
		}
	}
	t.Errorf("output lacks the nats-node-kill count:\n%s", out.String())
}

func TestChaosCommandRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"chaos", "-faults", "meteor-strike"},
		{"chaos", "-store", "oracle"},
		{"chaos", "-schedules", "0"},
		{"chaos", "-nats-cluster", "3"}, // needs -store postgres
		{"chaos", "-nats-cluster", "0"},
		{"chaos", "-nats-cluster", "9", "-store", "postgres"},
		{"chaos", "-faults", "nats-node-kill"}, // needs a cluster
		{"chaos", "-store", "postgres", "-faults", "nats-node-kill"},
		{"chaos", "extra"},
	} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, &out, &errOut); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
