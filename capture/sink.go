package capture

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
)

// sink takes the bytes of one artifact as they arrive from the phone and
// hashes them on the way (docs/uploads.md, Hashing): into a spool file when
// the runner has a SpoolDir, else into memory. The artifact's SHA-256 is
// thus known when its last byte is written, and nothing reads the bytes
// again to hash them.
type sink struct {
	a   Artifact
	f   *os.File
	buf *bytes.Buffer
	h   hash.Hash
	w   io.Writer
	n   int64
}

// newSink starts artifact name of content type ct, spooled under dir ("" for
// memory).
func newSink(dir, name, ct string) (*sink, error) {
	s := &sink{a: Artifact{Name: name, ContentType: ct}, h: sha256.New()}
	if dir == "" {
		s.buf = &bytes.Buffer{}
		s.w = io.MultiWriter(s.buf, s.h)
		return s, nil
	}
	// os.CreateTemp makes the file 0600: the upload spool links it rather
	// than copying it.
	f, err := os.CreateTemp(dir, "capture-*-"+name)
	if err != nil {
		return nil, fmt.Errorf("create spool file: %w", err)
	}
	s.f = f
	s.w = io.MultiWriter(f, s.h)
	return s, nil
}

func (s *sink) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.n += int64(n)
	return n, err
}

// finish closes the sink and returns its artifact, size and SHA-256 set.
func (s *sink) finish() (Artifact, error) {
	a := s.a
	a.Size, a.SHA256 = s.n, hex.EncodeToString(s.h.Sum(nil))
	if s.f == nil {
		a.Data = s.buf.Bytes()
		return a, nil
	}
	if err := s.f.Close(); err != nil {
		_ = os.Remove(s.f.Name())
		return Artifact{}, fmt.Errorf("close spool file: %w", err)
	}
	a.Path = s.f.Name()
	return a, nil
}

// discard drops what the sink holds.
func (s *sink) discard() {
	if s.f != nil {
		_ = s.f.Close()
		_ = os.Remove(s.f.Name())
	}
}

// keep stores data, already in memory (a screenshot encoded on the PC, a
// UI dump), as artifact name through a sink: written to the spool file and
// hashed in one pass.
func (r *Runner) keep(name, ct string, data []byte) (Artifact, error) {
	s, err := newSink(r.opts.SpoolDir, name, ct)
	if err != nil {
		return Artifact{}, err
	}
	if _, err := s.Write(data); err != nil {
		s.discard()
		return Artifact{}, fmt.Errorf("write spool file: %w", err)
	}
	return s.finish()
}
