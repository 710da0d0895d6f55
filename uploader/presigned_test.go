package uploader

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// coordinator plays the coordinator's side of the upload verb: it presigns
// a PUT of the object with If-None-Match: *, the stamps, the SHA-256 and the
// content type signed in, as the reference coordinator does.
type coordinator struct {
	srv     testenv.MinIOServer
	c       *minio.Client
	expires time.Duration
	calls   atomic.Int32
	// tamper, when set, changes a reply before it is returned.
	tamper func(*protocol.UploadReply)
	// refuse, when set, is returned instead of a reply (once per call).
	refuse func(call int) error
}

func newCoordinator(t testing.TB, srv testenv.MinIOServer) *coordinator {
	return &coordinator{srv: srv, c: srv.Client(t), expires: 10 * time.Minute}
}

func (c *coordinator) authorize(ctx context.Context, req protocol.Upload) (protocol.UploadReply, error) {
	call := int(c.calls.Add(1))
	if c.refuse != nil {
		if err := c.refuse(call); err != nil {
			return protocol.UploadReply{}, err
		}
	}
	key := req.Token.ObjectKey(req.Name)
	headers := map[string]string{
		"If-None-Match":         "*",
		"X-Amz-Meta-Job-Id":     req.Token.JobID,
		"X-Amz-Meta-Owner":      req.Token.Owner,
		"X-Amz-Meta-Generation": strconv.FormatInt(req.Token.Generation, 10),
		"X-Amz-Meta-Sha256":     req.SHA256,
		"Content-Type":          req.ContentType,
	}
	h := make(http.Header)
	for k, v := range headers {
		h.Set(k, v)
	}
	u, err := c.c.PresignHeader(ctx, http.MethodPut, c.srv.Bucket, key, c.expires, nil, h)
	if err != nil {
		return protocol.UploadReply{}, err
	}
	rep := protocol.UploadReply{Key: key, URL: u.String(), Method: http.MethodPut, Headers: headers, Expires: time.Now().Add(c.expires)}
	if c.tamper != nil {
		c.tamper(&rep)
	}
	return rep, nil
}

