package uploader

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/minio/minio-go/v7"
)

// part is one part of a multipart upload; body returns a fresh reader of
// its content for each attempt, and release, when set, frees its buffer.
// A part of a stream is held in memory (data).
type part struct {
	n       int
	size    int64
	body    func() io.Reader
	data    []byte
	release func()
}

// producer hands the parts of the content to emit, in order, and stops
// early when emit returns false. Parts found in stored (a resumed upload)
// that hold the same content are recorded with keep instead of being sent.
type producer func(stored map[int]minio.ObjectPart, emit func(part) bool, keep func(minio.CompletePart, int64)) error

// partsAt produces the parts of random-access content; they are read from
// it while they are sent, never held in memory.
func (u *upload) partsAt(ra io.ReaderAt, size, partSize int64) producer {
	return func(stored map[int]minio.ObjectPart, emit func(part) bool, keep func(minio.CompletePart, int64)) error {
		for off, n := int64(0), 1; off < size; off, n = off+partSize, n+1 {
			length := min(partSize, size-off)
			if sp, ok := stored[n]; ok {
				same, err := partHolds(u.ctx, sp, ra, off, length)
				if err != nil {
					return err
				}
				if same {
					keep(minio.CompletePart{PartNumber: n, ETag: sp.ETag}, length)
					continue
				}
			}
			off := off
			if !emit(part{n: n, size: length, body: func() io.Reader { return io.NewSectionReader(ra, off, length) }}) {
				return nil
			}
		}
		return nil
	}
}

