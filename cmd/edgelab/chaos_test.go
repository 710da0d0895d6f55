package main

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/testkit/chaos"
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

// TestChaos300 runs the chaos check as a user does: `edgelab chaos
// --schedules 300` on its defaults (SQLite, in-process S3, embedded NATS),
// built as a user builds it and run as a process of its own, so that the
// race detector of `go test -race` does not slow it tenfold (testkit/chaos
// runs schedules in-process under the race detector, against PostgreSQL
// and MinIO). It
// fails when a schedule breaks a rule, and checks the counts: stale writes
// attempted and refused, none accepted, no result lost or accepted twice,
// every fault kind injected.
func TestChaos300(t *testing.T) {
	schedules := "300"
	if testing.Short() {
		schedules = "60"
	}
	bin := testenv.Binary(t, "edgelab")
	start := time.Now()
	cmd := exec.Command(bin, "chaos", "--schedules", schedules, "--seed", "1", "--parallel", "8", "--show", "2")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	t.Logf("edgelab chaos --schedules %s took %s:\n%s", schedules, time.Since(start).Round(time.Second), tail(out.String(), 40))
	if err != nil {
		t.Errorf("edgelab chaos: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	counts := map[string]int{}
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		for i := 1; i < len(f); i++ {
			if n, err := strconv.Atoi(f[i]); err == nil {
				counts[strings.Join(f[:i], " ")] = n
				break
			}
		}
	}
	if counts["stale writes rejected"] == 0 {
		t.Error("no stale write was attempted and refused")
	}
	for _, k := range []string{"stale writes accepted", "results lost", "duplicate acceptances"} {
		if n, ok := counts[k]; !ok || n != 0 {
			t.Errorf("%s: %d (printed: %v), want 0", k, n, ok)
		}
	}
	if !testing.Short() {
		for _, k := range strings.Split(kindNames(chaos.DefaultKinds(1)), ",") {
			if counts[k] == 0 {
				t.Errorf("no %s fault injected", k)
			}
		}
	}
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}
