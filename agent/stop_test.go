package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
	"github.com/edgeagent/edgeagent/uploader"
)

// throttled uploads through an uploader.Uploader at a bounded rate, like a
// home uplink: file artifacts are streamed through a slow reader (the size
// and SHA-256 are known, so nothing is spooled).
type throttled struct {
	inner uploader.Uploader
	bps   int64
}

func (t throttled) Upload(ctx context.Context, tok fencing.Token, a uploader.Artifact) (uploader.Result, error) {
	if a.Path != "" {
		f, err := os.Open(a.Path)
		if err != nil {
			return uploader.Result{}, err
		}
		defer f.Close()
		a.Body, a.Path = f, ""
	}
	a.Body = &slowReader{ctx: ctx, r: a.Body, bps: t.bps}
	return t.inner.Upload(ctx, tok, a)
}

type slowReader struct {
	ctx context.Context
	r   io.Reader
	bps int64
}

func (s *slowReader) Read(p []byte) (int, error) {
	const chunk = 256 << 10
	if len(p) > chunk {
		p = p[:chunk]
	}
	n, err := s.r.Read(p)
	t := time.NewTimer(time.Duration(int64(n) * int64(time.Second) / s.bps))
	defer t.Stop()
	select {
	case <-s.ctx.Done():
		return n, context.Cause(s.ctx)
	case <-t.C:
	}
	return n, err
}

// watch records every request the agent sends on its coordinator subjects,
// as the NATS server delivers them.
type watch struct {
	mu   sync.Mutex
	seen []seen
}

func (s *system) watch(agentID string) *watch {
	w := &watch{}
	mon := s.conn("monitor-" + agentID)
	if _, err := mon.Subscribe("edge.v1.coord."+agentID+".>", func(m *nats.Msg) {
		var body struct {
			Token fencing.Token `json:"token"`
		}
		_ = json.Unmarshal(m.Data, &body)
		p := strings.Split(m.Subject, ".")
		w.mu.Lock()
		w.seen = append(w.seen, seen{at: time.Now(), verb: p[len(p)-1], tok: body.Token})
		w.mu.Unlock()
	}); err != nil {
		s.t.Fatal(err)
	}
	if err := mon.Flush(); err != nil {
		s.t.Fatal(err)
	}
	return w
}

// forJob returns the requests about jobID.
func (w *watch) forJob(jobID string) []seen {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []seen
	for _, s := range w.seen {
		if s.tok.JobID == jobID {
			out = append(out, s)
		}
	}
	return out
}

func (w *watch) count(verb string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, s := range w.seen {
		if s.verb == verb {
			n++
		}
	}
	return n
}

func waitStop(t *testing.T, a *agent.Agent, jobID string, within time.Duration) agent.StopRecord {
	t.Helper()
	var rec agent.StopRecord
	testenv.Eventually(t, within, "the agent to stop job "+jobID, func() bool {
		for _, r := range a.Stops() {
			if r.Token.JobID == jobID {
				rec = r
				return true
			}
		}
		return false
	})
	return rec
}

// TestStaleReplyAbortsLargeUpload: a 96 MiB screen
// recording is being uploaded to MinIO in 5 MiB parts over a throttled link
// when the job is reassigned in the store. The agent learns it from the 409
// to its next renewal, and at once: the multipart upload is aborted (MinIO
// lists no incomplete upload and no object), no result or other call for
// the job follows, the spooled recording is gone, and the stop is logged
// with the job id, owner and generation. It runs with the uploader alone
// and with the on-disk upload spool in front of it, as the edgeagent binary
// has it (the stop hook drops the spool's entries of the token).
func TestStaleReplyAbortsLargeUpload(t *testing.T) {
	t.Run("direct", func(t *testing.T) { staleReplyAbortsLargeUpload(t, false) })
	t.Run("spool", func(t *testing.T) { staleReplyAbortsLargeUpload(t, true) })
}