func newPresigned(t testing.TB, co *coordinator, m *Metrics, tweak func(*PresignedOptions)) (*Presigned, *faulty) {
	t.Helper()
	f := &faulty{next: http.DefaultTransport.(*http.Transport).Clone()}
	opts := PresignedOptions{
		Transport: f,
		TempDir:   t.TempDir(),
		Retry:     RetryPolicy{Attempts: 4, Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond},
		Metrics:   m,
	}
	if tweak != nil {
		tweak(&opts)
	}
	p, err := NewPresigned(co.authorize, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, f
}

func TestPresignedUpload(t *testing.T) {
	srv := testenv.MinIO(t)
	raw := srv.Client(t)
	co := newCoordinator(t, srv)
	m := newMetrics(t)
	p, f := newPresigned(t, co, m, nil)
	ctx := testCtx(t)

	small := []byte(`{"screen":"home"}`)
	path, bigSHA := writeRandomFile(t, 20*mib, 81)
	for _, a := range []Artifact{
		{Name: "ui.json", ContentType: "application/json", Body: bytes.NewReader(small)},
		{Name: "rec.mp4", ContentType: "video/mp4", Path: path, SHA256: bigSHA},
		{Name: "stream.bin", Body: onlyReader{bytes.NewReader(small)}, SHA256: sum(small)},
		{Name: "empty", Body: bytes.NewReader(nil)},
	} {
		res, err := p.Upload(ctx, testToken, a)
		if err != nil {
			t.Fatalf("Upload %s: %v", a.Name, err)
		}
		info, err := raw.StatObject(ctx, srv.Bucket, res.Key, minio.StatObjectOptions{})
		if err != nil {
			t.Fatalf("stat %s: %v", res.Key, err)
		}
		wantType := a.ContentType
		if wantType == "" {
			wantType = DefaultContentType
		}
		for h, want := range map[string]string{
			"X-Amz-Meta-Job-Id":     testToken.JobID,
			"X-Amz-Meta-Owner":      testToken.Owner,
			"X-Amz-Meta-Generation": "3",
			"X-Amz-Meta-Sha256":     res.SHA256,
			"Content-Type":          wantType,
		} {
			if got := info.Metadata.Get(h); got != want {
				t.Errorf("%s: %s = %q, want %q", a.Name, h, got, want)
			}
		}
		if n, got := storedSHA256(t, raw, srv.Bucket, res.Key); got != res.SHA256 || n != res.Size {
			t.Errorf("%s: stored %d bytes with sha256 %s; Result %+v", a.Name, n, got, res)
		}
		if res.ETag == "" || res.Existed {
			t.Errorf("%s: Result = %+v", a.Name, res)
		}
	}
	for _, ex := range f.exchanges() {
		if ex.inm != "*" {
			t.Errorf("a PUT went without If-None-Match: *")
		}
	}
	if n := co.calls.Load(); n != 4 {
		t.Errorf("authorisations = %d, want 4", n)
	}

	// Other content at a taken key: refused, original kept.
	_, err := p.Upload(ctx, testToken, Artifact{Name: "ui.json", Body: strings.NewReader("other")})
	if !errors.Is(err, ErrExists) {
		t.Errorf("Upload over a taken key: err = %v, want ErrExists", err)
	}
	if _, got := storedSHA256(t, raw, srv.Bucket, testToken.ObjectKey("ui.json")); got != sum(small) {
		t.Errorf("original overwritten")
	}
	if n := counter(m.uploads.WithLabelValues(modePresigned, outcomeOK)); n != 4 {
		t.Errorf("uploads{presigned,ok} = %d, want 4", n)
	}
}

// TestPresignedReplyLost is the "first PUT succeeded, reply lost" case in
// presigned mode, decided by the SHA-256 of the PUT whose answer was lost
// and, with a Stat, by the stored object's stamps.
func TestPresignedReplyLost(t *testing.T) {
	srv := testenv.MinIO(t)
	s3, _ := faultyS3(t, srv, nil, nil)
	for _, withStat := range []bool{false, true} {
		t.Run("stat="+strconv.FormatBool(withStat), func(t *testing.T) {
			co := newCoordinator(t, srv)
			m := newMetrics(t)
			p, f := newPresigned(t, co, m, func(o *PresignedOptions) {
				if withStat {
					o.Stat = s3.Stat
				}
			})
			f.inject(fault{kind: kindPut, dropReply: true, times: 1})
			tok := testToken
			tok.JobID = "lost-" + strconv.FormatBool(withStat)
			body := randomBytes(3*mib, 91)
			res, err := p.Upload(testCtx(t), tok, Artifact{Name: "shot.png", ContentType: "image/png", Body: bytes.NewReader(body)})
			if err != nil {
				t.Fatalf("Upload: %v", err)
			}
			if !res.Existed || res.SHA256 != sum(body) || res.Key != tok.ObjectKey("shot.png") {
				t.Errorf("Result = %+v", res)
			}
			if got := [2]int{f.count(kindPut, 0), f.count(kindPut, http.StatusPreconditionFailed)}; got != [2]int{1, 1} {
				t.Errorf("PUTs lost, refused = %v, want one each", got)
			}
			if n := counter(m.uploads.WithLabelValues(modePresigned, outcomeExisted)); n != 1 {
				t.Errorf("uploads{existed} = %d", n)
			}
			// Another content at the same key afterwards is a conflict.
			if _, err := p.Upload(testCtx(t), tok, Artifact{Name: "shot.png", Body: strings.NewReader("x")}); !errors.Is(err, ErrExists) {
				t.Errorf("other content: err = %v, want ErrExists", err)
			}
		})
	}
}

func TestPresignedAuthorization(t *testing.T) {
	srv := testenv.MinIO(t)
	body := []byte("x")
	for _, tc := range []struct {
		name   string
		tamper func(*protocol.UploadReply)
		refuse func(call int) error
		want   error
		calls  int32
	}{
		{name: "other-key", tamper: func(r *protocol.UploadReply) { r.Key = "jobs/other/g1/x" }, want: ErrAuthorization, calls: 1},
		{name: "no-if-none-match", tamper: func(r *protocol.UploadReply) { delete(r.Headers, "If-None-Match") }, want: ErrAuthorization, calls: 1},
		{name: "other-owner", tamper: func(r *protocol.UploadReply) { r.Headers["X-Amz-Meta-Owner"] = "agent-b/boot-1" }, want: ErrAuthorization, calls: 1},
		{name: "other-sha", tamper: func(r *protocol.UploadReply) { r.Headers["X-Amz-Meta-Sha256"] = sum([]byte("y")) }, want: ErrAuthorization, calls: 1},
		{name: "post", tamper: func(r *protocol.UploadReply) { r.Method = http.MethodPost }, want: ErrAuthorization, calls: 1},
		{name: "stale", refuse: func(int) error { return fencing.ErrStale }, want: fencing.ErrStale, calls: 1},
		{name: "forbidden", refuse: func(int) error { return protocol.ErrForbidden }, want: protocol.ErrForbidden, calls: 1},
		{name: "unavailable-then-ok", refuse: func(call int) error {
			if call < 3 {
				return protocol.ErrUnavailable
			}
			return nil
		}, calls: 3},
		{name: "unavailable", refuse: func(int) error { return protocol.ErrUnavailable }, want: ErrUnavailable, calls: 4},
		{name: "signed-header-changed", tamper: func(r *protocol.UploadReply) { r.Headers["Content-Type"] = "image/jpeg" }, want: errSignature, calls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			co := newCoordinator(t, srv)
			co.tamper, co.refuse = tc.tamper, tc.refuse
			p, f := newPresigned(t, co, nil, nil)
			tok := testToken
			tok.JobID = "auth-" + tc.name
			_, err := p.Upload(testCtx(t), tok, Artifact{Name: "x", ContentType: "image/png", Body: bytes.NewReader(body)})
			switch {
			case tc.want == nil && err != nil:
				t.Errorf("Upload: %v", err)
			case tc.want == errSignature:
				// The storage checks the signed headers: a changed one is
				// refused, and not retried.
				if err == nil || !strings.Contains(err.Error(), "403") || f.count(kindPut, http.StatusForbidden) != 1 {
					t.Errorf("Upload: err = %v, want one 403", err)
				}
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("Upload: err = %v, want %v", err, tc.want)
			}
			if n := co.calls.Load(); n != tc.calls {
				t.Errorf("authorisations = %d, want %d", n, tc.calls)
			}
			if tc.want == ErrAuthorization && len(f.exchanges()) != 0 {
				t.Errorf("a PUT was sent with an unusable authorisation")
			}
		})
	}
}

