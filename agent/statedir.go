package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edgeagent/edgeagent/internal/atomicfile"
)

// State directory layout. Everything in it is private to the agent's user:
// directories 0700, files 0600.
const (
	// LockFile is held (an OS file lock) by the running agent; it holds its
	// pid.
	LockFile = "agent.lock"
	// SettingsFile holds the runtime settings the coordinator sent.
	SettingsFile = "settings.json"
	// SpoolDir holds captures being taken and uploads in progress.
	SpoolDir = "spool"
)

// ErrLocked means another agent process holds the state directory.
var ErrLocked = errors.New("state directory is in use by another edgeagent")

// LockedError says which process holds the state directory.
type LockedError struct {
	Dir string
	PID int // 0 when unknown
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("%s: %v (pid %d); stop it first or give this one another state_dir", e.Dir, ErrLocked, e.PID)
	}
	return fmt.Sprintf("%s: %v; stop it first or give this one another state_dir", e.Dir, ErrLocked)
}

func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// StateLock is the lock on a state directory held by the running agent.
type StateLock struct {
	f   *os.File
	dir string
}

// LockStateDir creates dir (0700) if needed and takes its lock, so that one
// agent process runs per state directory. A second caller gets a
// *LockedError naming the holder's pid. The lock is released by Unlock or
// when the process ends, however it ends.
func LockStateDir(dir string) (*StateLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := lockFile(f); err != nil {
		pid := readPID(f)
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, &LockedError{Dir: dir, PID: pid}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &StateLock{f: f, dir: dir}, nil
}

// HolderPID returns the pid written in dir's lock file and whether a process
// holds the lock now. It takes the lock for a moment when nobody holds it.
func HolderPID(dir string) (pid int, held bool, err error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("open lock file: %w", err)
	}
	defer f.Close()
	pid = readPID(f)
	if err := lockFile(f); err != nil {
		if errors.Is(err, errWouldBlock) {
			return pid, true, nil
		}
		return pid, false, fmt.Errorf("test lock: %w", err)
	}
	_ = unlockFile(f)
	return pid, false, nil
}

func readPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	return pid
}

// Unlock releases the lock.
func (l *StateLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := unlockFile(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// Dir returns the locked directory.
func (l *StateLock) Dir() string { return l.dir }

// loadSettings reads the settings file of dir; a missing file is no
// settings.
func loadSettings(dir string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, SettingsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	var m map[string]string
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decode settings %s: %w", filepath.Join(dir, SettingsFile), err)
	}
	return m, nil
}

// saveSettings writes m to dir's settings file (0600) atomically.
func saveSettings(dir string, m map[string]string) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode settings: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, SettingsFile), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save settings: %w", err)
	}
	return nil
}
