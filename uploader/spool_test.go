package uploader

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"go.uber.org/goleak"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

func newSpool(t testing.TB, up Uploader, m *Metrics, tweak func(*SpoolOptions)) *Spool {
	t.Helper()
	opts := SpoolOptions{
		Retry:       RetryPolicy{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond},
		GiveUpAfter: time.Minute,
		Metrics:     m,
	}
	if tweak != nil {
		tweak(&opts)
	}
	s, err := NewSpool(filepath.Join(t.TempDir(), "spool"), up, opts)
	if err != nil {
		t.Fatalf("NewSpool: %v", err)
	}
	return s
}

func TestSpoolPut(t *testing.T) {
	srv := testenv.MinIO(t)
	raw := srv.Client(t)
	m := newMetrics(t)
	s3, f := faultyS3(t, srv, m, nil)
	spool := newSpool(t, s3, m, nil)
	ctx := testCtx(t)

	if runtime.GOOS != "windows" {
		fi, err := os.Stat(spool.Dir())
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("spool dir mode = %v, %v; want 0700", fi.Mode().Perm(), err)
		}
	}

	small := []byte(`<hierarchy rotation="0"/>`)
	big, bigSHA := writeRandomFile(t, 12*mib+5, 21)
	var perms []os.FileMode
	var seen sync.Once
	var during []Progress
	for _, a := range []Artifact{
		{Name: "ui.xml", ContentType: "application/xml", Body: bytes.NewReader(small), SHA256: sum(small)},
		{Name: "rec.mp4", ContentType: "video/mp4", Path: big},
		{Name: "stream.bin", Body: onlyReader{bytes.NewReader(small)}},
	} {
		if a.Name == "rec.mp4" {
			// Look at the spool while the big one is on its way.
			f.onResponse = func(ex exchange) {
				if ex.kind != kindPart {
					return
				}
				seen.Do(func() {
					during = spool.Uploads()
					for _, name := range spoolFiles(t, spool.Dir()) {
						if fi, err := os.Stat(filepath.Join(spool.Dir(), name)); err == nil {
							perms = append(perms, fi.Mode().Perm())
						}
					}
				})
			}
		}
		res, err := spool.Put(ctx, testToken, a)
		if err != nil {
			t.Fatalf("Put %s: %v", a.Name, err)
		}
		obj, err := s3.Stat(ctx, res.Key)
		if err != nil || obj.Token != testToken || obj.SHA256 != res.SHA256 || obj.Size != res.Size {
			t.Errorf("Stat %s = %+v, %v; Result %+v", a.Name, obj, err, res)
		}
		wantType := a.ContentType
		if wantType == "" {
			wantType = DefaultContentType
		}
		if obj.ContentType != wantType {
			t.Errorf("%s: content type %q, want %q", a.Name, obj.ContentType, wantType)
		}
	}
	if _, got := storedSHA256(t, raw, srv.Bucket, testToken.ObjectKey("rec.mp4")); got != bigSHA {
		t.Errorf("rec.mp4 stored with sha256 %s, want %s", got, bigSHA)
	}
	if len(during) != 1 || during[0].Name != "rec.mp4" || during[0].State != StateUploading || during[0].Total != 12*mib+5 || during[0].Done <= 0 || during[0].Token != testToken {
		t.Errorf("Uploads during the upload = %+v", during)
	}
	if len(perms) != 2 {
		t.Errorf("spool held %d files during the upload, want 2 (record and data)", len(perms))
	}
	for _, p := range perms {
		if runtime.GOOS != "windows" && p != 0o600 {
			t.Errorf("spool file mode %v, want 0600", p)
		}
	}
	if files := spoolFiles(t, spool.Dir()); len(files) != 0 {
		t.Errorf("spool files left: %v", files)
	}
	if ups := spool.Uploads(); len(ups) != 0 {
		t.Errorf("Uploads after = %+v", ups)
	}
	if n := counter(m.spoolEntries); n != 0 {
		t.Errorf("spool entries gauge = %d", n)
	}
	if n := counter(m.uploads.WithLabelValues(modeDirect, outcomeOK)); n != 3 {
		t.Errorf("uploads ok = %d, want 3", n)
	}
	if n := counter(m.inflightTotal); n != 0 {
		t.Errorf("in-flight total gauge = %d after the uploads", n)
	}

	// Content that does not match what was declared never leaves the spool.
	for _, a := range []Artifact{
		{Name: "bad-sha", Body: bytes.NewReader(small), SHA256: sum([]byte("other"))},
		{Name: "bad-size", Body: bytes.NewReader(small), Size: 3},
	} {
		_, err := spool.Put(ctx, testToken, a)
		if !errors.Is(err, ErrChecksumMismatch) && !errors.Is(err, ErrSizeMismatch) {
			t.Errorf("Put %s: err = %v, want a mismatch", a.Name, err)
		}
		if _, err := s3.Stat(ctx, testToken.ObjectKey(a.Name)); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s stored: %v", a.Name, err)
		}
	}
	if files := spoolFiles(t, spool.Dir()); len(files) != 0 {
		t.Errorf("spool files left: %v", files)
	}
}

