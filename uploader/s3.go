package uploader

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// Part sizes and counts S3 allows for multipart uploads.
const (
	MinPartSize     = 5 << 20
	DefaultPartSize = 16 << 20
	maxPartSize     = 5 << 30
	maxParts        = 10000

	// DefaultParallelism is the number of parts in flight by default.
	DefaultParallelism = 4

	// abortTimeout bounds the cleanup of a failed multipart upload, which
	// runs even after the caller's context is done.
	abortTimeout = 30 * time.Second
)

// S3Options configures a direct-mode uploader talking to an S3-compatible
// endpoint with its own credentials.
type S3Options struct {
	// Endpoint is host:port, without scheme.
	Endpoint string
	// Secure selects HTTPS.
	Secure bool
	// Region defaults to DefaultRegion, which spares a bucket-location
	// lookup (and the permission it needs).
	Region    string
	Bucket    string
	AccessKey string
	SecretKey string
	// PartSize is the size of one multipart part; defaults to
	// DefaultPartSize, at least MinPartSize. Content up to one part goes up
	// in a single PUT. Parts of a file or a seekable body are read from it
	// as they are sent; a stream holds at most Parallelism × PartSize bytes
	// in memory (parts grow only for known sizes beyond 10,000 parts).
	PartSize int64
	// Parallelism is the number of parts uploaded at once; defaults to
	// DefaultParallelism.
	Parallelism int
	// TempDir holds spool files for bodies that can neither seek nor come
	// with a SHA256; defaults to os.TempDir().
	TempDir string
	// Transport replaces the HTTP transport (TLS settings, proxies).
	Transport http.RoundTripper
	// Retry is the policy of each request; see RetryPolicy for defaults.
	Retry RetryPolicy
	// BytesPerSecond limits the bandwidth of all uploads of this uploader
	// together; 0 means no limit.
	BytesPerSecond int64
	// Metrics, when set, counts what the uploader does.
	Metrics *Metrics
}

// DefaultRegion is the region direct uploads sign for when none is
// configured: MinIO's default.
const DefaultRegion = "us-east-1"

func (o *S3Options) setDefaults() {
	if o.Region == "" {
		o.Region = DefaultRegion
	}
	if o.PartSize == 0 {
		o.PartSize = DefaultPartSize
	}
	if o.Parallelism == 0 {
		o.Parallelism = DefaultParallelism
	}
	o.Retry.setDefaults()
}

