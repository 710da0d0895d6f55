package uploader

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/internal/redact"
	"github.com/edgeagent/edgeagent/protocol"
)

// MaxPresignedSize is the largest artifact presigned mode stores: one PUT,
// the S3 limit of a single request.
const MaxPresignedSize = 5 << 30

// ErrAuthorization means the coordinator's answer to the upload verb is not
// usable for the artifact asked about: another key, another method, or
// headers that do not carry If-None-Match: * and the artifact's stamps.
var ErrAuthorization = errors.New("unusable upload authorisation")

// Authorize asks the coordinator to authorise one object and presign its PUT
// (the fenced upload verb). Its errors are those of the request: a stale
// token (fencing.ErrStale) or a refusal (protocol.ErrBadRequest,
// ErrForbidden, ErrUnknownJob) ends the upload, anything else is retried.
type Authorize func(ctx context.Context, req protocol.Upload) (protocol.UploadReply, error)

// Default of PresignedOptions.
const DefaultExpiryMargin = 30 * time.Second

// PresignedOptions configures a presigned-mode uploader; the zero value is
// ready to use.
type PresignedOptions struct {
	// Transport replaces the HTTP transport (TLS settings, proxies).
	Transport http.RoundTripper
	// Retry is the policy of each request (authorisation and PUT).
	Retry RetryPolicy
	// BytesPerSecond limits the bandwidth of all uploads together; 0 means
	// no limit.
	BytesPerSecond int64
	// TempDir holds bodies that cannot seek until they are sent; defaults to
	// os.TempDir().
	TempDir string
	// ExpiryMargin: an authorisation that expires within this margin is
	// asked for again before a PUT; default 30s.
	ExpiryMargin time.Duration
	// Stat, when set, reads an object back with its stamps (for example
	// through a HEAD the coordinator authorises). With it, a 412 counts as
	// success only when the stored object has the same SHA-256 and stamps;
	// without it, only when a PUT of this process with the same SHA-256
	// may have landed (its answer was lost), since the key is this
	// generation's alone.
	Stat func(ctx context.Context, key string) (Object, error)
	// Metrics, when set, counts what the uploader does.
	Metrics *Metrics
}

// Presigned uploads artifacts through URLs the coordinator presigns for
// each object (presigned mode): the agent holds no storage credentials. Each
// artifact goes up in one PUT of at most MaxPresignedSize, streamed from
// disk, with the headers of the authorisation sent verbatim (they are
// signed): If-None-Match: * and the x-amz-meta stamps with the SHA-256.
// Presigned URLs carry a signature: they are never logged, and errors show
// them without their query.
type Presigned struct {
	authorize Authorize
	opts      PresignedOptions
	client    *http.Client
	bw        *bandwidth

	mu sync.Mutex
	// unsure holds, by key, the SHA-256 of PUTs whose answer was lost.
	unsure map[string]string
}

var _ Uploader = (*Presigned)(nil)

// NewPresigned returns a presigned-mode uploader asking authorize for each
// object. It does not touch the network.
func NewPresigned(authorize Authorize, opts PresignedOptions) (*Presigned, error) {
	var problems []string
	if authorize == nil {
		problems = append(problems, "authorize is nil")
	}
	if opts.BytesPerSecond < 0 {
		problems = append(problems, fmt.Sprintf("bytes_per_second %d is negative", opts.BytesPerSecond))
	}
	if opts.ExpiryMargin < 0 {
		problems = append(problems, "expiry margin is negative")
	}
	problems = append(problems, opts.Retry.problems("retry")...)
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: presigned options: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	opts.Retry.setDefaults()
	if opts.ExpiryMargin == 0 {
		opts.ExpiryMargin = DefaultExpiryMargin
	}
	tr := opts.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = time.Minute
		tr = t
	}
	return &Presigned{
		authorize: authorize,
		opts:      opts,
		client: &http.Client{
			Transport: tr,
			// A presigned URL names the one place the object goes.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		bw:     newBandwidth(opts.BytesPerSecond),
		unsure: make(map[string]string),
	}, nil
}

