package uploader

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"go.uber.org/goleak"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

const mib = 1 << 20

var testToken = fencing.Token{JobID: "job-1", Owner: "agent-a/boot-1", Generation: 3}

// request is what the recording transport saw of one request.
type request struct {
	method      string
	query       string
	ifNoneMatch string
}

// recorder is an HTTP transport that records every request it carries.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []request
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, request{method: req.Method, query: req.URL.RawQuery, ifNoneMatch: req.Header.Get("If-None-Match")})
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

func (r *recorder) take() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

type env struct {
	s   *S3
	raw *minio.Client
	rec *recorder
	srv testenv.MinIOServer
}

func newEnv(t testing.TB, tweak func(*S3Options)) *env {
	t.Helper()
	srv := testenv.MinIO(t)
	tr, err := minio.DefaultTransport(false)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{next: tr}
	opts := S3Options{
		Endpoint:  srv.Endpoint,
		Bucket:    srv.Bucket,
		AccessKey: srv.AccessKey,
		SecretKey: srv.SecretKey,
		PartSize:  5 * mib,
		TempDir:   t.TempDir(),
		Transport: rec,
	}
	if tweak != nil {
		tweak(&opts)
	}
	s, err := NewS3(opts)
	if err != nil {
		t.Fatalf("NewS3: %v", err)
	}
	return &env{s: s, raw: srv.Client(t), rec: rec, srv: srv}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed+1))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// onlyReader hides every method but Read, so the body cannot seek.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func (e *env) get(t *testing.T, key string) []byte {
	t.Helper()
	obj, err := e.raw.GetObject(testCtx(t), e.srv.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return b
}

func (e *env) incomplete(t *testing.T) []string {
	t.Helper()
	var ids []string
	for u := range e.raw.ListIncompleteUploads(testCtx(t), e.srv.Bucket, "", true) {
		if u.Err != nil {
			t.Fatalf("list incomplete uploads: %v", u.Err)
		}
		ids = append(ids, u.Key+" "+u.UploadID)
	}
	return ids
}