// Validate reports every problem with the options.
func (o S3Options) Validate() error {
	var problems []string
	if o.Endpoint == "" {
		problems = append(problems, "endpoint is empty")
	} else if strings.Contains(o.Endpoint, "://") || strings.Contains(o.Endpoint, "/") {
		problems = append(problems, fmt.Sprintf("endpoint %q: want host:port without scheme or path", o.Endpoint))
	}
	if o.Bucket == "" {
		problems = append(problems, "bucket is empty")
	}
	if o.AccessKey == "" {
		problems = append(problems, "access_key is empty")
	}
	if o.SecretKey == "" {
		problems = append(problems, "secret_key is empty")
	}
	if o.PartSize != 0 && (o.PartSize < MinPartSize || o.PartSize > maxPartSize) {
		problems = append(problems, fmt.Sprintf("part_size %d: want %d to %d bytes", o.PartSize, int64(MinPartSize), int64(maxPartSize)))
	}
	if o.Parallelism < 0 {
		problems = append(problems, fmt.Sprintf("parallelism %d is negative", o.Parallelism))
	}
	if o.BytesPerSecond < 0 {
		problems = append(problems, fmt.Sprintf("bytes_per_second %d is negative", o.BytesPerSecond))
	}
	problems = append(problems, o.Retry.problems("retry")...)
	if len(problems) > 0 {
		return fmt.Errorf("%w: s3 options: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	return nil
}

// S3 uploads artifacts straight to a bucket with minio-go (direct mode).
type S3 struct {
	opts S3Options
	core *minio.Core
	bw   *bandwidth
}

var (
	_ Uploader  = (*S3)(nil)
	_ Resumable = (*S3)(nil)
	_ Lister    = (*S3)(nil)
)

// NewS3 returns an uploader for opts. It does not touch the network.
func NewS3(opts S3Options) (*S3, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.setDefaults()
	core, err := minio.NewCore(opts.Endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(opts.AccessKey, opts.SecretKey, ""),
		Secure:    opts.Secure,
		Region:    opts.Region,
		Transport: opts.Transport,
		// Requests are retried here, with the policy of opts.Retry, so
		// that every retry is seen and counted.
		MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("create s3 client: %w", err)
	}
	return &S3{opts: opts, core: core, bw: newBandwidth(opts.BytesPerSecond)}, nil
}

// Bucket returns the bucket the uploader writes to.
func (s *S3) Bucket() string { return s.opts.Bucket }

// CheckBucket reports whether the bucket exists and the credentials reach
// it, with one request signed as every upload is. A missing bucket is
// ErrNotFound; ErrorCode tells refused credentials from the rest.
func (s *S3) CheckBucket(ctx context.Context) error {
	ok, err := s.core.BucketExists(ctx, s.opts.Bucket)
	if err != nil {
		return fmt.Errorf("check bucket %s: %w", s.opts.Bucket, err)
	}
	if !ok {
		return fmt.Errorf("check bucket %s: %w", s.opts.Bucket, ErrNotFound)
	}
	return nil
}

// ErrCheckLeftover marks a CheckWrite whose write worked but whose test
// object could not be removed.
var ErrCheckLeftover = errors.New("test object left behind")

// CheckWrite stores a small object at key as artifacts are stored (a PUT
// with If-None-Match: *) and removes it again. When only the removal
// fails, the error wraps ErrCheckLeftover.
func (s *S3) CheckWrite(ctx context.Context, key string) error {
	body := []byte("edgeagent write check\n")
	opts := minio.PutObjectOptions{ContentType: "text/plain"}
	opts.SetMatchETagExcept("*")
	if _, err := s.core.Client.PutObject(ctx, s.opts.Bucket, key, bytes.NewReader(body), int64(len(body)), opts); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	if err := s.core.RemoveObject(ctx, s.opts.Bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("remove %s: %w: %w", key, ErrCheckLeftover, err)
	}
	return nil
}

// ErrorCode returns the S3 error code err carries ("AccessDenied",
// "SignatureDoesNotMatch", ...), or "" when it carries none.
func ErrorCode(err error) string {
	r, _ := errResponse(err)
	return r.Code
}

// IsCredentialsError reports whether the storage refused the credentials
// (unknown key, wrong secret, or a key without the permission).
func IsCredentialsError(err error) bool {
	switch ErrorCode(err) {
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied":
		return true
	}
	return false
}

// Upload writes a under tok.ObjectKey(a.Name) with the token's stamps and
// If-None-Match: *. See the package documentation for what happens when the
// key is taken. A multipart upload that fails is aborted.
func (s *S3) Upload(ctx context.Context, tok fencing.Token, a Artifact) (Result, error) {
	return s.upload(ctx, tok, a, nil, nil)
}

// UploadResumable implements Resumable.
func (s *S3) UploadResumable(ctx context.Context, tok fencing.Token, a Artifact, mp *Multipart, save func(Multipart) error) (Result, error) {
	if mp == nil {
		mp = &Multipart{}
	}
	return s.upload(ctx, tok, a, mp, save)
}

func (s *S3) upload(ctx context.Context, tok fencing.Token, a Artifact, mp *Multipart, save func(Multipart) error) (res Result, err error) {
	if err := validate(tok, a); err != nil {
		return Result{}, err
	}
	key := tok.ObjectKey(a.Name)
	defer func() { s.opts.Metrics.finished(modeDirect, res, err) }()
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("upload %s: %w", key, ctxErr(ctx, err))
	}
	src, err := openSource(ctx, a, s.opts.TempDir, s.opts.PartSize, false)
	if err != nil {
		return Result{}, fmt.Errorf("upload %s: %w", key, ctxErr(ctx, err))
	}
	defer src.close()
	tr := newTracker(src.size, a.Progress, s.opts.Metrics)
	defer tr.finish()

	contentType := a.ContentType
	if contentType == "" {
		contentType = DefaultContentType
	}
	u := &upload{s: s, ctx: ctx, tok: tok, key: key, src: src, contentType: contentType, mp: mp, save: save, tr: tr}
	res, err = u.run()
	if err != nil {
		return Result{}, fmt.Errorf("upload %s: %w", key, ctxErr(ctx, err))
	}
	return res, nil
}

// DefaultContentType is the content type of an artifact that declares none.
const DefaultContentType = "application/octet-stream"

func validate(tok fencing.Token, a Artifact) error {
	var problems []string
	if err := tok.Validate(); err != nil {
		problems = append(problems, err.Error())
	} else if err := protocol.CheckJobID(tok.JobID); err != nil {
		problems = append(problems, "token: "+err.Error())
	}
	if err := protocol.ValidateArtifactName(a.Name); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) == 0 && !inPrefix(tok, a.Name) {
		problems = append(problems, fmt.Sprintf("object key %q is not under jobs/<job_id>/g<generation>/", tok.ObjectKey(a.Name)))
	}
	if (a.Body == nil) == (a.Path == "") {
		problems = append(problems, "want exactly one of body and path")
	}
	if a.SHA256 != "" {
		if b, err := hex.DecodeString(a.SHA256); err != nil || len(b) != sha256.Size {
			problems = append(problems, fmt.Sprintf("sha256 %q is not 64 hex digits", a.SHA256))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	return nil
}

// inPrefix reports whether the key of name is one element below the token's
// own prefix jobs/<job_id>/g<generation>/ (docs/protocol.md section 7.1):
// the job id and name rules make it so; this is the last check before a key
// is written.
func inPrefix(tok fencing.Token, name string) bool {
	key := tok.ObjectKey(name)
	prefix := tok.ObjectKey("")
	rest, ok := strings.CutPrefix(key, prefix)
	return ok && strings.Count(prefix, "/") == 3 && rest != "" && rest != "." && rest != ".." &&
		!strings.Contains(rest, "/") && path.Clean(key) == key
}

// ctxErr prefers the context's error, with its cause, once the context is
// done: a failed request is then the consequence of the stop, not its reason.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, ctx.Err()) {
		return fmt.Errorf("%w: %w", ctx.Err(), cause)
	}
	return ctx.Err()
}

