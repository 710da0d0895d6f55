package uploader

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestSpoolResumesAfterStorageRestart kills the MinIO server in the middle
// of a 200 MiB multipart upload (SIGKILL, as a crash would), starts it again
// on the same address and data, and checks that the upload completes from
// the parts already stored: no part the server acknowledged is sent again,
// and the object's SHA-256 matches. (-short uploads 40 MiB.)
func TestSpoolResumesAfterStorageRestart(t *testing.T) {
	size := int64(200 * mib)
	if testing.Short() {
		size = 40 * mib
	}
	const partSize = 5 * mib
	parts := int((size + partSize - 1) / partSize)
	stopAfter := parts / 3

	m := testenv.StartMinIOProcess(t)
	raw := m.Client(t)
	metrics := newMetrics(t)
	s3, f := faultyS3(t, m.MinIOServer, metrics, func(o *S3Options) {
		o.Parallelism = 4
		// Give up quickly while the server is down: the spool's attempts
		// take over.
		o.Retry = RetryPolicy{Attempts: 3, Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}
	})
	spool, err := NewSpool(t.TempDir(), s3, SpoolOptions{
		Retry:       RetryPolicy{Initial: 100 * time.Millisecond, Max: 500 * time.Millisecond},
		GiveUpAfter: 3 * time.Minute,
		Metrics:     metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	path, sha := writeRandomFile(t, size, 11)

	// Kill the server once a third of the parts are stored; start it again
	// once the spool has seen an attempt fail.
	var (
		once    sync.Once
		stopped atomic.Bool
		// parts acknowledged by the time the server starts again: no part
		// is acknowledged while it is down, and an answer already on its
		// way when it died has arrived once the spool waits, so this count
		// is the parts sent before the restart (a count read just after
		// the stop may miss one)
		ackedAtRestart int
		restarted      = make(chan error, 1)
	)
	f.onResponse = func(ex exchange) {
		if ex.kind != kindPart || ex.status != http.StatusOK {
			return
		}
		if n := f.count(kindPart, http.StatusOK); n >= stopAfter {
			once.Do(func() {
				go func() {
					m.Stop()
					stopped.Store(true)
					deadline := time.Now().Add(time.Minute)
					for time.Now().Before(deadline) {
						if ups := spool.Uploads(); len(ups) == 1 && ups[0].State == StateWaiting {
							break
						}
						time.Sleep(10 * time.Millisecond)
					}
					ackedAtRestart = f.count(kindPart, http.StatusOK)
					restarted <- m.Start()
				}()
			})
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	tok := testToken
	res, err := spool.Put(ctx, tok, Artifact{Name: "rec.mp4", ContentType: "video/mp4", Path: path, SHA256: sha, Size: size})
	took := time.Since(start)
	if !stopped.Load() {
		t.Fatalf("the server was never stopped (Put returned %v)", err)
	}
	if rerr := <-restarted; rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if res.Size != size || res.SHA256 != sha || res.Existed {
		t.Errorf("Result = %+v", res)
	}
	gotSize, gotSHA := storedSHA256(t, raw, m.Bucket, res.Key)
	if gotSize != size || gotSHA != sha {
		t.Errorf("stored %d bytes with sha256 %s, want %d bytes with %s", gotSize, gotSHA, size, sha)
	}

	// Each part the server acknowledged was sent once; the parts stored
	// before the stop were taken over, not sent again.
	acked := make(map[int]int)
	for _, ex := range f.exchanges() {
		if ex.kind == kindPart && ex.status == http.StatusOK {
			acked[ex.part]++
		}
	}
	for n, c := range acked {
		if c > 1 {
			t.Errorf("part %d was stored %d times", n, c)
		}
	}
	// A part whose answer was lost in the crash may be stored too, so more
	// than ackedAtStop parts may be resumed; exactly the others are sent
	// after the restart.
	sent := counter(metrics.parts.WithLabelValues("sent"))
	resumed := counter(metrics.parts.WithLabelValues("resumed"))
	if resumed < ackedAtRestart {
		t.Errorf("resumed %d parts, want at least the %d acknowledged before the restart", resumed, ackedAtRestart)
	}
	if after := sent - ackedAtRestart; after != parts-resumed {
		t.Errorf("sent %d parts after the restart, want %d (%d parts, %d resumed)", after, parts-resumed, parts, resumed)
	}
	if n := counter(metrics.resumed); n < 1 {
		t.Errorf("multipart uploads resumed = %d, want at least 1", n)
	}
	if n := counter(metrics.uploads.WithLabelValues(modeDirect, outcomeFailed)); n < 1 {
		t.Errorf("failed attempts = %d, want at least 1", n)
	}
	if ids := incompleteUploads(t, raw, m.Bucket); len(ids) != 0 {
		t.Errorf("incomplete uploads left: %v", ids)
	}
	if files := spoolFiles(t, spool.Dir()); len(files) != 0 {
		t.Errorf("spool files left: %v", files)
	}
	t.Logf("%d MiB in %d parts: %d acknowledged before the restart, %d resumed from storage, %d sent after the restart; %d bytes sent in all for %d; took %v",
		size/mib, parts, ackedAtRestart, resumed, sent-ackedAtRestart, counter(metrics.bytes), size, took.Round(time.Millisecond))
}
