// Package selfupdate is the file side of the agent's signed, staged
// self-updates (docs/updates.md): downloading a release binary with
// resumption, checking its size, SHA-256 and signature, placing it beside
// the running binary, swapping the two with the old one kept as <exe>.prev,
// the update record in the state directory, and the new binary's health
// rule that puts the previous binary back on its own.
package selfupdate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/edgeagent/edgeagent/internal/atomicfile"
	"github.com/edgeagent/edgeagent/protocol"
)

// RecordFile is the update record's name in the state directory.
const RecordFile = "update.json"

// maxRecordSize bounds the record read at start.
const maxRecordSize = 64 << 10

// MaxStarts is how many times a new binary may start without its hello
// being accepted: the start after that puts the previous binary back.
const MaxStarts = 2

// PrevSuffix names the previous binary kept beside the running one.
const PrevSuffix = ".prev"

// Record is the update record (state_dir/update.json): the agent's last
// update and where it stands. It outlives the process so that the new
// binary knows it is on trial, and the old one, put back, can say why.
type Record struct {
	// State is a protocol.Update* state: restarting while the new binary
	// is on trial, then done or rolled_back; refused, failed or
	// opted_out for an update that swapped nothing.
	State string `json:"state"`
	// From and Target are the versions updated from and to.
	From   string `json:"from,omitempty"`
	Target string `json:"target,omitempty"`
	// Outcome says what happened, in a sentence.
	Outcome   string `json:"outcome,omitempty"`
	RolloutID string `json:"rollout_id,omitempty"`
	// Starts counts the starts of the new binary while on trial.
	Starts int `json:"starts,omitempty"`
	// HealthDeadlineUnixMilli is when the new binary's trial ends: set at
	// its first start to that time plus update.health_timeout.
	HealthDeadlineUnixMilli int64 `json:"health_deadline_unix_ms,omitempty"`
	// AtUnixMilli is when State was entered.
	AtUnixMilli int64 `json:"at_unix_ms,omitempty"`
}

// Status is the record as hello and heartbeat report it.
func (r Record) Status() *protocol.UpdateStatus {
	return &protocol.UpdateStatus{State: r.State, Target: r.Target, Outcome: r.Outcome, AtUnixMilli: r.AtUnixMilli, RolloutID: r.RolloutID}
}

// LoadRecord reads dir's update record; ok is false when there is none.
func LoadRecord(dir string) (r Record, ok bool, err error) {
	f, err := os.Open(filepath.Join(dir, RecordFile))
	if errors.Is(err, os.ErrNotExist) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("read update record: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRecordSize+1))
	if err != nil {
		return Record{}, false, fmt.Errorf("read update record: %w", err)
	}
	if len(data) > maxRecordSize {
		return Record{}, false, fmt.Errorf("read update record: %s is larger than %d bytes", RecordFile, maxRecordSize)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return Record{}, false, fmt.Errorf("decode update record %s: %w", filepath.Join(dir, RecordFile), err)
	}
	return r, true, nil
}

// SaveRecord writes dir's update record (0600) atomically, synced to disk.
func SaveRecord(dir string, r Record) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode update record: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, RecordFile), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save update record: %w", err)
	}
	return nil
}

// Trial is the start of a binary as the update record sees it.
type Trial struct {
	// Record is the record after this start (zero when there is none).
	Record Record
	// OnTrial: this binary is the update's target and has not yet had a
	// hello accepted; it must within Deadline, or be rolled back.
	OnTrial  bool
	Deadline time.Time
}

// ErrRolledBack is Begin's error when it put the previous binary back: the
// process must exit (with the update exit code) so that the service
// manager starts the previous binary.
var ErrRolledBack = errors.New("the new binary did not come up healthy: the previous binary was put back")

// Begin reads the update record at the start of the binary exe of version
// version (the first thing edgeagent run does). A binary that is the
// target of an update under trial counts its start; on the start after
// MaxStarts, or after the trial's deadline, it puts the previous binary
// back (Rollback), records rolled_back and returns ErrRolledBack. The
// first start sets the deadline to now + healthTimeout. A binary that is
// not the target while the record says restarting (the swap did not
// happen) records failed.
func Begin(dir, exe, version string, healthTimeout time.Duration, now time.Time) (Trial, error) {
	r, ok, err := LoadRecord(dir)
	if err != nil || !ok || r.State != protocol.UpdateRestarting {
		return Trial{Record: r}, err
	}
	if version != r.Target {
		r.State, r.AtUnixMilli = protocol.UpdateFailed, now.UnixMilli()
		r.Outcome = fmt.Sprintf("%s started instead of %s: the new binary was not put in place", version, r.Target)
		return Trial{Record: r}, SaveRecord(dir, r)
	}
	r.Starts++
	if r.HealthDeadlineUnixMilli == 0 {
		r.HealthDeadlineUnixMilli = now.Add(healthTimeout).UnixMilli()
	}
	deadline := time.UnixMilli(r.HealthDeadlineUnixMilli)
	why := ""
	switch {
	case r.Starts > MaxStarts:
		why = fmt.Sprintf("%s started %d times without its hello being accepted", r.Target, r.Starts-1)
	case !now.Before(deadline):
		why = fmt.Sprintf("%s had no hello accepted by the coordinator within update.health_timeout", r.Target)
	}
	if why != "" {
		r, err := RollBack(dir, exe, r, why, now)
		return Trial{Record: r}, err
	}
	if err := SaveRecord(dir, r); err != nil {
		return Trial{Record: r}, err
	}
	return Trial{Record: r, OnTrial: true, Deadline: deadline}, nil
}

// RollBack puts exe's previous binary back (Rollback), records rolled_back
// with why in dir and returns the record and ErrRolledBack, or the error
// that kept the previous binary from being put back (recorded as failed).
func RollBack(dir, exe string, r Record, why string, now time.Time) (Record, error) {
	r.AtUnixMilli, r.HealthDeadlineUnixMilli = now.UnixMilli(), 0
	if err := Rollback(exe); err != nil {
		r.State = protocol.UpdateFailed
		r.Outcome = why + "; putting the previous binary back failed: " + err.Error()
		if serr := SaveRecord(dir, r); serr != nil {
			return r, errors.Join(err, serr)
		}
		return r, err
	}
	r.State = protocol.UpdateRolledBack
	r.Outcome = why + fmt.Sprintf(": %s was put back", r.From)
	if err := SaveRecord(dir, r); err != nil {
		return r, err
	}
	return r, ErrRolledBack
}

// Healthy records that the binary on trial had its hello accepted: the
// update is done.
func Healthy(dir string, r Record, now time.Time) (Record, error) {
	r.State, r.AtUnixMilli = protocol.UpdateDone, now.UnixMilli()
	r.Outcome = fmt.Sprintf("updated from %s to %s", r.From, r.Target)
	r.HealthDeadlineUnixMilli = 0
	return r, SaveRecord(dir, r)
}