// TestSpoolStopAbortsMultipart stops a multipart upload going through the
// spool in three ways: the job's context cancelled with a cause (a revoke)
// while parts go up, DropGeneration, and a cancel while the spool waits to
// try again. Each time no incomplete upload stays in MinIO and no spool entry
// stays on disk.
func TestSpoolStopAbortsMultipart(t *testing.T) {
	srv := testenv.MinIO(t)
	raw := srv.Client(t)
	path, sha := writeRandomFile(t, 30*mib, 31)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))

	for _, tc := range []struct {
		name  string
		cause error
	}{
		{"revoked", fencing.ErrRevoked},
		{"drop-generation", ErrDropped},
		{"while-waiting", fencing.ErrLeaseExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMetrics(t)
			s3, f := faultyS3(t, srv, m, func(o *S3Options) { o.Parallelism = 2 })
			spool := newSpool(t, s3, m, func(o *SpoolOptions) {
				// Long enough that the stop comes while it waits; the
				// give-up time lies far beyond the wait, so however long
				// the failed attempt took, the spool waits and never gives up.
				o.Retry, o.GiveUpAfter = RetryPolicy{Initial: time.Minute}, time.Hour
			})
			ctx, cancel := context.WithCancelCause(testCtx(t))
			defer cancel(nil)
			tok := testToken
			tok.JobID = "stop-" + tc.name

			stopped := make(chan struct{})
			putDone := make(chan struct{})
			var stopOnce sync.Once
			stop := func() {
				stopOnce.Do(func() {
					go func() {
						defer close(stopped)
						if tc.cause == ErrDropped {
							n, err := spool.DropGeneration(context.Background(), tok)
							if err != nil || n != 1 {
								t.Errorf("DropGeneration = %d, %v; want 1, nil", n, err)
							}
							return
						}
						cancel(tc.cause)
					}()
				})
			}
			switch tc.name {
			case "while-waiting":
				// Every part fails: the attempt gives up and the spool waits.
				f.inject(fault{kind: kindPart, status: http.StatusServiceUnavailable, times: 1000})
				go func() {
					for {
						if ups := spool.Uploads(); len(ups) == 1 && ups[0].State == StateWaiting {
							stop()
							return
						}
						select {
						case <-putDone:
							return
						case <-time.After(5 * time.Millisecond):
						}
					}
				}()
			default:
				f.onResponse = func(ex exchange) {
					if ex.kind == kindPart && ex.status == http.StatusOK && f.count(kindPart, http.StatusOK) >= 2 {
						stop()
					}
				}
			}

			_, err := spool.Put(ctx, tok, Artifact{Name: "rec.mp4", ContentType: "video/mp4", Path: path, SHA256: sha})
			close(putDone)
			select {
			case <-stopped:
			case <-time.After(time.Minute):
				t.Fatalf("never stopped; Put: %v", err)
			}
			if !errors.Is(err, context.Canceled) || !errors.Is(err, tc.cause) {
				t.Fatalf("Put: err = %v, want context.Canceled with cause %v", err, tc.cause)
			}
			if f.count(kindInitiate, http.StatusOK) != 1 {
				t.Fatalf("no multipart upload was started")
			}
			if ids := incompleteUploads(t, raw, srv.Bucket); len(ids) != 0 {
				t.Errorf("incomplete uploads left: %v", ids)
			}
			if files := spoolFiles(t, spool.Dir()); len(files) != 0 {
				t.Errorf("spool files left: %v", files)
			}
			if _, err := s3.Stat(context.Background(), tok.ObjectKey("rec.mp4")); !errors.Is(err, ErrNotFound) {
				t.Errorf("Stat after stop: err = %v, want ErrNotFound", err)
			}
			if n := counter(m.aborted); n < 1 {
				t.Errorf("aborted = %d, want at least 1", n)
			}
			if n := counter(m.spoolDropped.WithLabelValues("stop")); n != 1 {
				t.Errorf("dropped{stop} = %d, want 1", n)
			}
			if n := counter(m.spoolEntries); n != 0 {
				t.Errorf("spool entries gauge = %d", n)
			}
		})
	}
}

