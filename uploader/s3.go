package uploader

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// Part sizes and counts S3 allows for multipart uploads.
const (
	MinPartSize     = 5 << 20
	DefaultPartSize = 8 << 20
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
	// Region defaults to us-east-1, which spares a bucket-location lookup.
	Region    string
	Bucket    string
	AccessKey string
	SecretKey string
	// PartSize is the size of one multipart part and of each read buffer;
	// defaults to DefaultPartSize, at least MinPartSize. Memory held by one
	// upload is at most Parallelism × PartSize (parts grow only for known
	// sizes beyond 10,000 parts).
	PartSize int64
	// Parallelism is the number of parts uploaded at once; defaults to
	// DefaultParallelism.
	Parallelism int
	// TempDir holds spool files for bodies that can neither seek nor come
	// with a SHA256; defaults to os.TempDir().
	TempDir string
	// Transport replaces the HTTP transport (TLS settings, proxies).
	Transport http.RoundTripper
}

func (o *S3Options) setDefaults() {
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.PartSize == 0 {
		o.PartSize = DefaultPartSize
	}
	if o.Parallelism == 0 {
		o.Parallelism = DefaultParallelism
	}
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
	if len(problems) > 0 {
		return fmt.Errorf("%w: s3 options: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	return nil
}

// S3 uploads artifacts straight to a bucket with minio-go.
type S3 struct {
	opts S3Options
	core *minio.Core
}

var (
	_ Uploader = (*S3)(nil)
	_ Lister   = (*S3)(nil)
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
	})
	if err != nil {
		return nil, fmt.Errorf("create s3 client: %w", err)
	}
	return &S3{opts: opts, core: core}, nil
}

// Bucket returns the bucket the uploader writes to.
func (s *S3) Bucket() string { return s.opts.Bucket }

// CheckBucket reports whether the bucket exists and the credentials reach it.
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

// Upload writes a under tok.ObjectKey(a.Name) with the token's stamps and
// If-None-Match: *. See the package documentation for what happens when the
// key is taken.
func (s *S3) Upload(ctx context.Context, tok fencing.Token, a Artifact) (Result, error) {
	if err := validate(tok, a); err != nil {
		return Result{}, err
	}
	key := tok.ObjectKey(a.Name)
	src, err := s.open(ctx, a)
	if err != nil {
		return Result{}, fmt.Errorf("upload %s: %w", key, ctxErr(ctx, err))
	}
	defer src.close()

	u := &upload{s: s, ctx: ctx, tok: tok, key: key, src: src, contentType: a.ContentType}
	res, err := u.run()
	if err != nil {
		return Result{}, fmt.Errorf("upload %s: %w", key, ctxErr(ctx, err))
	}
	return res, nil
}

