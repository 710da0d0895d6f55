package logfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// Defaults of Options.
const (
	DefaultMaxSize  = 10 << 20 // bytes
	DefaultMaxFiles = 5
)

// Options configure a File.
type Options struct {
	// MaxSize is the size in bytes past which the file is rotated.
	// Default DefaultMaxSize.
	MaxSize int64
	// MaxFiles is how many rotated files (name.1 … name.MaxFiles) are
	// kept besides the current one. Default DefaultMaxFiles.
	MaxFiles int
}

// File is a log file rotated by size. Its methods are safe for concurrent
// use; each Write lands whole in one file.
type File struct {
	name string
	opts Options

	mu   sync.Mutex
	f    *os.File
	size int64
}

// Open opens name for appending, creating it and its directory (mode 0700;
// the file 0600) when missing.
func Open(name string, opts Options) (*File, error) {
	if opts.MaxSize <= 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.MaxFiles <= 0 {
		opts.MaxFiles = DefaultMaxFiles
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	l := &File{name: name, opts: opts}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *File) open() error {
	f, err := os.OpenFile(l.name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open log file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat log file: %w", err)
	}
	l.f, l.size = f, fi.Size()
	return nil
}

// Write appends p, rotating first when p would take the file past MaxSize.
// A write larger than MaxSize goes whole into a fresh file.
func (l *File) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return 0, errors.New("write log file: closed")
	}
	if l.size > 0 && l.size+int64(len(p)) > l.opts.MaxSize {
		// A failed rotation (on Windows, another program may hold the
		// file open) keeps appending to the current file rather than
		// losing the line; the next write tries again.
		_ = l.rotate()
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	if err != nil {
		return n, fmt.Errorf("write log file: %w", err)
	}
	return n, nil
}

// rotate shifts name.i to name.i+1, dropping the last, moves the current
// file to name.1 and opens a new one.
func (l *File) rotate() error {
	if err := l.f.Close(); err != nil {
		return l.reopen(fmt.Errorf("close log file: %w", err))
	}
	oldest := l.rotated(l.opts.MaxFiles)
	if err := os.Remove(oldest); err != nil && !errors.Is(err, os.ErrNotExist) {
		return l.reopen(fmt.Errorf("remove old log file: %w", err))
	}
	for i := l.opts.MaxFiles - 1; i >= 1; i-- {
		if err := os.Rename(l.rotated(i), l.rotated(i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return l.reopen(fmt.Errorf("rotate log file: %w", err))
		}
	}
	if err := os.Rename(l.name, l.rotated(1)); err != nil {
		return l.reopen(fmt.Errorf("rotate log file: %w", err))
	}
	return l.open()
}

// reopen opens the current file again after a failed rotation and returns
// cause.
func (l *File) reopen(cause error) error {
	if err := l.open(); err != nil {
		l.f = nil
		return errors.Join(cause, err)
	}
	return cause
}

func (l *File) rotated(i int) string { return l.name + "." + strconv.Itoa(i) }

// Close closes the file; later writes fail.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return fmt.Errorf("close log file: %w", err)
	}
	return nil
}