func staleReplyAbortsLargeUpload(t *testing.T, useSpool bool) {
	leakCheck(t)
	sys := newSystem(t, 1500*time.Millisecond)
	s3, err := uploader.NewS3(uploader.S3Options{Endpoint: sys.mio.Endpoint, AccessKey: sys.mio.AccessKey,
		SecretKey: sys.mio.SecretKey, Bucket: sys.mio.Bucket, PartSize: uploader.MinPartSize, Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	spool := t.TempDir()
	var onStop []fencing.Token
	var onStopMu sync.Mutex
	var store uploader.Uploader = throttled{inner: s3, bps: 24 << 20}
	var sp *uploader.Spool
	if useSpool {
		if sp, err = uploader.NewSpool(t.TempDir(), store, uploader.SpoolOptions{}); err != nil {
			t.Fatal(err)
		}
		store = sp
	}
	a, _ := sys.startAgentWith("pc-a", agentSetup{
		phone: capture.SimOptions{RecordingSize: 96 << 20}, spool: spool, log: &logs, margin: 300 * time.Millisecond,
		store: store,
		tweak: func(o *agent.Options) {
			o.OnStop = func(tok fencing.Token, _ error) {
				onStopMu.Lock()
				onStop = append(onStop, tok)
				onStopMu.Unlock()
				if sp != nil {
					if _, err := sp.DropGeneration(context.Background(), tok); err != nil {
						t.Errorf("drop spooled uploads: %v", err)
					}
				}
			}
		},
	})
	w := sys.watch("pc-a")
	job, err := sys.store.Submit(sys.ctx, jobstore.JobSpec{Task: protocol.Task{Steps: []protocol.Step{
		{Op: protocol.OpRecordStart, Name: "scroll"},
		{Op: protocol.OpWait, DurationMS: 50},
		{Op: protocol.OpRecordStop},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	mc := sys.mio.Client(t)
	prefix := "jobs/" + job.ID + "/g1/"
	// The bucket is this test's own: list every incomplete upload in it.
	incomplete := func() []string {
		var keys []string
		for u := range mc.ListIncompleteUploads(sys.ctx, sys.mio.Bucket, "", true) {
			if u.Err != nil {
				t.Fatalf("list incomplete uploads: %v", u.Err)
			}
			keys = append(keys, u.Key)
		}
		return keys
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	})
	testenv.Eventually(t, 60*time.Second, "the recording's multipart upload to start", func() bool {
		if len(a.Stops()) > 0 || strings.Contains(logs.String(), "job done") {
			t.Fatal("the job ended before its upload was seen")
		}
		return len(incomplete()) > 0
	})

	// Reassign in the store, as an operator moving the job would; no revoke
	// is pushed, so the agent hears it as a 409.
	lease, err := sys.store.Reassign(sys.ctx, job.ID, "pc-z/0123456789abcdef", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	reassigned := time.Now()
	if lease.Token.Generation != 2 {
		t.Fatalf("reassigned at generation %d, want 2", lease.Token.Generation)
	}
	stop := waitStop(t, a, job.ID, 20*time.Second)
	t.Logf("stopped %v after the reassignment; cut short: %s", stop.At.Sub(reassigned), stop.CutShort)
	if !errors.Is(stop.Err, fencing.ErrStale) || stop.Token.Generation != 1 {
		t.Fatalf("stop %+v: want generation 1 stopped by a stale token", stop)
	}
	if stop.CutShort != "upload scroll.mp4" {
		t.Errorf("cut short %q, want the upload of scroll.mp4", stop.CutShort)
	}
	testenv.Eventually(t, 10*time.Second, "the job to leave the agent", func() bool { return len(a.Jobs()) == 0 })

	if keys := incomplete(); len(keys) != 0 {
		t.Errorf("incomplete multipart uploads left in MinIO: %v", keys)
	}
	if _, err := mc.StatObject(sys.ctx, sys.mio.Bucket, prefix+"scroll.mp4", minio.StatObjectOptions{}); err == nil {
		t.Error("the recording was stored although the upload was stopped")
	}
	// Nothing for the job after the stop, and never a result.
	time.Sleep(300 * time.Millisecond)
	sent := w.forJob(job.ID)
	for _, m := range sent {
		if m.verb == protocol.VerbResult || m.verb == protocol.VerbFail || m.verb == protocol.VerbArtifact {
			t.Errorf("agent sent %s for the stopped job", m.verb)
		}
	}
	if len(sent) > stop.Calls {
		t.Errorf("NATS carried %d requests for the job, the agent had sent %d when it stopped", len(sent), stop.Calls)
	}
	if j, err := sys.store.Get(sys.ctx, job.ID); err != nil || j.Status != jobstore.StatusInProgress || j.Generation != 2 {
		t.Errorf("job after the stop: %+v (%v), want IN_PROGRESS at generation 2", j, err)
	}
	// The spooled recording of the stopped generation is gone, and the
	// stop hook ran once for the token.
	if ents, _ := os.ReadDir(spool); len(ents) != 0 {
		t.Errorf("capture spool still holds %d file(s): %v", len(ents), ents)
	}
	if sp != nil {
		if ups := sp.Uploads(); len(ups) != 0 {
			t.Errorf("upload spool still has uploads: %+v", ups)
		}
		_ = filepath.WalkDir(sp.Dir(), func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				t.Errorf("upload spool still holds %s", path)
			}
			return nil
		})
	}
	onStopMu.Lock()
	if len(onStop) != 1 || onStop[0] != stop.Token {
		t.Errorf("OnStop calls %v, want one for %v", onStop, stop.Token)
	}
	onStopMu.Unlock()
	// The log line of the stop names the job, the owner and the generation.
	var found bool
	for _, e := range logs.entries("job stopped") {
		if e["job_id"] == job.ID && e["owner"] == a.Owner() && e["generation"] == float64(1) &&
			strings.Contains(fmt.Sprint(e["cause"]), "stale token") && e["level"] == "warn" {
			found = true
			line, _ := json.Marshal(e)
			t.Logf("stop logged: %s", line)
		}
	}
	if !found {
		t.Errorf("no \"job stopped\" log line with job_id, owner, generation and cause; log:\n%s", logs.String())
	}
}