// partHolds reports whether a stored part holds the content at off: same
// size and, when its ETag is an MD5 (as MinIO and S3 give for unencrypted
// parts), same MD5.
func partHolds(ctx context.Context, sp minio.ObjectPart, ra io.ReaderAt, off, length int64) (bool, error) {
	if sp.Size != length {
		return false, nil
	}
	etag := strings.ToLower(strings.Trim(sp.ETag, `"`))
	if b, err := hex.DecodeString(etag); err != nil || len(b) != md5.Size {
		return true, nil
	}
	h := md5.New()
	r := &ctxReader{ctx: ctx, r: io.NewSectionReader(ra, off, length)}
	if _, err := io.CopyBuffer(h, r, make([]byte, hashChunk)); err != nil {
		return false, fmt.Errorf("check stored part: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)) == etag, nil
}

// partsStream produces the parts of a stream whose first part, first, is
// already read. At most Parallelism buffers of partSize bytes are in use.
func (u *upload) partsStream(hr *hashReader, first []byte, partSize int64) producer {
	return func(_ map[int]minio.ObjectPart, emit func(part) bool, _ func(minio.CompletePart, int64)) error {
		free := make(chan []byte, u.s.opts.Parallelism)
		for range u.s.opts.Parallelism - 1 {
			free <- nil
		}
		mkPart := func(n int, data []byte) part {
			return part{n: n, size: int64(len(data)), data: data,
				body:    func() io.Reader { return bytes.NewReader(data) },
				release: func() { free <- data[:0] }}
		}
		if !emit(mkPart(1, first)) {
			return nil
		}
		for n := 2; ; n++ {
			var buf []byte
			select {
			case buf = <-free:
			case <-hr.ctx.Done():
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
				if !emit(mkPart(n, data)) {
					return nil
				}
			}
			if eof {
				return nil
			}
		}
	}
}

// multipart stores the content as a multipart upload whose parts come from
// produce, in three steps: start (or resume) the upload, send the parts,
// complete it. verify, when set, runs once every part is stored and before
// the upload is completed. If-None-Match: * goes with the start and with the
// completion, so nothing is overwritten even by a writer that slips in
// between. An upload that fails is aborted, unless it is resumable and the
// storage was unavailable: it is then left open for the next attempt.
func (u *upload) multipart(partSize int64, produce producer, verify func() error) (res Result, err error) {
	uploadID, stored, err := u.startOrResume(partSize)
	if err != nil {
		if isPreconditionFailed(err) {
			return u.existing()
		}
		return Result{}, err
	}
	// done is set once the upload is completed or known to be gone.
	done := false
	defer func() {
		if !done {
			err = u.release(uploadID, err)
		}
	}()
	parts, size, err := u.sendParts(uploadID, stored, produce)
	if err != nil {
		return Result{}, err
	}
	if verify != nil {
		if err := verify(); err != nil {
			return Result{}, err
		}
	}
	if err := u.ctx.Err(); err != nil {
		return Result{}, err
	}
	res, done, err = u.complete(uploadID, parts, size)
	return res, err
}

// startOrResume returns the multipart upload to send the parts to: the one
// recorded in u.mp when it is still open and of the same part size (with
// the parts it holds), else a new one. Before a new one is started the
// intent is recorded (Multipart.Opening), and once started its id, so that
// a process killed at any point leaves a record naming the key whose
// uploads must be aborted. An error of the start request is returned as it
// is (a taken key answers 412).
func (u *upload) startOrResume(partSize int64) (string, map[int]minio.ObjectPart, error) {
	s := u.s
	resumable := u.mp != nil
	// opening is set when a request starting an upload may have reached
	// the server without its answer reaching us (here or in an earlier
	// attempt): an upload may be open that only a listing finds.
	opening := resumable && u.mp.Opening
	if resumable && u.mp.UploadID != "" {
		if u.mp.PartSize == partSize {
			stored, err := u.listParts(u.mp.UploadID)
			switch {
			case err == nil:
				s.opts.Metrics.resume()
				return u.mp.UploadID, stored, nil
			case isNoSuchUpload(err):
				// Aborted or expired meanwhile: start again.
			default:
				return "", nil, fmt.Errorf("list stored parts: %w", err)
			}
		} else if err := s.abandon(u.ctx, u.key, u.mp.UploadID, false); err != nil {
			// Parts of another size cannot be reused.
			return "", nil, err
		}
	}
	if resumable {
		if err := u.record(Multipart{PartSize: partSize, Opening: true}); err != nil {
			return "", nil, err
		}
	}

	var uploadID string
	err := u.retry("initiate", func() error {
		var err error
		uploadID, err = s.core.NewMultipartUpload(u.ctx, s.opts.Bucket, u.key, u.putOptions())
		if err != nil && (transient(err) || u.ctx.Err() != nil) {
			opening = true
		}
		return err
	})
	if err != nil {
		if !opening || (resumable && errors.Is(err, ErrUnavailable) && u.ctx.Err() == nil) {
			// Nothing may be open, or the next attempt finds what is.
			if !opening && resumable {
				*u.mp = Multipart{}
			}
		} else if aerr := s.abandon(u.ctx, u.key, "", true); aerr != nil {
			// Nothing will come back for it: clean up now, and if that
			// fails, the intent stays recorded for the caller to retry.
			err = errors.Join(err, aerr)
		} else if resumable {
			*u.mp = Multipart{}
		}
		if isPreconditionFailed(err) {
			return "", nil, err
		}
		return "", nil, fmt.Errorf("start multipart upload: %w", err)
	}
	if opening {
		if err := s.abandonOthers(u.ctx, u.key, uploadID); err != nil {
			_ = s.abandon(u.ctx, u.key, uploadID, false)
			return "", nil, err
		}
	}
	if resumable {
		if err := u.record(Multipart{UploadID: uploadID, PartSize: partSize}); err != nil {
			if aerr := s.abandon(u.ctx, u.key, uploadID, false); aerr == nil {
				*u.mp = Multipart{}
			}
			return "", nil, err
		}
	}
	return uploadID, nil, nil
}

// record sets the resumable state and passes it to the caller's save.
func (u *upload) record(mp Multipart) error {
	*u.mp = mp
	if u.save == nil {
		return nil
	}
	if err := u.save(mp); err != nil {
		return fmt.Errorf("record multipart upload: %w", err)
	}
	return nil
}

// release aborts uploadID after a failure (err), unless it is resumable and
// the storage was unavailable: then it is left open for the next attempt.
// The abort runs even when the caller's context is done, so that no parts
// stay behind; the resumable state is cleared only once the abort worked,
// so that a caller who records it can try again.
func (u *upload) release(uploadID string, err error) error {
	resumable := u.mp != nil
	if resumable && errors.Is(err, ErrUnavailable) && u.ctx.Err() == nil {
		return err
	}
	if aerr := u.s.abandon(u.ctx, u.key, uploadID, u.ctx.Err() != nil); aerr != nil {
		return errors.Join(err, aerr)
	}
	if resumable {
		*u.mp = Multipart{}
	}
	return err
}

// sendParts sends the parts produce hands out, Parallelism at a time, to
// uploadID; parts already stored there (a resumed upload) holding the same
// content are kept. It returns the parts in order and their total size, or
// the first failure, which stops the others.
func (u *upload) sendParts(uploadID string, stored map[int]minio.ObjectPart, produce producer) ([]minio.CompletePart, int64, error) {
	s := u.s
	pctx, cancel := context.WithCancelCause(u.ctx)
	defer cancel(nil)

	var (
		mu    sync.Mutex
		parts []minio.CompletePart
		size  int64
	)
	record := func(p minio.CompletePart, n int64) {
		mu.Lock()
		parts = append(parts, p)
		size += n
		mu.Unlock()
	}
	keep := func(p minio.CompletePart, n int64) {
		record(p, n)
		u.tr.add(n)
		s.opts.Metrics.part("resumed")
	}

	work := make(chan part)
	var wg sync.WaitGroup
	for range s.opts.Parallelism {
		wg.Go(func() {
			for p := range work {
				etag, err := u.sendPart(pctx, uploadID, p)
				if p.release != nil {
					p.release()
				}
				if err != nil {
					cancel(fmt.Errorf("upload part %d: %w", p.n, err))
					continue
				}
				record(minio.CompletePart{PartNumber: p.n, ETag: etag}, p.size)
				s.opts.Metrics.part("sent")
			}
		})
	}
	emit := func(p part) bool {
		select {
		case work <- p:
			return true
		case <-pctx.Done():
			if p.release != nil {
				p.release()
			}
			return false
		}
	}
	// A failed part stops the reading of a stream too.
	if u.hr != nil {
		u.hr.ctx = pctx
	}
	perr := produce(stored, emit, keep)
	close(work)
	if perr != nil {
		cancel(perr)
	}
	wg.Wait()
	if err := context.Cause(pctx); err != nil {
		return nil, 0, err
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].PartNumber < parts[j].PartNumber })
	return parts, size, nil
}

