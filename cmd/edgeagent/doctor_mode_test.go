package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestDoctorStorageModeMismatch: doctor's probe hello says the agent's
// storage mode; a real coordinator with no storage configured (it cannot
// presign) refuses a presigned agent, and doctor reports that as a failed
// coordinator check that names both modes and the fix. In direct mode the
// same coordinator answers the probe.
func TestDoctorStorageModeMismatch(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	nc, err := nats.Connect(ns.ClientURL(), nats.Name("coord"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c := coordinator.New(nc, st, coordinator.Options{ID: "c-direct", LeaseTTL: 3 * time.Second, HeartbeatEvery: 200 * time.Millisecond, Log: zerolog.Nop()})
	wg.Go(func() {
		if err := c.Run(ctx); err != nil {
			t.Errorf("coordinator: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() }) // before the store and the connection close
	cfg := func(storage string) string {
		return writeConfig(t, fmt.Sprintf(`agent_id: pc-bin
state_dir: %s/state
nats:
  url: %s
storage:
%s
devices:
  - serial: sim-1
    simulated: true
status:
  listen: %s
`, t.TempDir(), ns.ClientURL(), storage, testenv.FreeAddr(t)))
	}
	var out string
	testenv.Eventually(t, 10*time.Second, "doctor to reach the coordinator", func() bool {
		_, out, _ = runCLI(t, "doctor", "-c", cfg("  mode: presigned"), "-timeout", "3s")
		return !strings.Contains(out, "no coordinator serves")
	})
	t.Log(out)
	for _, want := range []string{"[FAIL] coordinator", "storage mode (presigned)", "presigned mode", "upload_mode direct", "fix: configure storage on the coordinator"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor in presigned mode lacks %q:\n%s", want, out)
		}
	}
	_, out, _ = runCLI(t, "doctor", "-c", cfg("  mode: direct\n  endpoint: 127.0.0.1:9\n  bucket: artifacts\n  access_key: a\n  secret_key: s"), "-timeout", "3s")
	if !strings.Contains(out, "[ok  ] coordinator") || !strings.Contains(out, "c-direct answered hello") {
		t.Errorf("doctor in direct mode:\n%s", out)
	}
}
