package adb

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"
)

// Sync protocol limits.
const (
	SyncDataMax = 64 << 10 // largest DATA chunk
	maxSyncPath = 1024
)

// FileInfo is the reply to a sync STAT request.
type FileInfo struct {
	Mode  uint32 // st_mode; 0 when the file does not exist
	Size  uint32 // bytes, truncated to 32 bits by the protocol
	MTime time.Time
}

// Exists reports whether the file exists (STAT answers zeros otherwise).
func (fi FileInfo) Exists() bool { return fi.Mode != 0 }

// Sync is an open sync: session with one phone. Requests run one at a time.
type Sync struct {
	s      *Stream
	serial string
}

// Sync opens the sync service on the phone with serial. Close it with Close.
func (c *Client) Sync(ctx context.Context, serial string) (*Sync, error) {
	s, err := c.Open(ctx, serial, "sync:")
	if err != nil {
		return nil, fmt.Errorf("open sync session on %s: %w", serial, err)
	}
	return &Sync{s: s, serial: serial}, nil
}

func (y *Sync) request(id, path string) error {
	if len(path) > maxSyncPath {
		return fmt.Errorf("path of %d bytes exceeds %d", len(path), maxSyncPath)
	}
	b := make([]byte, 0, 8+len(path))
	b = append(b, id...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(path)))
	b = append(b, path...)
	_, err := y.s.Write(b)
	return err
}

// Stat returns the mode, size and modification time of path.
func (y *Sync) Stat(path string) (FileInfo, error) {
	if err := y.request("STAT", path); err != nil {
		return FileInfo{}, fmt.Errorf("stat %s on %s: %w", path, y.serial, err)
	}
	var b [16]byte
	if _, err := io.ReadFull(y.s, b[:]); err != nil {
		return FileInfo{}, fmt.Errorf("stat %s on %s: read reply: %w", path, y.serial, err)
	}
	fi, err := ParseStatReply(b[:])
	if err != nil {
		return FileInfo{}, fmt.Errorf("stat %s on %s: %w", path, y.serial, err)
	}
	return fi, nil
}

// ParseStatReply parses the 16-byte reply to STAT.
func ParseStatReply(b []byte) (FileInfo, error) {
	if len(b) != 16 {
		return FileInfo{}, fmt.Errorf("parse stat reply: %d bytes, want 16", len(b))
	}
	if id := string(b[:4]); id != "STAT" {
		return FileInfo{}, fmt.Errorf("parse stat reply: id %q, want STAT", id)
	}
	fi := FileInfo{
		Mode: binary.LittleEndian.Uint32(b[4:]),
		Size: binary.LittleEndian.Uint32(b[8:]),
	}
	if t := binary.LittleEndian.Uint32(b[12:]); t != 0 {
		fi.MTime = time.Unix(int64(t), 0)
	}
	return fi, nil
}

// Recv streams the file at path into w and returns the number of bytes
// written. A missing file is an error wrapping fs.ErrNotExist.
func (y *Sync) Recv(path string, w io.Writer) (int64, error) {
	if err := y.request("RECV", path); err != nil {
		return 0, fmt.Errorf("pull %s from %s: %w", path, y.serial, err)
	}
	var n int64
	buf := make([]byte, SyncDataMax)
	for {
		id, size, err := readSyncHeader(y.s)
		if err != nil {
			return n, fmt.Errorf("pull %s from %s: %w", path, y.serial, err)
		}
		switch id {
		case "DATA":
			if size > SyncDataMax {
				return n, fmt.Errorf("pull %s from %s: DATA chunk of %d bytes exceeds %d", path, y.serial, size, SyncDataMax)
			}
			if _, err := io.ReadFull(y.s, buf[:size]); err != nil {
				return n, fmt.Errorf("pull %s from %s: read %d-byte chunk: %w", path, y.serial, size, err)
			}
			m, err := w.Write(buf[:size])
			n += int64(m)
			if err != nil {
				return n, fmt.Errorf("pull %s from %s: write: %w", path, y.serial, err)
			}
		case "DONE":
			return n, nil
		case "FAIL":
			msg, err := readSyncMessage(y.s, size)
			if err != nil {
				return n, fmt.Errorf("pull %s from %s: %w", path, y.serial, err)
			}
			err = &SyncError{Op: "pull", Path: path, Msg: msg}
			return n, fmt.Errorf("pull %s from %s: %w", path, y.serial, err)
		default:
			return n, fmt.Errorf("pull %s from %s: unexpected sync reply %q", path, y.serial, id)
		}
	}
}