// sendPart stores one part, retrying, and returns its ETag.
func (u *upload) sendPart(ctx context.Context, uploadID string, p part) (string, error) {
	s := u.s
	// The payload's hash goes into the signature, so the server checks what
	// arrived; over TLS it is UNSIGNED-PAYLOAD, as minio-go does. A part
	// read from disk is hashed as it is sent (aws-chunked signing); one held
	// in memory is hashed first, which costs the same and allocates less.
	var popts minio.PutObjectPartOptions
	if p.data != nil {
		popts.DisableContentSha256 = true
		if !s.opts.Secure {
			sum := sha256.Sum256(p.data)
			popts.Sha256Hex = hex.EncodeToString(sum[:])
		}
	}
	var etag string
	err := s.opts.Retry.retry(ctx, s.opts.Metrics, "part", func(int) error {
		body := newSendReader(ctx, p.body(), s.bw, u.tr, s.opts.Metrics)
		op, err := s.core.PutObjectPart(ctx, s.opts.Bucket, u.key, uploadID, p.n, body, p.size, popts)
		if err != nil {
			body.failed()
			return err
		}
		etag = op.ETag
		return nil
	})
	return etag, err
}

// complete completes uploadID from parts. done reports whether the upload
// is completed or known to be gone, so that nothing is left to abort.
func (u *upload) complete(uploadID string, parts []minio.CompletePart, size int64) (res Result, done bool, err error) {
	s := u.s
	var info minio.UploadInfo
	unsure := false
	err = u.retry("complete", func() error {
		var err error
		info, err = s.core.CompleteMultipartUpload(u.ctx, s.opts.Bucket, u.key, uploadID, parts, conditionalOptions())
		if err != nil && transient(err) {
			unsure = true
		}
		return err
	})
	switch {
	case err == nil:
		return Result{Key: u.key, Size: size, SHA256: u.src.sha256, ETag: info.ETag}, true, nil
	case isPreconditionFailed(err):
		// Taken: by an earlier completion of this upload whose answer was
		// lost, or by another writer. Ours is aborted either way.
		res, err := u.existing()
		return res, false, err
	case unsure && isNoSuchUpload(err):
		// An earlier completion whose answer was lost may have landed.
		res, err := u.existing()
		if errors.Is(err, ErrNotFound) {
			// Gone without an object: start again next time.
			if u.mp != nil {
				*u.mp = Multipart{}
			}
			return Result{}, true, fmt.Errorf("%w: multipart upload %s vanished", ErrUnavailable, uploadID)
		}
		return res, err == nil, err
	}
	return Result{}, false, fmt.Errorf("complete multipart upload: %w", err)
}