func TestUploadStamps(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testCtx(t)
	body := []byte(`{"screen":"home"}`)
	res, err := e.s.Upload(ctx, testToken, Artifact{Name: "ui.json", ContentType: "application/json", Body: bytes.NewReader(body)})
	if err != nil {
		t.Fatalf("Upload: %v", err)
	}
	wantKey := "jobs/job-1/g3/ui.json"
	if res.Key != wantKey || res.Size != int64(len(body)) || res.SHA256 != sum(body) || res.ETag == "" || res.Existed {
		t.Errorf("Result = %+v", res)
	}

	info, err := e.raw.StatObject(ctx, e.srv.Bucket, wantKey, minio.StatObjectOptions{})
	if err != nil {
		t.Fatalf("stat: %v", err)
	}
	for h, want := range map[string]string{
		"X-Amz-Meta-Job-Id":     "job-1",
		"X-Amz-Meta-Owner":      "agent-a/boot-1",
		"X-Amz-Meta-Generation": "3",
		"X-Amz-Meta-Sha256":     sum(body),
		"Content-Type":          "application/json",
	} {
		if got := info.Metadata.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if got := e.get(t, wantKey); !bytes.Equal(got, body) {
		t.Errorf("content = %q, want %q", got, body)
	}

	obj, err := e.s.Stat(ctx, wantKey)
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	if obj.Token != testToken || obj.SHA256 != sum(body) || obj.Size != int64(len(body)) || obj.ContentType != "application/json" {
		t.Errorf("Stat = %+v", obj)
	}
}

func TestUploadSendsIfNoneMatch(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testCtx(t)
	if _, err := e.s.Upload(ctx, testToken, Artifact{Name: "small.bin", Body: bytes.NewReader([]byte("x"))}); err != nil {
		t.Fatalf("Upload small: %v", err)
	}
	var puts int
	for _, r := range e.rec.take() {
		if r.method == http.MethodPut {
			puts++
			if r.ifNoneMatch != "*" {
				t.Errorf("PUT ?%s sent If-None-Match %q, want *", r.query, r.ifNoneMatch)
			}
		}
	}
	if puts != 1 {
		t.Errorf("small upload sent %d PUTs, want 1", puts)
	}

	big := randomBytes(11*mib, 1)
	if _, err := e.s.Upload(ctx, testToken, Artifact{Name: "big.bin", Body: bytes.NewReader(big)}); err != nil {
		t.Fatalf("Upload big: %v", err)
	}
	var initiated, completed, parts int
	for _, r := range e.rec.take() {
		switch {
		case r.method == http.MethodPost && strings.HasPrefix(r.query, "uploads"):
			initiated++
			if r.ifNoneMatch != "*" {
				t.Errorf("initiate sent If-None-Match %q, want *", r.ifNoneMatch)
			}
		case r.method == http.MethodPost && strings.Contains(r.query, "uploadId="):
			completed++
			if r.ifNoneMatch != "*" {
				t.Errorf("complete sent If-None-Match %q, want *", r.ifNoneMatch)
			}
		case r.method == http.MethodPut && strings.Contains(r.query, "partNumber="):
			parts++
		}
	}
	if initiated != 1 || completed != 1 || parts != 3 {
		t.Errorf("multipart requests: %d initiate, %d parts, %d complete; want 1, 3, 1", initiated, parts, completed)
	}
}

func TestUploadExistsAndRetry(t *testing.T) {
	for name, size := range map[string]int{"single": 1000, "multipart": 12 * mib} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := testCtx(t)
			first := randomBytes(size, 2)
			res1, err := e.s.Upload(ctx, testToken, Artifact{Name: "shot.png", ContentType: "image/png", Body: bytes.NewReader(first)})
			if err != nil {
				t.Fatalf("first Upload: %v", err)
			}

			// Other content at the same key: refused, original unchanged.
			other := randomBytes(size, 3)
			_, err = e.s.Upload(ctx, testToken, Artifact{Name: "shot.png", ContentType: "image/png", Body: bytes.NewReader(other)})
			if !errors.Is(err, ErrExists) {
				t.Fatalf("second Upload with other content: err = %v, want ErrExists", err)
			}
			if got := e.get(t, res1.Key); !bytes.Equal(got, first) {
				t.Fatalf("original overwritten")
			}
			obj, err := e.s.Stat(ctx, res1.Key)
			if err != nil || obj.SHA256 != sum(first) {
				t.Fatalf("Stat after refused overwrite = %+v, %v", obj, err)
			}

			// The same content again (a retry whose first attempt landed).
			res2, err := e.s.Upload(ctx, testToken, Artifact{Name: "shot.png", ContentType: "image/png", Body: bytes.NewReader(first)})
			if err != nil {
				t.Fatalf("retry Upload: %v", err)
			}
			if !res2.Existed || res2.Key != res1.Key || res2.SHA256 != res1.SHA256 || res2.Size != res1.Size || res2.ETag != res1.ETag {
				t.Errorf("retry Result = %+v, first = %+v", res2, res1)
			}

			// Same content under another owner of the same generation is not
			// the same upload.
			imposter := testToken
			imposter.Owner = "agent-b/boot-9"
			if _, err := e.s.Upload(ctx, imposter, Artifact{Name: "shot.png", Body: bytes.NewReader(first)}); !errors.Is(err, ErrExists) {
				t.Errorf("Upload by other owner: err = %v, want ErrExists", err)
			}
			if ids := e.incomplete(t); len(ids) != 0 {
				t.Errorf("incomplete uploads left: %v", ids)
			}
		})
	}
}

func TestUploadMultipart(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testCtx(t)
	body := randomBytes(12*mib+123, 4)
	path := filepath.Join(t.TempDir(), "rec.mp4")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		a    Artifact
	}{
		{"seekable", Artifact{Body: bytes.NewReader(body)}},
		{"file", Artifact{Path: path}},
		{"stream-spooled", Artifact{Body: onlyReader{bytes.NewReader(body)}}},
		{"stream-with-sha", Artifact{Body: onlyReader{bytes.NewReader(body)}, SHA256: sum(body)}},
		{"stream-with-sha-and-size", Artifact{Body: onlyReader{bytes.NewReader(body)}, SHA256: strings.ToUpper(sum(body)), Size: int64(len(body))}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := c.a
			a.Name = c.name + ".mp4"
			a.ContentType = "video/mp4"
			res, err := e.s.Upload(ctx, testToken, a)
			if err != nil {
				t.Fatalf("Upload: %v", err)
			}
			if res.Size != int64(len(body)) || res.SHA256 != sum(body) || !strings.HasSuffix(res.ETag, "-3") {
				t.Errorf("Result = %+v, want size %d, 3 parts", res, len(body))
			}
			if got := e.get(t, res.Key); !bytes.Equal(got, body) {
				t.Errorf("content differs: %d bytes, sha256 %s", len(got), sum(got))
			}
			obj, err := e.s.Stat(ctx, res.Key)
			if err != nil || obj.Token != testToken || obj.SHA256 != sum(body) || obj.ContentType != "video/mp4" {
				t.Errorf("Stat = %+v, %v", obj, err)
			}
		})
	}
	if ids := e.incomplete(t); len(ids) != 0 {
		t.Errorf("incomplete uploads left: %v", ids)
	}
	spool, _ := os.ReadDir(e.s.opts.TempDir)
	if len(spool) != 0 {
		t.Errorf("spool files left: %v", spool)
	}
}

