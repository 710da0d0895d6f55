package uploader

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
)

// RetryPolicy says how often and how patiently one request is tried again
// after a network failure or a server error (5xx, 408, 429): exponential
// backoff with jitter.
type RetryPolicy struct {
	// Attempts is the number of tries, the first included; default 5.
	// 1 means no retry.
	Attempts int
	// Initial is the backoff before the first retry; default 200ms. Each
	// later one doubles, up to Max (default 5s). The wait is drawn at
	// random from the upper half of the backoff, so that uploads failing
	// together do not come back together.
	Initial time.Duration
	Max     time.Duration
}

// Default retry policy of one request.
const (
	DefaultRetryAttempts = 5
	DefaultRetryInitial  = 200 * time.Millisecond
	DefaultRetryMax      = 5 * time.Second
)

func (p *RetryPolicy) setDefaults() {
	if p.Attempts == 0 {
		p.Attempts = DefaultRetryAttempts
	}
	if p.Initial == 0 {
		p.Initial = DefaultRetryInitial
	}
	if p.Max == 0 {
		p.Max = DefaultRetryMax
	}
	p.Max = max(p.Max, p.Initial)
}

func (p RetryPolicy) problems(field string) []string {
	var out []string
	if p.Attempts < 0 {
		out = append(out, fmt.Sprintf("%s.attempts %d is negative", field, p.Attempts))
	}
	if p.Initial < 0 || p.Max < 0 {
		out = append(out, fmt.Sprintf("%s: backoff durations must not be negative", field))
	}
	return out
}

// backoff returns the wait before retry number n (1-based): a random
// duration in the upper half of min(Max, Initial·2ⁿ⁻¹).
func (p RetryPolicy) backoff(n int) time.Duration {
	d := p.Initial
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	if d <= 0 {
		return 0
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retry runs f until it succeeds, fails for good, runs out of attempts or
// ctx is done. A failure that outlasts the attempts is wrapped in
// ErrUnavailable. Each retry is counted under op.
func (p RetryPolicy) retry(ctx context.Context, m *Metrics, op string, f func(attempt int) error) error {
	for attempt := 1; ; attempt++ {
		err := f(attempt)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !transient(err) {
			return err
		}
		if attempt >= p.Attempts {
			return fmt.Errorf("%w after %d attempts: %w", ErrUnavailable, attempt, err)
		}
		m.retry(op)
		if err := sleep(ctx, p.backoff(attempt)); err != nil {
			return err
		}
	}
}

// transient reports whether a failed request may succeed when tried again:
// network failures, server errors (5xx), 408, 429 and the S3 codes that
// mean the same.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var te transientError
	if errors.Is(err, ErrUnavailable) || errors.As(err, &te) {
		return true
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) && (resp.StatusCode != 0 || resp.Code != "") {
		switch resp.Code {
		case "RequestTimeout", "SlowDown", "SlowDownWrite", "SlowDownRead", "InternalError",
			"ServiceUnavailable", "XMinioServerNotInitialized", "XMinioReadQuorum", "XMinioWriteQuorum":
			return true
		}
		return retryableStatus(resp.StatusCode)
	}
	var st statusError
	if errors.As(err, &st) {
		return retryableStatus(st.code)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		var unknownCA x509.UnknownAuthorityError
		var invalidCert x509.CertificateInvalidError
		var hostname x509.HostnameError
		if errors.As(ue.Err, &unknownCA) || errors.As(ue.Err, &invalidCert) || errors.As(ue.Err, &hostname) {
			return false
		}
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func retryableStatus(code int) bool {
	return code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
}

// statusError is an HTTP response outside 2xx from a presigned request.
type statusError struct {
	code int
	msg  string
}

func (e statusError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("http status %d", e.code)
	}
	return fmt.Sprintf("http status %d: %s", e.code, e.msg)
}