// upload is the state of one upload attempt.
type upload struct {
	s           *S3
	ctx         context.Context
	tok         fencing.Token
	key         string
	src         *source
	contentType string
	// mp is the resumable multipart state, nil for a plain Upload.
	mp   *Multipart
	save func(Multipart) error
	tr   *tracker
	// hr reads and hashes a stream.
	hr *hashReader
}

func (u *upload) putOptions() minio.PutObjectOptions {
	md := u.tok.Metadata()
	md[MetaSHA256] = u.src.sha256
	opts := minio.PutObjectOptions{
		UserMetadata: md,
		ContentType:  u.contentType,
		// A single PUT sends the content's SHA-256 as X-Amz-Content-Sha256,
		// so the server verifies it; parts carry their own (see multipart).
		DisableContentSha256: true,
	}
	opts.SetMatchETagExcept("*")
	return opts
}

// conditionalOptions carries only If-None-Match: *, for the request that
// completes a multipart upload.
func conditionalOptions() minio.PutObjectOptions {
	var opts minio.PutObjectOptions
	opts.SetMatchETagExcept("*")
	return opts
}

// partSize returns the part size for the source: the configured one, raised
// for known sizes that would need more than maxParts parts.
func (u *upload) partSize() int64 {
	ps := u.s.opts.PartSize
	if n := u.src.size; n > 0 {
		if need := (n + maxParts - 1) / maxParts; need > ps {
			const mib = 1 << 20
			ps = (need + mib - 1) / mib * mib
		}
	}
	return ps
}

func (u *upload) retry(op string, f func() error) error {
	return u.s.opts.Retry.retry(u.ctx, u.s.opts.Metrics, op, func(int) error { return f() })
}

func (u *upload) run() (Result, error) {
	partSize := u.partSize()
	if ra := u.src.ra; ra != nil {
		size := u.src.size
		if size <= partSize {
			return u.single(func() io.Reader { return io.NewSectionReader(ra, 0, size) }, size)
		}
		return u.multipart(partSize, u.partsAt(ra, size, partSize), nil)
	}

	// A stream: read the first part to tell a single PUT from a multipart
	// upload, and check the content against its declared checksum as it is
	// read.
	hr := newHashReader(u.ctx, u.src.r)
	u.hr = hr
	// A known size gets its first buffer in one allocation; an unknown one
	// grows its buffer as the body turns out longer.
	first, capacity := partSize, initialCap(partSize)
	if n := u.src.size; n >= 0 {
		first = min(n, partSize)
		capacity = first
	}
	buf, eof, err := readPart(hr, make([]byte, 0, capacity), first)
	if err != nil {
		return Result{}, fmt.Errorf("read body: %w", err)
	}
	if !eof && u.src.size >= 0 && int64(len(buf)) == u.src.size {
		// Everything declared was read; the body must end here.
		if eof, err = atEOF(hr); err != nil {
			return Result{}, fmt.Errorf("read body: %w", err)
		}
		if !eof {
			return Result{}, fmt.Errorf("body longer than %d bytes: %w", u.src.size, ErrSizeMismatch)
		}
	}
	if eof {
		if err := u.verify(hr); err != nil {
			return Result{}, err
		}
		return u.single(func() io.Reader { return bytes.NewReader(buf) }, int64(len(buf)))
	}
	// Streams cannot be resumed: their parts are gone once sent.
	u.mp = nil
	return u.multipart(partSize, u.partsStream(hr, buf, partSize), func() error { return u.verify(hr) })
}

