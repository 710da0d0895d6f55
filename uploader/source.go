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

// source is an artifact's content ready to be sent, with its checksum known
// before the first byte is sent (it goes into the object's metadata).
// Files and bodies that can seek are read at offsets (ra), so that parts
// stream from disk without being held in memory and a failed request can
// be sent again; other bodies are read once, in order (r).
type source struct {
	ra     io.ReaderAt // content at offsets 0 to size, or nil for a stream
	r      io.Reader   // the stream, when ra is nil
	size   int64       // -1 when unknown (streams only)
	sha256 string
	close  func()
}

// hashChunk is the read size of hashing and spooling passes.
const hashChunk = 256 << 10

// openSource prepares a's content. A file or a body that can seek is hashed
// in a first pass and checked against a declared SHA256, unless the spool
// or the file's writer (Artifact.Hashed) hashed it while writing it. A stream without a declared SHA256 is read
// into memory when it fits in memLimit bytes and spooled to a temp file in
// tempDir otherwise; a stream with one is checked as it is sent, unless
// random asks for random access, when it is spooled and checked too.
func openSource(ctx context.Context, a Artifact, tempDir string, memLimit int64, random bool) (*source, error) {
	src := &source{size: -1, sha256: strings.ToLower(a.SHA256), close: func() {}}
	declared := int64(-1)
	if a.Size > 0 {
		declared = a.Size
	}
	switch {
	case a.Path != "":
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
		src.ra, src.size, src.close = f, fi.Size(), func() { f.Close() }
	default:
		ra, ok1 := a.Body.(io.ReaderAt)
		sk, ok2 := a.Body.(io.Seeker)
		if !ok1 || !ok2 {
			src.r = a.Body
			if src.sha256 != "" && !random {
				src.size = declared
				return src, nil
			}
			want := src.sha256
			src, err := spoolStream(ctx, src, declared, tempDir, memLimit)
			if err == nil && want != "" && src.sha256 != want {
				src.close()
				return nil, fmt.Errorf("content hashes to %s, want %s: %w", src.sha256, want, ErrChecksumMismatch)
			}
			return src, err
		}
		start, err := sk.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, fmt.Errorf("seek body: %w", err)
		}
		end, err := sk.Seek(0, io.SeekEnd)
		if err != nil {
			return nil, fmt.Errorf("seek body: %w", err)
		}
		// The body counts as read to its end, as for a stream.
		src.ra, src.size = io.NewSectionReader(ra, start, end-start), end-start
	}
	if declared >= 0 && src.size != declared {
		src.close()
		return nil, fmt.Errorf("content has %d bytes, want %d: %w", src.size, declared, ErrSizeMismatch)
	}
	if (a.hashed || a.Hashed && a.Path != "") && src.sha256 != "" {
		return src, nil
	}
	sum, err := hashAt(ctx, src.ra, src.size)
	if err != nil {
		src.close()
		return nil, err
	}
	if src.sha256 != "" && sum != src.sha256 {
		src.close()
		return nil, fmt.Errorf("content hashes to %s, want %s: %w", sum, src.sha256, ErrChecksumMismatch)
	}
	src.sha256 = sum
	return src, nil
}

// hashAt returns the SHA-256 of ra's first size bytes.
func hashAt(ctx context.Context, ra io.ReaderAt, size int64) (string, error) {
	hr := newHashReader(ctx, io.NewSectionReader(ra, 0, size))
	if _, err := io.CopyBuffer(io.Discard, hr, make([]byte, hashChunk)); err != nil {
		return "", fmt.Errorf("hash content: %w", err)
	}
	if hr.n != size {
		return "", fmt.Errorf("content ended after %d of %d bytes: %w", hr.n, size, ErrSizeMismatch)
	}
	return hr.sum(), nil
}

// spoolStream reads a stream without a declared SHA256: into memory when it
// fits in memLimit bytes, else through a temp file, which src.close
// removes.
func spoolStream(ctx context.Context, src *source, declared int64, tempDir string, memLimit int64) (*source, error) {
	hr := newHashReader(ctx, src.r)
	buf, eof, err := readPart(hr, nil, memLimit)
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if eof {
		if declared >= 0 && hr.n != declared {
			return nil, fmt.Errorf("body has %d bytes, want %d: %w", hr.n, declared, ErrSizeMismatch)
		}
		src.r, src.ra, src.size, src.sha256 = nil, bytes.NewReader(buf), hr.n, hr.sum()
		return src, nil
	}

	f, err := os.CreateTemp(tempDir, "edgeagent-upload-*")
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
	if declared >= 0 && hr.n != declared {
		cleanup()
		return nil, fmt.Errorf("body has %d bytes, want %d: %w", hr.n, declared, ErrSizeMismatch)
	}
	src.r, src.ra, src.size, src.sha256, src.close = nil, f, hr.n, hr.sum(), cleanup
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

// ctxReader stops reading once its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
