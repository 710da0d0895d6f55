package uploader

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestReplyLostRetryIsSuccess has the server store an object and the answer
// get lost on its way back (a proxy drops it and resets the connection). The
// retry meets If-None-Match: * with a 412; the object there holds the same
// SHA-256 and stamps, so the upload is a success, not a conflict.
func TestReplyLostRetryIsSuccess(t *testing.T) {
	srv := testenv.MinIO(t)
	raw := srv.Client(t)
	for _, tc := range []struct {
		name string
		size int
		lost string // the request whose answer is lost
	}{
		{"single-put", 1000, kindPut},
		{"multipart-complete", 11 * mib, kindComplete},
		{"multipart-initiate", 11 * mib, kindInitiate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMetrics(t)
			s3, f := faultyS3(t, srv, m, nil)
			f.inject(fault{kind: tc.lost, dropReply: true, times: 1})
			body := randomBytes(tc.size, 61)
			tok := testToken
			tok.JobID = "lost-" + tc.name
			res, err := s3.Upload(testCtx(t), tok, Artifact{Name: "shot.png", ContentType: "image/png", Body: bytes.NewReader(body)})
			if err != nil {
				t.Fatalf("Upload: %v", err)
			}
			if res.SHA256 != sum(body) || res.Size != int64(len(body)) || res.Key != tok.ObjectKey("shot.png") {
				t.Errorf("Result = %+v", res)
			}
			var kinds []string
			for _, ex := range f.exchanges() {
				if ex.kind != kindPart {
					kinds = append(kinds, fmt.Sprintf("%s:%d", ex.kind, ex.status))
				}
			}
			got := strings.Join(kinds, " ")
			var want string
			switch tc.lost {
			case kindPut:
				// The retry is refused; the object found is this one.
				want = "put:0 put:412 other:200"
				if !res.Existed {
					t.Errorf("Existed = false, want true")
				}
			case kindComplete:
				// The retried completion finds the upload gone (or the key
				// taken); the object found is this one.
				if !strings.HasPrefix(got, "initiate:200 complete:0 complete:4") || !res.Existed {
					t.Errorf("exchanges %q, Existed %v", got, res.Existed)
				}
			case kindInitiate:
				// The upload started by the lost request is aborted.
				if !res.Existed && strings.HasPrefix(got, "initiate:0 initiate:200") {
					break
				}
				t.Errorf("exchanges %q, Existed %v", got, res.Existed)
			}
			if want != "" && got != want {
				t.Errorf("exchanges %q, want %q", got, want)
			}
			if _, gotSHA := storedSHA256(t, raw, srv.Bucket, res.Key); gotSHA != sum(body) {
				t.Errorf("stored sha256 %s, want %s", gotSHA, sum(body))
			}
			if n := counter(m.retries.WithLabelValues(map[string]string{kindPut: "put", kindComplete: "complete", kindInitiate: "initiate"}[tc.lost])); n != 1 {
				t.Errorf("retries = %d, want 1", n)
			}
			outcome := outcomeExisted
			if tc.lost == kindInitiate {
				outcome = outcomeOK
			}
			if n := counter(m.uploads.WithLabelValues(modeDirect, outcome)); n != 1 {
				t.Errorf("uploads{%s} = %d, want 1", outcome, n)
			}
			if ids := incompleteUploads(t, raw, srv.Bucket); len(ids) != 0 {
				t.Errorf("incomplete uploads left: %v", ids)
			}
		})
	}
}

// TestUploadRetriesServerErrors answers 503 to some requests of each kind;
// they are retried with backoff and the upload succeeds.
func TestUploadRetriesServerErrors(t *testing.T) {
	srv := testenv.MinIO(t)
	m := newMetrics(t)
	s3, f := faultyS3(t, srv, m, nil)
	for _, k := range []string{kindInitiate, kindPart, kindComplete, kindPut} {
		f.inject(fault{kind: k, status: http.StatusServiceUnavailable, times: 2})
	}
	big := randomBytes(12*mib, 71)
	res, err := s3.Upload(testCtx(t), testToken, Artifact{Name: "big", Body: bytes.NewReader(big)})
	if err != nil || res.SHA256 != sum(big) || res.Existed {
		t.Fatalf("Upload big = %+v, %v", res, err)
	}
	res, err = s3.Upload(testCtx(t), testToken, Artifact{Name: "small", Body: strings.NewReader("s")})
	if err != nil || res.Existed {
		t.Fatalf("Upload small = %+v, %v", res, err)
	}
	for op, want := range map[string]int{"initiate": 2, "part": 2, "complete": 2, "put": 2} {
		if n := counter(m.retries.WithLabelValues(op)); n != want {
			t.Errorf("retries{%s} = %d, want %d", op, n, want)
		}
	}

	// Errors that retrying cannot mend are not retried.
	f.inject(fault{kind: kindPut, status: http.StatusForbidden, times: 1})
	_, err = s3.Upload(testCtx(t), testToken, Artifact{Name: "denied", Body: strings.NewReader("d")})
	if err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("Upload on 403: err = %v, want a failure that is not ErrUnavailable", err)
	}
	if n := counter(m.retries.WithLabelValues("put")); n != 2 {
		t.Errorf("a 403 was retried")
	}
}

func TestBackoff(t *testing.T) {
	p := RetryPolicy{Attempts: 10, Initial: 100 * time.Millisecond, Max: time.Second}
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 9: time.Second} {
		for range 100 {
			if d := p.backoff(n); d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, d, want/2, want)
			}
		}
	}
}

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{statusError{code: 503}, true},
		{statusError{code: 500}, true},
		{statusError{code: 429}, true},
		{statusError{code: 403}, false},
		{statusError{code: 412}, false},
		{fmt.Errorf("x: %w", ErrUnavailable), true},
		{errReplyLost, false},
		{fmt.Errorf("wrapped: %w", errors.Join(ErrExists)), false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