// Send writes r to path on the phone with mode and modification time.
func (y *Sync) Send(path string, mode fs.FileMode, mtime time.Time, r io.Reader) error {
	spec := fmt.Sprintf("%s,%d", path, uint32(mode.Perm())|0o100000)
	if err := y.request("SEND", spec); err != nil {
		return fmt.Errorf("push %s to %s: %w", path, y.serial, err)
	}
	buf := make([]byte, 8+SyncDataMax)
	for {
		m, rerr := io.ReadFull(r, buf[8:])
		if m > 0 {
			copy(buf, "DATA")
			binary.LittleEndian.PutUint32(buf[4:], uint32(m))
			if _, err := y.s.Write(buf[:8+m]); err != nil {
				return fmt.Errorf("push %s to %s: %w", path, y.serial, err)
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("push %s to %s: read source: %w", path, y.serial, rerr)
		}
	}
	done := make([]byte, 8)
	copy(done, "DONE")
	binary.LittleEndian.PutUint32(done[4:], uint32(mtime.Unix()))
	if _, err := y.s.Write(done); err != nil {
		return fmt.Errorf("push %s to %s: %w", path, y.serial, err)
	}
	id, size, err := readSyncHeader(y.s)
	if err != nil {
		return fmt.Errorf("push %s to %s: %w", path, y.serial, err)
	}
	switch id {
	case "OKAY":
		return nil
	case "FAIL":
		msg, err := readSyncMessage(y.s, size)
		if err != nil {
			return fmt.Errorf("push %s to %s: %w", path, y.serial, err)
		}
		return fmt.Errorf("push %s to %s: %w", path, y.serial, &SyncError{Op: "push", Path: path, Msg: msg})
	default:
		return fmt.Errorf("push %s to %s: unexpected sync reply %q", path, y.serial, id)
	}
}

// Close ends the session (QUIT) and closes the stream.
func (y *Sync) Close() error {
	_, _ = y.s.Write([]byte("QUIT\x00\x00\x00\x00"))
	return y.s.Close()
}

// SyncError is a FAIL reply of the phone's sync service.
type SyncError struct {
	Op, Path, Msg string
}

func (e *SyncError) Error() string { return "phone refused: " + e.Msg }

// Is makes a "No such file or directory" failure match fs.ErrNotExist.
func (e *SyncError) Is(target error) bool {
	return target == fs.ErrNotExist && containsFold(e.Msg, "no such file")
}

func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		match := true
		for j := 0; j < len(sub); j++ {
			a, b := s[i+j], sub[j]
			if 'A' <= a && a <= 'Z' {
				a += 'a' - 'A'
			}
			if a != b {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// readSyncHeader reads a sync reply's id and length word.
func readSyncHeader(r io.Reader) (string, uint32, error) {
	var h [8]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return "", 0, errors.New("read sync reply: stream closed by the phone")
		}
		return "", 0, fmt.Errorf("read sync reply: %w", err)
	}
	return ParseSyncHeader(h[:])
}

// ParseSyncHeader parses the 8-byte header of a sync reply: a four-letter
// id (DATA, DONE, OKAY, FAIL) and a little-endian length.
func ParseSyncHeader(h []byte) (string, uint32, error) {
	if len(h) != 8 {
		return "", 0, fmt.Errorf("parse sync header: %d bytes, want 8", len(h))
	}
	id := string(h[:4])
	for _, c := range h[:4] {
		if c < 'A' || c > 'Z' {
			return "", 0, fmt.Errorf("parse sync header: id %q is not four capital letters", h[:4])
		}
	}
	return id, binary.LittleEndian.Uint32(h[4:]), nil
}

func readSyncMessage(r io.Reader, n uint32) (string, error) {
	if n > SyncDataMax {
		return "", fmt.Errorf("read sync failure message: %d bytes exceeds %d", n, SyncDataMax)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("read sync failure message: %w", err)
	}
	return string(b), nil
}
