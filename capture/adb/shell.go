package adb

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// Shell protocol v2 packet ids (a one-byte id, a little-endian uint32
// length, then the data).
const (
	ShellStdin       = 0
	ShellStdout      = 1
	ShellStderr      = 2
	ShellExit        = 3
	ShellCloseStdin  = 4
	ShellWindowSize  = 5
	maxShellPacket   = 16 << 20
	shellOutputLimit = 64 << 20
)

// ShellResult is the outcome of a command run through the shell service.
type ShellResult struct {
	Stdout   []byte
	Stderr   []byte // empty with the v1 protocol, which merges the streams
	ExitCode int
}

// ReadShellPacket reads one shell protocol v2 packet. Data longer than max
// is an error.
func ReadShellPacket(r io.Reader, max int) (id byte, data []byte, err error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("read shell packet header: truncated after %d of 5 bytes", len(h))
		}
		return 0, nil, err // io.EOF: the stream ended between packets
	}
	id = h[0]
	if id > ShellWindowSize {
		return 0, nil, fmt.Errorf("read shell packet: unknown packet id %d", id)
	}
	n := binary.LittleEndian.Uint32(h[1:])
	if int64(n) > int64(max) {
		return 0, nil, fmt.Errorf("read shell packet: id %d announces %d bytes, limit %d", id, n, max)
	}
	data = make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return 0, nil, fmt.Errorf("read shell packet: id %d: %d-byte payload truncated: %w", id, n, err)
	}
	return id, data, nil
}

// AppendShellPacket appends one shell protocol v2 packet to b.
func AppendShellPacket(b []byte, id byte, data []byte) []byte {
	b = append(b, id)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	return append(b, data...)
}

// ParseShellOutput decodes a complete shell v2 stream: stdout and stderr
// (each at most limit bytes) and the exit code. A stream without an exit
// packet is an error: the command did not finish (or the phone went away).
func ParseShellOutput(r io.Reader, limit int) (ShellResult, error) {
	var res ShellResult
	for {
		id, data, err := ReadShellPacket(r, maxShellPacket)
		if err == io.EOF {
			return res, errors.New("shell stream ended without an exit status")
		}
		if err != nil {
			return res, err
		}
		switch id {
		case ShellStdout:
			if len(res.Stdout)+len(data) > limit {
				return res, fmt.Errorf("shell stdout exceeds %d bytes", limit)
			}
			res.Stdout = append(res.Stdout, data...)
		case ShellStderr:
			if len(res.Stderr)+len(data) > limit {
				return res, fmt.Errorf("shell stderr exceeds %d bytes", limit)
			}
			res.Stderr = append(res.Stderr, data...)
		case ShellExit:
			if len(data) != 1 {
				return res, fmt.Errorf("shell exit packet has %d bytes, want 1", len(data))
			}
			res.ExitCode = int(data[0])
			return res, nil
		default:
			// stdin, close-stdin and window-size go to the phone, never back;
			// ignore them like adb does.
		}
	}
}

// ShellV2 runs cmd with the shell protocol v2 (separate stdout and stderr,
// exit code), without a PTY. The phone must have the shell_v2 feature.
func (c *Client) ShellV2(ctx context.Context, serial, cmd string) (ShellResult, error) {
	svc := "shell,v2,raw:" + cmd
	s, err := c.Open(ctx, serial, svc)
	if err != nil {
		return ShellResult{}, fmt.Errorf("run %s on %s: %w", serviceName(svc), serial, err)
	}
	defer s.Close()
	res, err := ParseShellOutput(s, shellOutputLimit)
	if err != nil {
		return res, fmt.Errorf("run %s on %s: %w", serviceName(svc), serial, err)
	}
	return res, nil
}

// v1ExitMarker separates a v1 shell command's output from the exit status
// the wrapper prints after it.
const v1ExitMarker = "\037edgeagent-exit="

// ShellV1 runs cmd through the original shell service for phones without
// shell_v2: stdout and stderr arrive merged, and the exit code is printed by
// a wrapper after the command.
func (c *Client) ShellV1(ctx context.Context, serial, cmd string) (ShellResult, error) {
	svc := "shell:" + cmd + `; printf '\n\037edgeagent-exit=%d\n' $?`
	s, err := c.Open(ctx, serial, svc)
	if err != nil {
		return ShellResult{}, fmt.Errorf("run %s on %s: %w", serviceName(svc), serial, err)
	}
	defer s.Close()
	b, err := io.ReadAll(io.LimitReader(s, shellOutputLimit+1))
	if err != nil {
		return ShellResult{}, fmt.Errorf("run %s on %s: %w", serviceName(svc), serial, err)
	}
	res, err := ParseShellV1Output(b)
	if err != nil {
		return res, fmt.Errorf("run %s on %s: %w", serviceName(svc), serial, err)
	}
	return res, nil
}