// TestSpoolRetriesUntilStored has the storage answer 503 to every request
// for a while: the attempts give up, the spool waits and tries again, and
// the artifact is stored once the storage recovers.
func TestSpoolRetriesUntilStored(t *testing.T) {
	srv := testenv.MinIO(t)
	m := newMetrics(t)
	s3, f := faultyS3(t, srv, m, func(o *S3Options) {
		o.Retry = RetryPolicy{Attempts: 2, Initial: time.Millisecond, Max: time.Millisecond}
	})
	spool := newSpool(t, s3, m, nil)
	f.inject(fault{kind: kindPut, status: http.StatusServiceUnavailable, times: 5})
	body := []byte("screenshot")
	res, err := spool.Put(testCtx(t), testToken, Artifact{Name: "shot.png", ContentType: "image/png", Body: bytes.NewReader(body)})
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if res.SHA256 != sum(body) || res.Existed {
		t.Errorf("Result = %+v", res)
	}
	if n := f.count(kindPut, http.StatusServiceUnavailable); n != 5 {
		t.Errorf("503 answers = %d, want 5", n)
	}
	// 6 PUTs in 3 attempts of 2 tries: 3 retries within attempts.
	if n := counter(m.retries.WithLabelValues("put")); n != 3 {
		t.Errorf("put retries = %d, want 3", n)
	}
	if n := counter(m.uploads.WithLabelValues(modeDirect, outcomeFailed)); n != 2 {
		t.Errorf("failed attempts = %d, want 2", n)
	}
}

// TestSpoolGivesUp checks that an artifact the storage never takes fails
// after GiveUpAfter, leaving nothing behind.
func TestSpoolGivesUp(t *testing.T) {
	srv := testenv.MinIO(t)
	raw := srv.Client(t)
	m := newMetrics(t)
	s3, f := faultyS3(t, srv, m, func(o *S3Options) {
		o.Retry = RetryPolicy{Attempts: 1}
	})
	spool := newSpool(t, s3, m, func(o *SpoolOptions) { o.GiveUpAfter = 300 * time.Millisecond })
	f.inject(fault{kind: kindPart, status: http.StatusInternalServerError, times: 1 << 20})
	path, _ := writeRandomFile(t, 11*mib, 41)
	_, err := spool.Put(testCtx(t), testToken, Artifact{Name: "rec.mp4", Path: path})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "gave up") {
		t.Fatalf("Put: err = %v, want ErrUnavailable after giving up", err)
	}
	if ids := incompleteUploads(t, raw, srv.Bucket); len(ids) != 0 {
		t.Errorf("incomplete uploads left: %v", ids)
	}
	if files := spoolFiles(t, spool.Dir()); len(files) != 0 {
		t.Errorf("spool files left: %v", files)
	}
	if n := counter(m.spoolDropped.WithLabelValues("failed")); n != 1 {
		t.Errorf("dropped{failed} = %d, want 1", n)
	}
}

