package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestStaleCapturesRemoved: captures a crashed agent left in
// <state_dir>/spool/capture are removed when the agent starts; other files
// there are left alone, and jobs run as usual.
func TestStaleCapturesRemoved(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	l := newLab(t, 3*time.Second)
	state := filepath.Join(t.TempDir(), "state")
	dir := filepath.Join(state, "spool", "capture")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "capture-123-screenshot-004.png")
	other := filepath.Join(dir, "notes.txt")
	for _, f := range []string{stale, other} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := l.env.StartAgent(e2e.AgentOptions{StateDir: state, ShutdownTimeout: time.Second})
	job := l.submit(t, screenshot)
	testenv.Eventually(t, 30*time.Second, "the job to succeed", func() bool {
		j, err := l.store.Get(l.ctx, job)
		return err == nil && j.Status == jobstore.StatusSucceeded
	})
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale capture still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("other file removed: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "capture-*")); len(left) != 0 {
		t.Errorf("captures left after the job: %q", left)
	}
	p.MustCleanShutdown(t)
}