// Upload asks the coordinator to authorise a, then PUTs it. See Presigned.
func (p *Presigned) Upload(ctx context.Context, tok fencing.Token, a Artifact) (res Result, err error) {
	if err := validate(tok, a); err != nil {
		return Result{}, err
	}
	key := tok.ObjectKey(a.Name)
	defer func() { p.opts.Metrics.finished(modePresigned, res, err) }()
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("upload %s: %w", key, ctxErr(ctx, err))
	}
	size := a.Size
	if a.Path != "" {
		if fi, err := os.Stat(a.Path); err == nil {
			size = fi.Size()
		}
	}
	if size > MaxPresignedSize {
		// Refused before the content is read.
		return Result{}, fmt.Errorf("upload %s: %d bytes, presigned mode stores at most %d: %w", key, size, int64(MaxPresignedSize), ErrTooLarge)
	}
	src, err := openSource(ctx, a, p.opts.TempDir, DefaultPartSize, true)
	if err != nil {
		return Result{}, fmt.Errorf("upload %s: %w", key, ctxErr(ctx, err))
	}
	defer src.close()
	if src.size > MaxPresignedSize {
		return Result{}, fmt.Errorf("upload %s: %d bytes, presigned mode stores at most %d: %w", key, src.size, int64(MaxPresignedSize), ErrTooLarge)
	}
	tr := newTracker(src.size, a.Progress, p.opts.Metrics)
	defer tr.finish()
	contentType := a.ContentType
	if contentType == "" {
		contentType = DefaultContentType
	}
	pu := &presignedUpload{p: p, ctx: ctx, tok: tok, name: a.Name, key: key, src: src, contentType: contentType, tr: tr}
	res, err = pu.run()
	if err != nil {
		return Result{}, fmt.Errorf("upload %s: %w", key, ctxErr(ctx, err))
	}
	return res, nil
}

type presignedUpload struct {
	p           *Presigned
	ctx         context.Context
	tok         fencing.Token
	name, key   string
	src         *source
	contentType string
	tr          *tracker
	grant       protocol.UploadReply
}

func (u *presignedUpload) run() (Result, error) {
	p := u.p
	if err := u.authorizeNow(); err != nil {
		return Result{}, err
	}
	var (
		etag       string
		taken      bool
		reauthOnce bool
	)
	err := p.opts.Retry.retry(u.ctx, p.opts.Metrics, "put", func(int) error {
		if time.Until(u.grant.Expires) < p.opts.ExpiryMargin {
			if err := u.authorizeNow(); err != nil {
				return err
			}
		}
		var err error
		etag, taken, err = u.put()
		if isExpired(err) && !reauthOnce {
			// The clock of the coordinator or the storage ran ahead:
			// authorise once more and try again.
			reauthOnce = true
			if err := u.authorizeNow(); err != nil {
				return err
			}
			etag, taken, err = u.put()
		}
		if err != nil && transient(err) {
			p.setUnsure(u.key, u.src.sha256)
		}
		return err
	})
	if err != nil {
		if !errors.Is(err, ErrUnavailable) {
			p.clearUnsure(u.key)
		}
		return Result{}, err
	}
	if taken {
		return u.existing()
	}
	p.clearUnsure(u.key)
	return Result{Key: u.key, Size: u.src.size, SHA256: u.src.sha256, ETag: etag}, nil
}

// authorizeNow asks for a fresh authorisation and checks it fits.
func (u *presignedUpload) authorizeNow() error {
	req := protocol.Upload{Token: u.tok, Name: u.name, Size: u.src.size, ContentType: u.contentType, SHA256: u.src.sha256}
	err := u.p.opts.Retry.retry(u.ctx, u.p.opts.Metrics, "authorize", func(int) error {
		g, err := u.p.authorize(u.ctx, req)
		if err != nil {
			if u.ctx.Err() == nil && authorizeTransient(err) {
				return transientError{err}
			}
			return err
		}
		u.grant = g
		return nil
	})
	if err != nil {
		return fmt.Errorf("authorise upload: %w", err)
	}
	return u.checkGrant()
}

// authorizeTransient reports whether an authorisation may succeed when
// asked again: anything but a stale token or a refusal.
func authorizeTransient(err error) bool {
	return !errors.Is(err, fencing.ErrStale) && !errors.Is(err, protocol.ErrBadRequest) &&
		!errors.Is(err, protocol.ErrForbidden) && !errors.Is(err, protocol.ErrUnknownJob) &&
		!errors.Is(err, ErrInvalid)
}

// checkGrant checks that the authorisation is for this object, with the
// headers that make the PUT conditional and stamped.
func (u *presignedUpload) checkGrant() error {
	g := u.grant
	var problems []string
	if g.Key != u.key {
		problems = append(problems, fmt.Sprintf("key %q, want %q", g.Key, u.key))
	}
	if !strings.EqualFold(g.Method, http.MethodPut) {
		problems = append(problems, fmt.Sprintf("method %q, want PUT", g.Method))
	}
	pu, err := url.Parse(g.URL)
	switch {
	case err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "":
		problems = append(problems, "url is not an http(s) URL")
	case !strings.HasSuffix(pu.Path, "/"+u.key):
		problems = append(problems, fmt.Sprintf("url path %q does not end in the key", pu.Path))
	}
	want := map[string]string{
		"if-none-match":                        "*",
		"x-amz-meta-" + fencing.MetaJobID:      u.tok.JobID,
		"x-amz-meta-" + fencing.MetaOwner:      u.tok.Owner,
		"x-amz-meta-" + fencing.MetaGeneration: strconv.FormatInt(u.tok.Generation, 10),
		"x-amz-meta-" + MetaSHA256:             u.src.sha256,
	}
	got := make(map[string]string, len(g.Headers))
	for k, v := range g.Headers {
		got[strings.ToLower(k)] = v
	}
	for _, k := range []string{"if-none-match", "x-amz-meta-" + fencing.MetaJobID, "x-amz-meta-" + fencing.MetaOwner, "x-amz-meta-" + fencing.MetaGeneration, "x-amz-meta-" + MetaSHA256} {
		if v, ok := got[k]; !ok || !strings.EqualFold(v, want[k]) {
			problems = append(problems, fmt.Sprintf("header %s is %q, want %q", k, v, want[k]))
		}
	}
	if v, ok := got["content-length"]; ok && v != strconv.FormatInt(u.src.size, 10) {
		problems = append(problems, fmt.Sprintf("content-length %s, want %d", v, u.src.size))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrAuthorization, strings.Join(problems, "; "))
	}
	return nil
}