// TestSpoolRecover plants what a crashed agent leaves: an entry with a
// multipart upload in progress, an entry whose upload id was never recorded
// but whose upload exists, a data file without record, a temp file, and an
// entry of the current boot. Recover drops the previous boot's entries,
// aborts their uploads and removes the strays.
func TestSpoolRecover(t *testing.T) {
	srv := testenv.MinIO(t)
	raw := srv.Client(t)
	core := &minio.Core{Client: raw}
	m := newMetrics(t)
	s3, _ := faultyS3(t, srv, m, nil)
	dir := filepath.Join(t.TempDir(), "spool")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	prev := fencing.Token{JobID: "job-9", Owner: "agent-a/boot-1", Generation: 2}
	cur := fencing.Token{JobID: "job-10", Owner: "agent-a/boot-2", Generation: 1}

	plant := func(id string, tok fencing.Token, name string, upload bool, recordID bool) {
		t.Helper()
		data := randomBytes(6*mib, 51)
		rec := record{Version: recordVersion, JobID: tok.JobID, Owner: tok.Owner, Generation: tok.Generation,
			Name: name, Key: tok.ObjectKey(name), ContentType: "video/mp4", Size: int64(len(data)), SHA256: sum(data), Created: time.Now()}
		if upload {
			uid, err := core.NewMultipartUpload(ctx, srv.Bucket, rec.Key, minio.PutObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := core.PutObjectPart(ctx, srv.Bucket, rec.Key, uid, 1, bytes.NewReader(data[:5*mib]), 5*mib, minio.PutObjectPartOptions{}); err != nil {
				t.Fatal(err)
			}
			if recordID {
				rec.Multipart = Multipart{UploadID: uid, PartSize: 5 * mib}
			}
		}
		b, _ := json.Marshal(rec)
		if err := os.WriteFile(filepath.Join(dir, id+recordExt), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, id+dataExt), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	plant("a", prev, "rec.mp4", true, true)
	plant("b", prev, "rec2.mp4", true, false)
	plant("c", cur, "shot.png", false, false)
	for _, stray := range []string{"d" + dataExt, "e" + recordExt + tmpExt} {
		if err := os.WriteFile(filepath.Join(dir, stray), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if ids := incompleteUploads(t, raw, srv.Bucket); len(ids) != 2 {
		t.Fatalf("planted %d incomplete uploads, want 2", len(ids))
	}

	spool, err := NewSpool(dir, s3, SpoolOptions{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	if n := counter(m.spoolEntries); n != 3 {
		t.Errorf("spool entries gauge at open = %d, want 3", n)
	}
	rep, err := spool.Recover(ctx, cur.Owner)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if rep.Dropped != 2 || rep.Bytes != 12*mib || rep.Strays != 2 {
		t.Errorf("Recover = %+v, want 2 dropped of 12 MiB, 2 strays", rep)
	}
	if ids := incompleteUploads(t, raw, srv.Bucket); len(ids) != 0 {
		t.Errorf("incomplete uploads left: %v", ids)
	}
	got := strings.Join(spoolFiles(t, dir), " ")
	if got != "c.data c.json" {
		t.Errorf("spool holds %q, want the current boot's entry only", got)
	}
	if n := counter(m.spoolDropped.WithLabelValues("previous_boot")); n != 2 {
		t.Errorf("dropped{previous_boot} = %d, want 2", n)
	}
	if n := counter(m.spoolEntries); n != 1 {
		t.Errorf("spool entries gauge = %d, want 1", n)
	}

	// The current generation's leftover goes with DropGeneration.
	if n, err := spool.DropGeneration(ctx, cur); err != nil || n != 1 {
		t.Errorf("DropGeneration = %d, %v", n, err)
	}
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Errorf("spool files left: %v", files)
	}
}

// countingUploader counts the uploads that reach the uploader it wraps.
type countingUploader struct {
	Uploader
	calls atomic.Int32
}

func (c *countingUploader) Upload(ctx context.Context, tok fencing.Token, a Artifact) (Result, error) {
	c.calls.Add(1)
	return c.Uploader.Upload(ctx, tok, a)
}

// cancelAtEOF is a body that stops its job as its last byte is read.
type cancelAtEOF struct {
	r      *bytes.Reader
	cancel context.CancelCauseFunc
}

func (b *cancelAtEOF) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil {
		b.cancel(fencing.ErrRevoked)
	}
	return n, err
}

// A job stopped while its capture is being spooled (written and synced)
// sends nothing of it to the storage: Put ends with the stop's cause and
// the uploader is never called.
func TestSpoolStoppedWhileSpoolingUploadsNothing(t *testing.T) {
	srv := testenv.MinIO(t)
	m := newMetrics(t)
	s3, _ := faultyS3(t, srv, m, nil)
	up := &countingUploader{Uploader: s3}
	spool := newSpool(t, up, m, nil)
	ctx, cancel := context.WithCancelCause(testCtx(t))
	defer cancel(nil)
	body := &cancelAtEOF{r: bytes.NewReader([]byte("screenshot")), cancel: cancel}
	_, err := spool.Put(ctx, testToken, Artifact{Name: "shot.png", ContentType: "image/png", Body: body})
	if !errors.Is(err, fencing.ErrRevoked) {
		t.Fatalf("Put = %v, want the stop's cause %v", err, fencing.ErrRevoked)
	}
	if n := up.calls.Load(); n != 0 {
		t.Fatalf("the uploader was called %d times after the stop", n)
	}
	if got := counter(m.spoolDropped.WithLabelValues("stop")); got != 1 {
		t.Errorf("entries dropped for a stop = %v, want 1", got)
	}
	if files := spoolFiles(t, spool.Dir()); len(files) != 0 {
		t.Errorf("spool files left: %v", files)
	}
}
