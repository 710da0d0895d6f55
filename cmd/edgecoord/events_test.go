package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestJobWaitAndArtifactGet drives the real edgecoord binary on PostgreSQL
// and MinIO: job wait returns 3 while the job runs past its timeout, 0 once
// it succeeds (waking on the commit), 1 for a failed job; artifact get
// downloads the PNG of the generation that ended the job through a
// presigned URL, 0600, with the record's sha256, and refuses an object
// whose bytes differ from the record.
func TestJobWaitAndArtifactGet(t *testing.T) {
	t.Parallel()
	env := e2e.NewEnv(t)
	mio := env.MinIO()
	// The commands work on the store and storage alone: NATS is unreachable.
	c := env.NewCoordinator(e2e.CoordinatorOptions{ID: "ev", Storage: true, Extra: `
nats:
  url: nats://127.0.0.1:1
storage:
  presign_expiry: 2m
`})
	ctx := t.Context()
	st, err := pgstore.Open(ctx, c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	owner := fencing.Owner("pc-a", "boot-1")
	task := protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "screen.png"}}}
	if _, err := st.Submit(ctx, jobstore.JobSpec{ID: "wj", Task: task}); err != nil {
		t.Fatal(err)
	}
	l, err := st.Claim(ctx, "wj", owner, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := c.CLI(t, "job", "wait", "wj", "--timeout", "300ms"); code != 3 || out != "job wj IN_PROGRESS after 300ms\n" {
		t.Fatalf("job wait on a running job: exit %d, %q %q", code, out, errOut)
	}

	// The PNG the job made, uploaded and registered under its token.
	var img bytes.Buffer
	if err := png.Encode(&img, image.NewGray(image.Rect(0, 0, 16, 16))); err != nil {
		t.Fatal(err)
	}
	key := l.Token.ObjectKey("screen.png")
	mc := mio.Client(t)
	if _, err := mc.PutObject(ctx, mio.Bucket, key, bytes.NewReader(img.Bytes()), int64(img.Len()), minio.PutObjectOptions{ContentType: "image/png"}); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(img.Bytes())
	if err := st.RegisterArtifact(ctx, l.Token, jobstore.ArtifactRecord{Name: "screen.png", Key: key, Size: int64(img.Len()),
		SHA256: hex.EncodeToString(sum[:]), ContentType: "image/png"}); err != nil {
		t.Fatal(err)
	}

	// job wait wakes on the commit.
	type res struct {
		code     int
		out, err string
	}
	waited := make(chan res, 1)
	go func() {
		out, errOut, code := c.CLI(t, "job", "wait", "wj", "--timeout", "1m")
		waited <- res{code, out, errOut}
	}()
	// The commit may come before the waiter reads the job or after: it
	// returns either way.
	if err := st.Commit(ctx, l.Token, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-waited:
		if r.code != 0 || r.out != "job wj SUCCEEDED\n" {
			t.Fatalf("job wait: exit %d, %q %q", r.code, r.out, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("job wait did not return after the commit")
	}

	dir := t.TempDir()
	dst := filepath.Join(dir, "got.png")
	out, errOut, code := c.CLI(t, "artifact", "get", "wj", "screen.png", "-o", dst)
	if code != 0 || !strings.Contains(out, hex.EncodeToString(sum[:])) {
		t.Fatalf("artifact get: exit %d, %q %q", code, out, errOut)
	}
	data, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, img.Bytes()) {
		t.Error("downloaded bytes differ from the object")
	}
	if _, err := png.Decode(bytes.NewReader(data)); err != nil {
		t.Errorf("not a PNG: %v", err)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if _, errOut, code := c.CLI(t, "artifact", "get", "wj", "other.png", "-o", dst); code != 1 || !strings.Contains(errOut, `no artifact "other.png" under g1`) {
		t.Errorf("artifact get of an unknown name: exit %d, %q", code, errOut)
	}

	// Bytes that do not match the record are refused and not written.
	if _, err := mc.PutObject(ctx, mio.Bucket, key, strings.NewReader("tampered"), 8, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.png")
	if _, errOut, code := c.CLI(t, "artifact", "get", "wj", "screen.png", "-o", bad); code != 1 || !strings.Contains(errOut, "the record says") {
		t.Errorf("artifact get of a changed object: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("a mismatching download was written: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left in %s: %d entries", dir, len(entries))
	}

	// A failed job: exit 1 with its end state and reason.
	if _, err := st.Submit(ctx, jobstore.JobSpec{ID: "fj", Task: task}); err != nil {
		t.Fatal(err)
	}
	lf, err := st.Claim(ctx, "fj", owner, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Fail(ctx, lf.Token, jobstore.Failure{Reason: "screen locked"}); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := c.CLI(t, "job", "wait", "fj"); code != 1 || out != "job fj FAILED: screen locked\n" {
		t.Errorf("job wait on a failed job: exit %d, %q %q", code, out, errOut)
	}
	if _, errOut, code := c.CLI(t, "job", "wait", "nope"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("job wait on an unknown job: exit %d, %q", code, errOut)
	}
	if _, _, code := c.CLI(t, "job", "wait", "wj", "--timeout", "0s"); code != 2 {
		t.Errorf("job wait --timeout 0s: exit %d, want 2", code)
	}
}

// TestServePublishesCancels: with an outbox, edgecoord serve publishes a
// job cancelled with job cancel (an end no agent reports) with its reason,
// under the job's failure key.
func TestServePublishesCancels(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	db := filepath.Join(t.TempDir(), "jobs.db")
	recv := coordtest.StartReceiver(t, ns.ClientURL(), "results.cancel")
	srv := serve(t, ns.ClientURL(), fmt.Sprintf("  driver: sqlite\n  path: %s\noutbox:\n  subject: results.cancel\n  timeout: 1s", db))
	srv.mustCLI(t, "job", "submit", "-f", writeFile(t, "j.yaml", "id: cx-job\ndevice: {serial: NONE}\nsteps: [{op: screenshot}]\n"))
	srv.mustCLI(t, "job", "cancel", "cx-job", "--reason", "wrong phone")
	key := jobstore.OutboxFailureKey("cx-job", 0)
	testenv.Eventually(t, 10*time.Second, "the cancel to be published", func() bool { return slices.Equal(recv.Applied(), []string{key}) })
	out := srv.mustCLI(t, "effect", "show", key, "--json")
	if !strings.Contains(out, `"reason": "wrong phone"`) || !strings.Contains(out, `"job_id": "cx-job"`) {
		t.Fatalf("effect show %s:\n%s", key, out)
	}
}