func TestUploadEmptyAndExactPart(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testCtx(t)
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	exact := randomBytes(5*mib, 5)
	for name, a := range map[string]Artifact{
		"empty-file":         {Path: empty},
		"empty-stream":       {Body: onlyReader{strings.NewReader("")}},
		"exact-part-stream":  {Body: onlyReader{bytes.NewReader(exact)}},
		"exact-part-seeker":  {Body: bytes.NewReader(exact)},
		"exact-part-withsha": {Body: onlyReader{bytes.NewReader(exact)}, SHA256: sum(exact)},
	} {
		a.Name = name
		res, err := e.s.Upload(ctx, testToken, a)
		if err != nil {
			t.Errorf("%s: Upload: %v", name, err)
			continue
		}
		want := exact
		if strings.HasPrefix(name, "empty") {
			want = nil
		}
		if got := e.get(t, res.Key); !bytes.Equal(got, want) || res.Size != int64(len(want)) || res.SHA256 != sum(want) {
			t.Errorf("%s: stored %d bytes, Result %+v; want %d bytes", name, len(got), res, len(want))
		}
	}
}

// cancelReader cancels its context once it has handed out after bytes, and
// keeps handing out data.
type cancelReader struct {
	r      io.Reader
	after  int
	n      int
	cancel func()
}

func (c *cancelReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	if c.n >= c.after && c.cancel != nil {
		c.cancel()
		c.cancel = nil
	}
	return n, err
}

func TestUploadCancelAborts(t *testing.T) {
	e := newEnv(t, func(o *S3Options) { o.Parallelism = 2 })
	// No goroutine of an upload outlives it; idle keep-alive connections
	// belong to the HTTP transport.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
	body := randomBytes(20*mib, 6)
	for _, tc := range []struct {
		name  string
		after int
		cause error
	}{
		{"during-first-part", mib, nil},
		{"after-two-parts", 11 * mib, nil},
		{"revoked", 7 * mib, fencing.ErrRevoked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(testCtx(t))
			defer cancel(nil)
			r := &cancelReader{r: bytes.NewReader(body), after: tc.after, cancel: func() { cancel(tc.cause) }}
			start := time.Now()
			_, err := e.s.Upload(ctx, testToken, Artifact{Name: tc.name, Body: onlyReader{r}, SHA256: sum(body)})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Upload: err = %v, want context.Canceled", err)
			}
			if tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Errorf("Upload: err = %v, want it to carry %v", err, tc.cause)
			}
			t.Logf("returned %v after start: %v", time.Since(start), err)
			if ids := e.incomplete(t); len(ids) != 0 {
				t.Errorf("incomplete uploads left: %v", ids)
			}
			if _, err := e.s.Stat(testCtx(t), testToken.ObjectKey(tc.name)); !errors.Is(err, ErrNotFound) {
				t.Errorf("Stat after cancel: err = %v, want ErrNotFound", err)
			}
		})
	}

	// A context already done sends nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.rec.take()
	if _, err := e.s.Upload(ctx, testToken, Artifact{Name: "never", Body: bytes.NewReader([]byte("x"))}); !errors.Is(err, context.Canceled) {
		t.Errorf("Upload with done context: err = %v", err)
	}
	if reqs := e.rec.take(); len(reqs) != 0 {
		t.Errorf("done context sent %d requests", len(reqs))
	}
}

// TestUploadOverwrittenBeforeComplete has another writer create the key while
// the parts are going up: completing must then fail, not overwrite.
func TestUploadOverwrittenBeforeComplete(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testCtx(t)
	key := testToken.ObjectKey("race.bin")
	body := randomBytes(12*mib, 7)
	intruder := []byte("intruder")
	r := &cancelReader{r: bytes.NewReader(body), after: 6 * mib, cancel: func() {
		if _, err := e.raw.PutObject(ctx, e.srv.Bucket, key, bytes.NewReader(intruder), int64(len(intruder)), minio.PutObjectOptions{}); err != nil {
			t.Errorf("intruder put: %v", err)
		}
	}}
	_, err := e.s.Upload(ctx, testToken, Artifact{Name: "race.bin", Body: onlyReader{r}, SHA256: sum(body)})
	if !errors.Is(err, ErrExists) {
		t.Fatalf("Upload: err = %v, want ErrExists", err)
	}
	if got := e.get(t, key); !bytes.Equal(got, intruder) {
		t.Errorf("object overwritten by multipart completion (%d bytes)", len(got))
	}
	if ids := e.incomplete(t); len(ids) != 0 {
		t.Errorf("incomplete uploads left: %v", ids)
	}
}