// put sends the PUT once. taken reports a 412: the key holds an object.
func (u *presignedUpload) put() (etag string, taken bool, err error) {
	var body io.Reader = http.NoBody
	var sr *sendReader
	if u.src.size > 0 {
		sr = newSendReader(u.ctx, io.NewSectionReader(u.src.ra, 0, u.src.size), u.p.bw, u.tr, u.p.opts.Metrics)
		body = sr
	}
	req, err := http.NewRequestWithContext(u.ctx, http.MethodPut, u.grant.URL, body)
	if err != nil {
		return "", false, fmt.Errorf("%w: url: %s", ErrAuthorization, redact.Error(err))
	}
	req.ContentLength = u.src.size
	hasType := false
	for k, v := range u.grant.Headers {
		switch strings.ToLower(k) {
		case "content-length":
			continue // set from the content
		case "host":
			req.Host = v
			continue
		case "content-type":
			hasType = true
		}
		req.Header.Set(k, v)
	}
	if !hasType {
		req.Header.Set("Content-Type", u.contentType)
	}
	resp, err := u.p.client.Do(req)
	if err != nil {
		if sr != nil {
			sr.failed()
		}
		return "", false, fmt.Errorf("put object: %w", redact.Error(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return strings.Trim(resp.Header.Get("ETag"), `"`), false, nil
	}
	if sr != nil {
		sr.failed()
	}
	if resp.StatusCode == http.StatusPreconditionFailed {
		return "", true, nil
	}
	return "", false, fmt.Errorf("put object: %w", responseError(resp))
}

// existing decides about a 412. See PresignedOptions.Stat.
func (u *presignedUpload) existing() (Result, error) {
	p := u.p
	defer p.clearUnsure(u.key)
	if p.opts.Stat != nil {
		var obj Object
		err := p.opts.Retry.retry(u.ctx, p.opts.Metrics, "stat", func(int) error {
			var err error
			obj, err = p.opts.Stat(u.ctx, u.key)
			return err
		})
		if err != nil && !errors.Is(err, ErrUnstamped) {
			return Result{}, fmt.Errorf("stat existing object: %w", err)
		}
		if obj.SHA256 != u.src.sha256 || obj.Token != u.tok {
			return Result{}, fmt.Errorf("%w (stored sha256 %q, stamps %s)", ErrExists, obj.SHA256, obj.Token)
		}
		return Result{Key: u.key, Size: obj.Size, SHA256: obj.SHA256, ETag: obj.ETag, Existed: true}, nil
	}
	if p.wasUnsure(u.key, u.src.sha256) {
		return Result{Key: u.key, Size: u.src.size, SHA256: u.src.sha256, Existed: true}, nil
	}
	return Result{}, fmt.Errorf("%w (no PUT of this content may have landed)", ErrExists)
}

func (p *Presigned) setUnsure(key, sha string) {
	p.mu.Lock()
	p.unsure[key] = sha
	p.mu.Unlock()
}

func (p *Presigned) clearUnsure(key string) {
	p.mu.Lock()
	delete(p.unsure, key)
	p.mu.Unlock()
}

func (p *Presigned) wasUnsure(key, sha string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unsure[key] == sha
}

// transientError marks an error as worth retrying.
type transientError struct{ err error }

func (e transientError) Error() string { return e.err.Error() }
func (e transientError) Unwrap() error { return e.err }

// s3ErrorBody is the XML body of an S3 error response.
type s3ErrorBody struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// responseError describes a failed response by status and S3 error code,
// without the request's URL.
func responseError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e s3ErrorBody
	msg := ""
	if xml.Unmarshal(b, &e) == nil && e.Code != "" {
		msg = e.Code
		if e.Message != "" {
			msg += ": " + e.Message
		}
	}
	return statusError{code: resp.StatusCode, msg: msg}
}

// isExpired reports a refusal because the presigned URL expired.
func isExpired(err error) bool {
	var st statusError
	return errors.As(err, &st) && st.code == http.StatusForbidden && strings.Contains(strings.ToLower(st.msg), "expired")
}