// ParseShellV1Output splits the output of a ShellV1 command into the
// command's own output and its exit code.
func ParseShellV1Output(b []byte) (ShellResult, error) {
	i := bytes.LastIndex(b, []byte(v1ExitMarker))
	if i < 0 {
		return ShellResult{Stdout: b}, errors.New("shell output ended without an exit status")
	}
	code := bytes.TrimRight(b[i+len(v1ExitMarker):], "\r\n")
	n, err := strconv.Atoi(string(code))
	if err != nil || n < 0 || n > 255 {
		return ShellResult{}, fmt.Errorf("parse exit status %q of shell command", clip(string(code)))
	}
	out := b[:i]
	// Drop the newline the wrapper printed (a PTY turns it into CRLF).
	if bytes.HasSuffix(out, []byte("\r\n")) {
		out = out[:len(out)-2]
	} else if bytes.HasSuffix(out, []byte("\n")) {
		out = out[:len(out)-1]
	}
	return ShellResult{Stdout: out, ExitCode: n}, nil
}

// ShellProcess is a command running on the phone through a shell v2 stream,
// read in the background. Close ends the stream; a command that ignores
// that must be killed by other means (kill on the phone).
type ShellProcess struct {
	s    *Stream
	done chan struct{}

	mu      sync.Mutex
	changed chan struct{}
	stdout  []byte
	stderr  []byte
	exit    int
	exited  bool
	err     error
}

// StartShellV2 starts cmd and returns at once. The stream lives as long as
// ctx; cancelling ctx ends it like Close.
func (c *Client) StartShellV2(ctx context.Context, serial, cmd string) (*ShellProcess, error) {
	svc := "shell,v2,raw:" + cmd
	s, err := c.Open(ctx, serial, svc)
	if err != nil {
		return nil, fmt.Errorf("start %s on %s: %w", serviceName(svc), serial, err)
	}
	p := &ShellProcess{s: s, done: make(chan struct{}), changed: make(chan struct{})}
	go p.read()
	return p, nil
}

const shellKeep = 64 << 10 // output kept per stream by a ShellProcess

func (p *ShellProcess) read() {
	defer close(p.done)
	for {
		id, data, err := ReadShellPacket(p.s, maxShellPacket)
		p.mu.Lock()
		switch {
		case err == io.EOF:
			p.err = errors.New("shell stream ended without an exit status")
		case err != nil:
			p.err = err
		case id == ShellStdout:
			p.stdout = appendCapped(p.stdout, data)
		case id == ShellStderr:
			p.stderr = appendCapped(p.stderr, data)
		case id == ShellExit:
			if len(data) == 1 {
				p.exit, p.exited = int(data[0]), true
			} else {
				p.err = fmt.Errorf("shell exit packet has %d bytes, want 1", len(data))
			}
		}
		end := err != nil || id == ShellExit
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
		if end {
			return
		}
	}
}

func appendCapped(b, data []byte) []byte {
	if room := shellKeep - len(b); room < len(data) {
		data = data[:max(room, 0)]
	}
	return append(b, data...)
}

// FirstLine waits for the first complete line of stdout and returns it
// without its newline.
func (p *ShellProcess) FirstLine(ctx context.Context) (string, error) {
	for {
		p.mu.Lock()
		if i := bytes.IndexByte(p.stdout, '\n'); i >= 0 {
			line := string(bytes.TrimRight(p.stdout[:i], "\r"))
			p.mu.Unlock()
			return line, nil
		}
		exited, err, ch := p.exited, p.err, p.changed
		stderr := string(p.stderr)
		p.mu.Unlock()
		if exited || err != nil {
			if err == nil {
				err = errors.New("command exited")
			}
			if stderr != "" {
				err = fmt.Errorf("%w: %s", err, clip(stderr))
			}
			return "", fmt.Errorf("read first line of output: %w", err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return "", ctxErr(ctx)
		}
	}
}

// Done is closed once the command exited or the stream ended.
func (p *ShellProcess) Done() <-chan struct{} { return p.done }

// Wait waits for the command to end and returns its result; the output kept
// is at most 64 KiB per stream.
func (p *ShellProcess) Wait(ctx context.Context) (ShellResult, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return ShellResult{}, ctxErr(ctx)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	res := ShellResult{Stdout: bytes.Clone(p.stdout), Stderr: bytes.Clone(p.stderr), ExitCode: p.exit}
	if !p.exited {
		return res, p.err
	}
	return res, nil
}

// Close ends the stream and waits for the reader to stop.
func (p *ShellProcess) Close() {
	_ = p.s.Close()
	<-p.done
}