// errSignature marks the case where the storage refuses the signature.
var errSignature = errors.New("signature refused")

// TestPresignedExpiry asks again for an authorisation about to expire.
func TestPresignedExpiry(t *testing.T) {
	srv := testenv.MinIO(t)
	co := newCoordinator(t, srv)
	co.expires = 20 * time.Second // within the 30s margin: asked for again
	p, _ := newPresigned(t, co, nil, nil)
	if _, err := p.Upload(testCtx(t), testToken, Artifact{Name: "x", Body: strings.NewReader("x")}); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	if n := co.calls.Load(); n != 2 {
		t.Errorf("authorisations = %d, want 2", n)
	}
}

func TestPresignedLimits(t *testing.T) {
	srv := testenv.MinIO(t)
	co := newCoordinator(t, srv)
	p, f := newPresigned(t, co, nil, nil)

	// Larger than one PUT may be: refused before anything is read or sent.
	big := filepath.Join(t.TempDir(), "huge")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxPresignedSize+1); err != nil {
		t.Skipf("cannot make a sparse file: %v", err)
	}
	if _, err := p.Upload(testCtx(t), testToken, Artifact{Name: "huge", Path: big}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Upload of 5 GiB + 1: err = %v, want ErrTooLarge", err)
	}
	if co.calls.Load() != 0 || len(f.exchanges()) != 0 {
		t.Errorf("a too large artifact was authorised or sent")
	}

	// A storage that cannot be reached: the error names it without the
	// URL's signature.
	co2 := newCoordinator(t, srv)
	co2.tamper = func(r *protocol.UploadReply) { r.URL = strings.Replace(r.URL, srv.Endpoint, "127.0.0.1:1", 1) }
	p2, _ := newPresigned(t, co2, nil, nil)
	_, err := p2.Upload(testCtx(t), testToken, Artifact{Name: "x", Body: strings.NewReader("x")})
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("Upload to a closed port: err = %v, want ErrUnavailable", err)
	}
	if err != nil && (strings.Contains(err.Error(), "Signature") || strings.Contains(err.Error(), "X-Amz-Credential")) {
		t.Errorf("error shows the presigned URL's query: %v", err)
	}
}

// TestSpoolPresigned runs the spool over the presigned uploader.
func TestSpoolPresigned(t *testing.T) {
	srv := testenv.MinIO(t)
	co := newCoordinator(t, srv)
	m := newMetrics(t)
	p, _ := newPresigned(t, co, m, nil)
	spool := newSpool(t, p, m, nil)
	path, sha := writeRandomFile(t, 7*mib, 101)
	res, err := spool.Put(testCtx(t), testToken, Artifact{Name: "rec.mp4", ContentType: "video/mp4", Path: path})
	if err != nil || res.SHA256 != sha {
		t.Fatalf("Put = %+v, %v", res, err)
	}
	if _, got := storedSHA256(t, srv.Client(t), srv.Bucket, res.Key); got != sha {
		t.Errorf("stored sha256 %s, want %s", got, sha)
	}
	if files := spoolFiles(t, spool.Dir()); len(files) != 0 {
		t.Errorf("spool files left: %v", files)
	}
}
