package uploader

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"
)

// source is an artifact's content ready to be read once, with its checksum
// known before the first byte is sent (it goes into the object's metadata).
type source struct {
	r      io.Reader
	size   int64 // -1 when unknown
	sha256 string
	close  func()
}

// hashChunk is the read size of hashing and spooling passes.
const hashChunk = 256 << 10

// open prepares a's content. Without a declared SHA256 it hashes a file or a
// seekable body in a first pass; a body that cannot seek is read into memory
// when it fits in one part and spooled to a temp file otherwise.
func (s *S3) open(ctx context.Context, a Artifact) (*source, error) {
	src := &source{size: -1, sha256: strings.ToLower(a.SHA256), close: func() {}}
	if a.Size > 0 {
		src.size = a.Size
	}
	if a.Path != "" {
		f, err := os.Open(a.Path)
		if err != nil {
			return nil, fmt.Errorf("open artifact: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("stat artifact: %w", err)
		}
		if !fi.Mode().IsRegular() {
			f.Close()
			return nil, fmt.Errorf("%w: %s is not a regular file", ErrInvalid, a.Path)
		}
		if src.size >= 0 && src.size != fi.Size() {
			f.Close()
			return nil, fmt.Errorf("file %s has %d bytes, want %d: %w", a.Path, fi.Size(), src.size, ErrSizeMismatch)
		}
		src.size = fi.Size()
		src.r = f
		src.close = func() { f.Close() }
		if src.sha256 == "" {
			if err := hashSeeker(ctx, src, f); err != nil {
				src.close()
				return nil, err
			}
		}
		return src, nil
	}

	src.r = a.Body
	if src.sha256 != "" {
		return src, nil
	}
	if rs, ok := a.Body.(io.ReadSeeker); ok {
		if err := hashSeeker(ctx, src, rs); err != nil {
			return nil, err
		}
		return src, nil
	}
	return s.spool(ctx, src)
}

// hashSeeker hashes rs from its current offset to the end and seeks back.
func hashSeeker(ctx context.Context, src *source, rs io.ReadSeeker) error {
	start, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("seek body: %w", err)
	}
	hr := newHashReader(ctx, rs)
	if _, err := io.CopyBuffer(io.Discard, hr, make([]byte, hashChunk)); err != nil {
		return fmt.Errorf("hash body: %w", err)
	}
	if _, err := rs.Seek(start, io.SeekStart); err != nil {
		return fmt.Errorf("seek body: %w", err)
	}
	if src.size >= 0 && hr.n != src.size {
		return fmt.Errorf("body has %d bytes, want %d: %w", hr.n, src.size, ErrSizeMismatch)
	}
	src.size = hr.n
	src.sha256 = hr.sum()
	return nil
}

// spool reads a body that cannot seek: into memory when it fits in one part,
// else through a temp file, which is removed by src.close.
func (s *S3) spool(ctx context.Context, src *source) (*source, error) {
	hr := newHashReader(ctx, src.r)
	buf, eof, err := readPart(hr, nil, s.opts.PartSize)
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if eof {
		src.r = bytes.NewReader(buf)
		src.sha256 = hr.sum()
		return src, nil
	}

	f, err := os.CreateTemp(s.opts.TempDir, "edgeagent-upload-*")
	if err != nil {
		return nil, fmt.Errorf("create spool file: %w", err)
	}
	cleanup := func() {
		f.Close()
		os.Remove(f.Name())
	}
	if _, err := f.Write(buf); err != nil {
		cleanup()
		return nil, fmt.Errorf("write spool file: %w", err)
	}
	if _, err := io.CopyBuffer(f, hr, make([]byte, hashChunk)); err != nil {
		cleanup()
		return nil, fmt.Errorf("spool body: %w", err)
	}
	if src.size >= 0 && hr.n != src.size {
		cleanup()
		return nil, fmt.Errorf("body has %d bytes, want %d: %w", hr.n, src.size, ErrSizeMismatch)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, fmt.Errorf("seek spool file: %w", err)
	}
	src.r = f
	src.size = hr.n
	src.sha256 = hr.sum()
	src.close = cleanup
	return src, nil
}

// hashReader hashes and counts what is read through it, and stops reading
// once its context is done.
type hashReader struct {
	ctx context.Context
	r   io.Reader
	h   hash.Hash
	n   int64
}

func newHashReader(ctx context.Context, r io.Reader) *hashReader {
	return &hashReader{ctx: ctx, r: r, h: sha256.New()}
}

func (h *hashReader) Read(p []byte) (int, error) {
	if err := h.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

func (h *hashReader) sum() string { return hex.EncodeToString(h.h.Sum(nil)) }

// readPart appends to buf[:0] until limit bytes are read or r ends; eof
// reports the end. buf grows geometrically, so a short body does not cost a
// whole part of memory.
func readPart(r io.Reader, buf []byte, limit int64) (data []byte, eof bool, err error) {
	buf = buf[:0]
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			c := min(max(2*int64(cap(buf)), 64<<10), limit)
			nb := make([]byte, len(buf), c)
			copy(nb, buf)
			buf = nb
		}
		end := min(int64(cap(buf)), limit)
		n, err := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, true, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
	return buf, false, nil
}

// atEOF reads one more byte to tell whether h has ended; a byte read is
// counted and hashed, so the content no longer matches what was declared.
func atEOF(h *hashReader) (bool, error) {
	var one [1]byte
	for {
		n, err := h.Read(one[:])
		if n > 0 {
			return false, nil
		}
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// initialCap is the first allocation for a part of at most limit bytes.
func initialCap(limit int64) int64 {
	return min(max(limit, 0), 64<<10)
}