func TestUploadMismatch(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testCtx(t)
	small := []byte("small body")
	big := randomBytes(11*mib, 8)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, small, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		a    Artifact
		want error
	}{
		{"small-wrong-sha", Artifact{Body: bytes.NewReader(small), SHA256: sum(big)}, ErrChecksumMismatch},
		{"big-wrong-sha", Artifact{Body: bytes.NewReader(big), SHA256: sum(small)}, ErrChecksumMismatch},
		{"small-too-short", Artifact{Body: bytes.NewReader(small), Size: 100}, ErrSizeMismatch},
		{"small-too-long", Artifact{Body: onlyReader{bytes.NewReader(small)}, Size: 3}, ErrSizeMismatch},
		{"small-too-long-with-sha", Artifact{Body: onlyReader{bytes.NewReader(small)}, Size: 3, SHA256: sum(small)}, ErrSizeMismatch},
		{"big-too-long", Artifact{Body: onlyReader{bytes.NewReader(big)}, Size: 6 * mib, SHA256: sum(big)}, ErrSizeMismatch},
		{"big-too-short", Artifact{Body: onlyReader{bytes.NewReader(big)}, Size: 20 * mib, SHA256: sum(big)}, ErrSizeMismatch},
		{"file-size", Artifact{Path: path, Size: 3}, ErrSizeMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.a
			a.Name = tc.name
			if _, err := e.s.Upload(ctx, testToken, a); !errors.Is(err, tc.want) {
				t.Fatalf("Upload: err = %v, want %v", err, tc.want)
			}
			if _, err := e.s.Stat(ctx, testToken.ObjectKey(tc.name)); !errors.Is(err, ErrNotFound) {
				t.Errorf("Stat: err = %v, want ErrNotFound", err)
			}
		})
	}
	if ids := e.incomplete(t); len(ids) != 0 {
		t.Errorf("incomplete uploads left: %v", ids)
	}
}

func TestListAndStat(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testCtx(t)
	g4 := testToken
	g4.Generation = 4
	g4.Owner = "agent-b/boot-2"
	for _, up := range []struct {
		tok  fencing.Token
		name string
	}{{testToken, "a.png"}, {testToken, "b.json"}, {g4, "a.png"}} {
		if _, err := e.s.Upload(ctx, up.tok, Artifact{Name: up.name, Body: strings.NewReader(up.name)}); err != nil {
			t.Fatalf("Upload: %v", err)
		}
	}
	if _, err := e.raw.PutObject(ctx, e.srv.Bucket, "jobs/job-1/g3/stray", strings.NewReader("s"), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}

	objs, err := e.s.List(ctx, "jobs/job-1/")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Key+" "+o.Token.String())
	}
	want := []string{
		"jobs/job-1/g3/a.png " + testToken.String(),
		"jobs/job-1/g3/b.json " + testToken.String(),
		"jobs/job-1/g3/stray " + fencing.Token{}.String(),
		"jobs/job-1/g4/a.png " + g4.String(),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("List =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	if _, err := e.s.Stat(ctx, "jobs/job-1/g3/stray"); !errors.Is(err, ErrUnstamped) {
		t.Errorf("Stat unstamped: err = %v, want ErrUnstamped", err)
	}
	if _, err := e.s.Stat(ctx, "jobs/nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat missing: err = %v, want ErrNotFound", err)
	}
	if err := e.s.CheckBucket(ctx); err != nil {
		t.Errorf("CheckBucket: %v", err)
	}
}

func TestCheckBucketMissing(t *testing.T) {
	e := newEnv(t, func(o *S3Options) { o.Bucket = "no-such-bucket-here" })
	if err := e.s.CheckBucket(testCtx(t)); !errors.Is(err, ErrNotFound) {
		t.Errorf("CheckBucket: err = %v, want ErrNotFound", err)
	}
}

// TestUploadMemoryBounded uploads a 64 MiB stream and checks that the upload
// allocated about Parallelism part buffers, not the body.
func TestUploadMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	e := newEnv(t, func(o *S3Options) { o.Parallelism = 2 })
	const size = 64 * mib
	h := sha256.New()
	if _, err := io.Copy(h, &patternReader{n: size}); err != nil {
		t.Fatal(err)
	}
	sha := hex.EncodeToString(h.Sum(nil))

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := e.s.Upload(testCtx(t), testToken, Artifact{Name: "big", Body: &patternReader{n: size}, SHA256: sha, Size: size})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("Upload: %v", err)
	}
	if res.Size != size {
		t.Fatalf("Result = %+v", res)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("uploading %d MiB allocated %.1f MiB", size/mib, float64(alloc)/mib)
	if limit := uint64(2*5*mib + 8*mib); alloc > limit {
		t.Errorf("allocated %d bytes, want at most %d (2 parts of 5 MiB plus overhead)", alloc, limit)
	}
}

// patternReader yields n bytes of a fixed pattern without holding them.
type patternReader struct{ n, off int }

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	k := min(len(b), p.n-p.off)
	for i := range k {
		b[i] = byte((p.off + i) * 7 / 3)
	}
	p.off += k
	return k, nil
}
