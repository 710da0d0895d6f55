package main

import (
	"context"
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestKill9MidUpload kills the real edgeagent process with SIGKILL while it
// uploads a 12 MiB screen recording (5 MiB parts, throttled to 2 MiB/s) from
// a phone behind the real adb server, then starts it again on the same
// state directory. The coordinator reclaims the dead boot's lease on the new
// hello and the restarted process finishes the job under a later
// generation: one accepted result, the killed generation's multipart upload
// aborted by the spool's recovery, no object of the killed generation.
func TestKill9MidUpload(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if runtime.GOOS == "windows" {
		t.Skip("SIGKILL: Unix")
	}
	adb := testenv.StartADB(t)
	phone, err := fakeadbd.Start(fakeadbd.Options{Model: "Pixel 8", RecordingSize: 12 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { phone.Close() })
	if out, err := adb.Run("connect", phone.Addr()); err != nil {
		t.Fatalf("adb connect: %v: %s", err, out)
	}
	l := newLab(t, 3*time.Second)
	stateDir := t.TempDir()
	a := l.env.NewAgent(e2e.AgentOptions{StateDir: stateDir, ADB: adb, Phones: []e2e.Phone{{Serial: phone.Serial(), Tags: []string{"lab"}}},
		Extra: "storage:\n  bandwidth_limit: 2MiB\n"})
	first := a.Start()
	jobID := l.submit(t,
		protocol.Step{Op: protocol.OpRecordStart},
		wait(50),
		protocol.Step{Op: protocol.OpRecordStop, Name: "screen"},
	)
	owner := l.leased(t, jobID)
	killedPrefix := ""
	mc := l.mio.Client(t)
	// MinIO lists the multipart uploads of one object name only, so the
	// bucket (this test's own) is listed whole and filtered here.
	incomplete := func(prefix string) []string {
		var keys []string
		for u := range mc.ListIncompleteUploads(l.ctx, l.mio.Bucket, "", true) {
			if u.Err != nil {
				t.Fatalf("list incomplete uploads: %v", u.Err)
			}
			if strings.HasPrefix(u.Key, prefix) {
				keys = append(keys, u.Key)
			}
		}
		return keys
	}
	var tok fencing.Token
	testenv.Eventually(t, 60*time.Second, "the recording's multipart upload to start", func() bool {
		j, err := l.store.Get(l.ctx, jobID)
		if err != nil || j.WorkerID != owner {
			return false
		}
		tok = fencing.Token{JobID: jobID, Owner: owner, Generation: j.Generation}
		killedPrefix = "jobs/" + jobID + "/g" + strconv.FormatInt(j.Generation, 10) + "/"
		return len(incomplete(killedPrefix)) > 0
	})
	time.Sleep(time.Second) // a part or two on the way (2 MiB/s)
	first.Kill()
	open := incomplete(killedPrefix)
	if len(open) == 0 {
		t.Fatalf("no multipart upload open after the kill: it did not land mid-upload")
	}
	t.Logf("killed %s holding %s with %v open", owner, tok, open)

	second := a.Start()
	var final jobstore.Job
	testenv.Eventually(t, 90*time.Second, "the job to end", func() bool {
		j, err := l.store.Get(l.ctx, jobID)
		if err != nil {
			return false
		}
		final = j
		return j.Status == jobstore.StatusSucceeded || j.Status == jobstore.StatusFailed
	})
	if final.Status != jobstore.StatusSucceeded {
		t.Fatalf("job ended %s (%s), want SUCCEEDED", final.Status, final.FailReason)
	}
	if final.CompletedBy == owner || final.Generation <= tok.Generation {
		t.Errorf("job completed by %s at generation %d; want the restarted process above generation %d", final.CompletedBy, final.Generation, tok.Generation)
	}
	if a, _, _ := strings.Cut(final.CompletedBy, "/"); a != "pc-bin" {
		t.Errorf("job completed by %s, want agent pc-bin", final.CompletedBy)
	}
	evs, err := l.store.WriteEvents(l.ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	var accepted, reclaimed int
	for _, e := range evs {
		switch {
		case e.Accepted && e.Verb == jobstore.VerbResult:
			accepted++
		case e.Accepted && e.Verb == jobstore.VerbReclaim && e.Owner == owner && e.Generation == tok.Generation:
			reclaimed++
		}
		if e.Accepted && e.Owner == owner && e.Verb == jobstore.VerbResult {
			t.Errorf("the killed process's result was accepted: %+v", e)
		}
	}
	if accepted != 1 {
		t.Errorf("%d results accepted, want 1: %+v", accepted, evs)
	}
	if reclaimed != 1 {
		t.Errorf("the killed lease %s was not reclaimed once (%d): %+v", tok, reclaimed, evs)
	}
	if open := incomplete("jobs/" + jobID + "/"); len(open) > 0 {
		t.Errorf("multipart uploads left open after the restart: %v", open)
	}
	for o := range mc.ListObjects(l.ctx, l.mio.Bucket, minio.ListObjectsOptions{Prefix: killedPrefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		t.Errorf("object %s of the killed generation exists", o.Key)
	}
	if rec := second.Entries("spool recovered"); len(rec) != 1 || rec[0]["dropped"] != 1.0 {
		t.Errorf("restarted process: spool recovery %v, want one that dropped the killed upload", rec)
	}
	second.MustCleanShutdown(t)
}

// heldCommit is the PostgreSQL store with its first result commit held
// until release is closed: the result has reached the coordinator and its
// answer has not gone back.
type heldCommit struct {
	*pgstore.Store
	once    sync.Once
	entered chan fencing.Token
	release chan struct{}
}

func (h *heldCommit) CommitManifest(ctx context.Context, tok fencing.Token, result json.RawMessage) ([]string, error) {
	h.once.Do(func() {
		h.entered <- tok
		select {
		case <-h.release:
		case <-ctx.Done():
		}
	})
	return h.Store.CommitManifest(ctx, tok, result)
}

// TestKill9AfterResultSent kills the real edgeagent process with SIGKILL
// after its result reached the coordinator and before the answer came back,
// then lets the commit through and starts the process again: the job is
// SUCCEEDED once, under the dead process's token, and never granted again;
// the restarted process runs the next job.
func TestKill9AfterResultSent(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if runtime.GOOS == "windows" {
		t.Skip("SIGKILL: Unix")
	}
	held := &heldCommit{entered: make(chan fencing.Token, 1), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(held.release) }) }
	l := newLabStore(t, 3*time.Second, nil, func(st *pgstore.Store) jobstore.Store {
		held.Store = st
		return held
	})
	t.Cleanup(release)
	// The state directory must outlive the first process: reuse the
	// config's.
	a := l.env.NewAgent(e2e.AgentOptions{})
	first := a.Start()
	jobID := l.submit(t, screenshot, wait(20))
	var tok fencing.Token
	select {
	case tok = <-held.entered:
	case <-time.After(60 * time.Second):
		t.Fatal("no result reached the coordinator")
	}
	if tok.JobID != jobID {
		t.Fatalf("held the result of %s, want %s", tok, jobID)
	}
	first.Kill()
	release()
	var final jobstore.Job
	testenv.Eventually(t, 30*time.Second, "the held commit to land", func() bool {
		j, err := l.store.Get(l.ctx, jobID)
		final = j
		return err == nil && j.Status == jobstore.StatusSucceeded
	})
	if final.CompletedBy != tok.Owner || final.Generation != tok.Generation {
		t.Fatalf("job completed by %s at generation %d, want the killed %s", final.CompletedBy, final.Generation, tok)
	}

	second := a.Start()
	next := l.submit(t, screenshot)
	testenv.Eventually(t, 60*time.Second, "the restarted process to finish the next job", func() bool {
		j, err := l.store.Get(l.ctx, next)
		return err == nil && j.Status == jobstore.StatusSucceeded
	})
	j, err := l.store.Get(l.ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != jobstore.StatusSucceeded || j.Generation != tok.Generation || j.CompletedBy != tok.Owner {
		t.Errorf("after the restart the job is %s at generation %d by %s, want SUCCEEDED by %s", j.Status, j.Generation, j.CompletedBy, tok)
	}
	evs, err := l.store.WriteEvents(l.ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for _, e := range evs {
		if e.Accepted && (e.Verb == jobstore.VerbResult || e.Verb == jobstore.VerbResultUnfenced) {
			accepted++
		}
		if e.Accepted && e.Generation > tok.Generation {
			t.Errorf("the job was written at a later generation: %+v", e)
		}
	}
	if accepted != 1 {
		t.Errorf("%d results accepted, want 1: %+v", accepted, evs)
	}
	second.MustCleanShutdown(t)
}