// verify checks what was read of a stream against the declared size and
// checksum.
func (u *upload) verify(hr *hashReader) error {
	if u.src.size >= 0 && hr.n != u.src.size {
		return fmt.Errorf("read %d bytes, want %d: %w", hr.n, u.src.size, ErrSizeMismatch)
	}
	if got := hr.sum(); got != u.src.sha256 {
		return fmt.Errorf("content hashes to %s, want %s: %w", got, u.src.sha256, ErrChecksumMismatch)
	}
	return nil
}

// single stores content of size bytes in one PUT; open returns a fresh
// reader of it for each attempt.
func (u *upload) single(open func() io.Reader, size int64) (Result, error) {
	var info minio.UploadInfo
	err := u.retry("put", func() error {
		body := newSendReader(u.ctx, open(), u.s.bw, u.tr, u.s.opts.Metrics)
		var err error
		info, err = u.s.core.PutObject(u.ctx, u.s.opts.Bucket, u.key, body, size, "", u.src.sha256, u.putOptions())
		if err != nil {
			body.failed()
		}
		return err
	})
	if err != nil {
		switch {
		case isPreconditionFailed(err):
			// Taken, possibly by an earlier attempt of this very PUT whose
			// answer was lost.
			return u.existing()
		case isSHA256Mismatch(err):
			return Result{}, fmt.Errorf("put object: content changed while sent: %w", ErrChecksumMismatch)
		}
		return Result{}, fmt.Errorf("put object: %w", err)
	}
	return Result{Key: u.key, Size: size, SHA256: u.src.sha256, ETag: info.ETag}, nil
}

// existing decides about a key that turned out to be taken: the same content
// under the same stamps is this upload, landed by an earlier attempt.
func (u *upload) existing() (Result, error) {
	var obj Object
	err := u.retry("stat", func() error {
		var err error
		obj, err = u.s.Stat(u.ctx, u.key)
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

// errResponse returns the S3 error response err carries, if any.
func errResponse(err error) (minio.ErrorResponse, bool) {
	var r minio.ErrorResponse
	if errors.As(err, &r) {
		return r, true
	}
	return r, false
}

func isPreconditionFailed(err error) bool {
	r, ok := errResponse(err)
	return ok && (r.StatusCode == http.StatusPreconditionFailed || r.Code == "PreconditionFailed")
}

func isNotFound(err error) bool {
	r, ok := errResponse(err)
	return ok && (r.StatusCode == http.StatusNotFound || r.Code == minio.NoSuchKey)
}

func isNoSuchUpload(err error) bool {
	r, ok := errResponse(err)
	return ok && r.Code == "NoSuchUpload"
}

func isSHA256Mismatch(err error) bool {
	r, ok := errResponse(err)
	return ok && (r.Code == "XAmzContentSHA256Mismatch" || r.Code == "BadDigest")
}

// Stat returns the object at key with the stamps read back from its metadata.
// It fails with ErrNotFound when there is no such object, and with
// ErrUnstamped, alongside the object, when its stamps are missing or invalid.
func (s *S3) Stat(ctx context.Context, key string) (Object, error) {
	info, err := s.core.StatObject(ctx, s.opts.Bucket, key, minio.StatObjectOptions{})
	if err != nil {
		if isNotFound(err) {
			return Object{}, fmt.Errorf("stat %s: %w", key, ErrNotFound)
		}
		return Object{}, fmt.Errorf("stat %s: %w", key, err)
	}
	md := make(map[string]string, len(info.UserMetadata))
	for k, v := range info.UserMetadata {
		md[strings.TrimPrefix(strings.ToLower(k), "x-amz-meta-")] = v
	}
	obj := Object{
		Key:          info.Key,
		Size:         info.Size,
		ETag:         info.ETag,
		ContentType:  info.ContentType,
		LastModified: info.LastModified,
		SHA256:       md[MetaSHA256],
		Metadata:     md,
	}
	if obj.Key == "" {
		obj.Key = key
	}
	tok, err := fencing.FromMetadata(md)
	if err != nil {
		return obj, fmt.Errorf("stat %s: %w: %w", key, ErrUnstamped, err)
	}
	obj.Token = tok
	return obj, nil
}

// List returns every object under prefix, in key order, each with its stamps.
// Objects without valid stamps are listed with a zero Token.
func (s *S3) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	for info := range s.core.Client.ListObjects(ctx, s.opts.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if info.Err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, info.Err)
		}
		obj, err := s.Stat(ctx, info.Key)
		switch {
		case errors.Is(err, ErrNotFound):
			continue // deleted since the listing
		case err != nil && !errors.Is(err, ErrUnstamped):
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
		out = append(out, obj)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	return out, nil
}
