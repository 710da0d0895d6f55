package uploader

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

const envCrashSpool = "EDGE_UPLOADER_CRASH_SPOOL" // the spool dir of the helper

// TestSpoolCrashHelperProcess is not a test: it is the agent process that
// TestSpoolRecoverAfterCrash kills in the middle of an upload. It uploads
// slowly (bandwidth limit) so that it is killed with a multipart upload in
// progress.
func TestSpoolCrashHelperProcess(t *testing.T) {
	dir := os.Getenv(envCrashSpool)
	if dir == "" {
		return
	}
	access, secret, _ := strings.Cut(os.Getenv(envHelperKeys), ":")
	s3, err := NewS3(S3Options{
		Endpoint: os.Getenv(envHelperEndpoint), Bucket: os.Getenv(envHelperBucket), AccessKey: access, SecretKey: secret,
		PartSize: MinPartSize, Parallelism: 1, BytesPerSecond: 4 * mib,
	})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	spool, err := NewSpool(dir, s3, SpoolOptions{})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	tok := fencing.Token{JobID: "job-crash", Owner: "agent-a/boot-1", Generation: 4}
	_, err = spool.Put(context.Background(), tok, Artifact{Name: "rec.mp4", ContentType: "video/mp4", Path: os.Getenv(envHelperFile)})
	fmt.Println("ERROR Put returned:", err)
	os.Exit(1)
}

// TestSpoolRecoverAfterCrash kills an agent process (SIGKILL) while it
// uploads a recording, then opens its spool as the next boot would:
// Recover drops the previous boot's entry, aborts its multipart upload and
// frees its files.
func TestSpoolRecoverAfterCrash(t *testing.T) {
	srv := testenv.MinIO(t)
	raw := srv.Client(t)
	dir := filepath.Join(t.TempDir(), "spool")
	path, _ := writeRandomFile(t, 40*mib, 141)

	cmd := exec.Command(os.Args[0], "-test.run=^TestSpoolCrashHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashSpool+"="+dir, envHelperFile+"="+path,
		envHelperEndpoint+"="+srv.Endpoint, envHelperBucket+"="+srv.Bucket, envHelperKeys+"="+srv.AccessKey+":"+srv.SecretKey)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Wait until the helper has recorded its multipart upload, then kill it.
	deadline := time.Now().Add(time.Minute)
	recorded := false
	for !recorded {
		select {
		case err := <-exited:
			t.Fatalf("helper exited early: %v\n%s", err, out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("helper recorded no multipart upload in a minute:\n%s", out)
		}
		recs, _ := filepath.Glob(filepath.Join(dir, "*"+recordExt))
		for _, r := range recs {
			var rec record
			if b, err := os.ReadFile(r); err == nil && json.Unmarshal(b, &rec) == nil && rec.Multipart.UploadID != "" {
				recorded = true
			}
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	if ids := incompleteUploads(t, raw, srv.Bucket); len(ids) != 1 {
		t.Fatalf("after the crash: incomplete uploads %v, want 1", ids)
	}
	if files := spoolFiles(t, dir); len(files) != 2 {
		t.Fatalf("after the crash: spool holds %v, want a record and its data", files)
	}

	m := newMetrics(t)
	s3, _ := faultyS3(t, srv, m, nil)
	spool, err := NewSpool(dir, s3, SpoolOptions{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := spool.Recover(testCtx(t), "agent-a/boot-2")
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if rep.Dropped != 1 || rep.Bytes != 40*mib {
		t.Errorf("Recover = %+v, want 1 entry of 40 MiB dropped", rep)
	}
	if ids := incompleteUploads(t, raw, srv.Bucket); len(ids) != 0 {
		t.Errorf("incomplete uploads left: %v", ids)
	}
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Errorf("spool files left: %v", files)
	}
	if _, err := s3.Stat(testCtx(t), fencing.Token{JobID: "job-crash", Owner: "agent-a/boot-1", Generation: 4}.ObjectKey("rec.mp4")); err == nil {
		t.Errorf("the crashed boot's object was stored")
	}
}
