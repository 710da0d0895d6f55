package sqlitestore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// walPages is the size of the database's write-ahead log in 4 KiB pages.
func walPages(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size() / 4096
}

// A commit never copies the write-ahead log back into the database (a
// checkpoint, with its two fsyncs): the log grows past SQLite's own
// 1,000-page mark while the checkpointer is held back, and the
// checkpointer, beside the writes, copies it all back; the writes after
// that reuse the log from its start.
func TestCommitsLeaveCheckpointsToTheCheckpointer(t *testing.T) {
	every, after := checkpointEvery, checkpointAfter
	checkpointEvery, checkpointAfter = time.Hour, 1<<30
	t.Cleanup(func() { checkpointEvery, checkpointAfter = every, after })

	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "jobs.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	// Jobs of about 20 KiB each: 200 of them write over 3,000 pages, well
	// past 1,000. The bytes are in 20 long text steps: the store encodes
	// and decodes a task's JSON step by step, and the log grows with the
	// bytes, not the steps.
	task := protocol.Task{Device: protocol.DeviceSelector{Serial: "s1"}}
	for i := range 20 {
		task.Steps = append(task.Steps, protocol.Step{Op: protocol.OpText, Text: strings.Repeat("x", 1000) + fmt.Sprint(i)})
	}
	submit := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := s.Submit(ctx, jobstore.JobSpec{ID: fmt.Sprintf("j%d", i), Task: task}); err != nil {
				t.Fatal(err)
			}
		}
	}
	submit(0, 200)
	grown := walPages(t, path)
	if grown <= 1500 {
		t.Fatalf("write-ahead log after 200 large submits: %d pages; want it past 1,000 pages with no checkpoint in the commits", grown)
	}
	if n, err := s.ck.stats(); n != 0 || err != nil {
		t.Fatalf("checkpointer before its turn: %d checkpoints, error %v; want none", n, err)
	}

	s.ck.checkpoint()
	if n, err := s.ck.stats(); n != 1 || err != nil {
		t.Fatalf("checkpointer: %d checkpoints, error %v; want one without error", n, err)
	}
	var busy, log, done int64
	if err := s.r.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &done); err != nil {
		t.Fatal(err)
	}
	if busy != 0 || done != log {
		t.Fatalf("after the checkpointer's run: busy %d, %d of %d log pages in the database; want all", busy, done, log)
	}
	// The next writes start the log again from its beginning: it does not
	// grow.
	submit(200, 250)
	if got := walPages(t, path); got > grown {
		t.Fatalf("write-ahead log after a checkpoint and 50 more submits: %d pages, was %d; want the log reused from its start", got, grown)
	}
	for i := range 250 {
		if _, err := s.Get(ctx, fmt.Sprintf("j%d", i)); err != nil {
			t.Fatalf("job j%d after the checkpoints: %v", i, err)
		}
	}
}

// The checkpointer wakes after checkpointAfter commits without waiting for
// its timer.
func TestCheckpointerWakesAfterCommits(t *testing.T) {
	every, after := checkpointEvery, checkpointAfter
	checkpointEvery, checkpointAfter = time.Hour, 10
	t.Cleanup(func() { checkpointEvery, checkpointAfter = every, after })

	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	task := protocol.Task{Device: protocol.DeviceSelector{Serial: "s1"}, Steps: []protocol.Step{{Op: protocol.OpScreenshot}}}
	for i := range 10 {
		if _, err := s.Submit(ctx, jobstore.JobSpec{ID: fmt.Sprintf("j%d", i), Task: task}); err != nil {
			t.Fatal(err)
		}
	}
	for {
		n, err := s.ck.stats()
		if err != nil {
			t.Fatalf("checkpoint: %v", err)
		}
		if n >= 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no checkpoint after 10 commits")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