func validate(tok fencing.Token, a Artifact) error {
	var problems []string
	if err := tok.Validate(); err != nil {
		problems = append(problems, err.Error())
	}
	if err := protocol.ValidateArtifactName(a.Name); err != nil {
		problems = append(problems, err.Error())
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

// upload is the state of one Upload call.
type upload struct {
	s           *S3
	ctx         context.Context
	tok         fencing.Token
	key         string
	src         *source
	contentType string
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

func (u *upload) run() (Result, error) {
	hr := newHashReader(u.ctx, u.src.r)
	partSize := u.partSize()
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
		return u.single(hr, buf)
	}
	return u.multipart(hr, buf, partSize)
}

// verify checks what was read against the declared size and checksum.
func (u *upload) verify(hr *hashReader) error {
	if u.src.size >= 0 && hr.n != u.src.size {
		return fmt.Errorf("read %d bytes, want %d: %w", hr.n, u.src.size, ErrSizeMismatch)
	}
	if got := hr.sum(); got != u.src.sha256 {
		return fmt.Errorf("content hashes to %s, want %s: %w", got, u.src.sha256, ErrChecksumMismatch)
	}
	return nil
}

func (u *upload) single(hr *hashReader, body []byte) (Result, error) {
	if err := u.verify(hr); err != nil {
		return Result{}, err
	}
	info, err := u.s.core.PutObject(u.ctx, u.s.opts.Bucket, u.key, bytes.NewReader(body), int64(len(body)), "", u.src.sha256, u.putOptions())
	if err != nil {
		if isPreconditionFailed(err) {
			return u.existing()
		}
		return Result{}, fmt.Errorf("put object: %w", err)
	}
	return Result{Key: u.key, Size: int64(len(body)), SHA256: u.src.sha256, ETag: info.ETag}, nil
}

func (u *upload) multipart(hr *hashReader, first []byte, partSize int64) (res Result, err error) {
	s := u.s
	bucket := s.opts.Bucket
	uploadID, err := s.core.NewMultipartUpload(u.ctx, bucket, u.key, u.putOptions())
	if err != nil {
		if isPreconditionFailed(err) {
			return u.existing()
		}
		return Result{}, fmt.Errorf("start multipart upload: %w", err)
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		// The caller's context may be done: the abort still has to reach the
		// server, so that no parts stay behind.
		actx, cancel := context.WithTimeout(context.WithoutCancel(u.ctx), abortTimeout)
		defer cancel()
		// An upload found to exist already with this content stays a
		// success even if its own leftovers could not be aborted.
		if aerr := s.core.AbortMultipartUpload(actx, bucket, u.key, uploadID); aerr != nil && err != nil {
			err = errors.Join(err, fmt.Errorf("abort multipart upload %s: %w", uploadID, aerr))
		}
	}()

	pctx, cancel := context.WithCancelCause(u.ctx)
	defer cancel(nil)
	// A failed part stops the reading too.
	hr.ctx = pctx

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		parts []minio.CompletePart
		size  int64
	)
	// free holds the buffers not being uploaded; its capacity bounds the
	// memory of this upload to Parallelism × part size.
	free := make(chan []byte, s.opts.Parallelism)
	for range s.opts.Parallelism - 1 {
		free <- nil
	}
	send := func(n int, data []byte) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			popts := minio.PutObjectPartOptions{DisableContentSha256: true}
			if !s.opts.Secure {
				// Without TLS the part's hash is signed, so the server
				// verifies what arrived; with TLS it is UNSIGNED-PAYLOAD,
				// as minio-go does.
				sum := sha256.Sum256(data)
				popts.Sha256Hex = hex.EncodeToString(sum[:])
			}
			p, perr := s.core.PutObjectPart(pctx, bucket, u.key, uploadID, n, bytes.NewReader(data), int64(len(data)), popts)
			if perr != nil {
				cancel(fmt.Errorf("upload part %d: %w", n, perr))
			} else {
				mu.Lock()
				parts = append(parts, minio.CompletePart{PartNumber: n, ETag: p.ETag})
				size += int64(len(data))
				mu.Unlock()
			}
			free <- data[:0]
		}()
	}

	readErr := func() error {
		send(1, first)
		for n := 2; ; n++ {
			var buf []byte
			select {
			case buf = <-free:
			case <-pctx.Done():
				return nil
			}
			if buf == nil {
				buf = make([]byte, 0, partSize)
			}
			data, eof, err := readPart(hr, buf, partSize)
			if err != nil {
				return fmt.Errorf("read body: %w", err)
			}
			if len(data) > 0 {
				if n > maxParts {
					return fmt.Errorf("%w: body needs more than %d parts of %d bytes; declare its size", ErrInvalid, maxParts, partSize)
				}
				send(n, data)
			}
			if eof {
				return nil
			}
		}
	}()
	if readErr != nil {
		cancel(readErr)
	}
	wg.Wait()
	if err := context.Cause(pctx); err != nil {
		return Result{}, err
	}
	if err := u.verify(hr); err != nil {
		return Result{}, err
	}
	if err := u.ctx.Err(); err != nil {
		return Result{}, err
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].PartNumber < parts[j].PartNumber })
	info, err := s.core.CompleteMultipartUpload(u.ctx, bucket, u.key, uploadID, parts, conditionalOptions())
	if err != nil {
		if isPreconditionFailed(err) {
			return u.existing()
		}
		return Result{}, fmt.Errorf("complete multipart upload: %w", err)
	}
	committed = true
	return Result{Key: u.key, Size: size, SHA256: u.src.sha256, ETag: info.ETag}, nil
}

// existing decides about a key that turned out to be taken: the same content
// under the same stamps is this upload, landed by an earlier attempt.
func (u *upload) existing() (Result, error) {
	obj, err := u.s.Stat(u.ctx, u.key)
	if err != nil && !errors.Is(err, ErrUnstamped) {
		return Result{}, fmt.Errorf("stat existing object: %w", err)
	}
	if obj.SHA256 != u.src.sha256 || obj.Token != u.tok {
		return Result{}, fmt.Errorf("%w (stored sha256 %q, stamps %s)", ErrExists, obj.SHA256, obj.Token)
	}
	return Result{Key: u.key, Size: obj.Size, SHA256: obj.SHA256, ETag: obj.ETag, Existed: true}, nil
}

func isPreconditionFailed(err error) bool {
	r := minio.ToErrorResponse(err)
	return r.StatusCode == http.StatusPreconditionFailed || r.Code == "PreconditionFailed"
}

func isNotFound(err error) bool {
	r := minio.ToErrorResponse(err)
	return r.StatusCode == http.StatusNotFound || r.Code == minio.NoSuchKey
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