// listParts returns the parts stored for uploadID by part number.
func (u *upload) listParts(uploadID string) (map[int]minio.ObjectPart, error) {
	stored := make(map[int]minio.ObjectPart)
	marker := 0
	for {
		var res minio.ListObjectPartsResult
		err := u.retry("list", func() error {
			var err error
			res, err = u.s.core.ListObjectParts(u.ctx, u.s.opts.Bucket, u.key, uploadID, marker, 1000)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, p := range res.ObjectParts {
			stored[p.PartNumber] = p
		}
		if !res.IsTruncated || res.NextPartNumberMarker <= marker {
			return stored, nil
		}
		marker = res.NextPartNumberMarker
	}
}

// Abandon implements Resumable.
func (s *S3) Abandon(ctx context.Context, key, uploadID string) error {
	return s.abandon(ctx, key, uploadID, true)
}

// abandon aborts uploadID, when set, and with all every other incomplete
// upload of key too. It runs even when ctx is done, for at most
// abortTimeout.
func (s *S3) abandon(ctx context.Context, key, uploadID string, all bool) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	var errs []error
	if uploadID != "" {
		errs = append(errs, s.abortOne(actx, key, uploadID))
	}
	if all {
		errs = append(errs, s.abandonOthers(actx, key, uploadID))
	}
	return errors.Join(errs...)
}

// abandonOthers aborts the incomplete uploads of key other than keep.
func (s *S3) abandonOthers(ctx context.Context, key, keep string) error {
	ids, err := s.incompleteUploads(ctx, key)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if id != keep {
			errs = append(errs, s.abortOne(ctx, key, id))
		}
	}
	return errors.Join(errs...)
}

func (s *S3) abortOne(ctx context.Context, key, uploadID string) error {
	err := s.opts.Retry.retry(ctx, s.opts.Metrics, "abort", func(int) error {
		return s.core.AbortMultipartUpload(ctx, s.opts.Bucket, key, uploadID)
	})
	if err != nil && !isNoSuchUpload(err) {
		return fmt.Errorf("abort multipart upload %s: %w", uploadID, err)
	}
	if err == nil {
		s.opts.Metrics.abort()
	}
	return nil
}

// incompleteUploads lists the ids of the incomplete multipart uploads of
// key.
func (s *S3) incompleteUploads(ctx context.Context, key string) ([]string, error) {
	var ids []string
	keyMarker, idMarker := "", ""
	for {
		var res minio.ListMultipartUploadsResult
		err := s.opts.Retry.retry(ctx, s.opts.Metrics, "list", func(int) error {
			var err error
			res, err = s.core.ListMultipartUploads(ctx, s.opts.Bucket, key, keyMarker, idMarker, "", 1000)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("list incomplete uploads of %s: %w", key, err)
		}
		for _, up := range res.Uploads {
			if up.Key == key {
				ids = append(ids, up.UploadID)
			}
		}
		if !res.IsTruncated || (res.NextKeyMarker == keyMarker && res.NextUploadIDMarker == idMarker) {
			return ids, nil
		}
		keyMarker, idMarker = res.NextKeyMarker, res.NextUploadIDMarker
	}
}
