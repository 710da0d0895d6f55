package session

import (
	"errors"
	"fmt"
)

// ErrNotFound: no session has this id (or its job is not a session's).
var ErrNotFound = errors.New("no such session")

// LostError answers every call on a session whose job's lease moved away
// from the grant the session was opened on: the agent died or restarted,
// the phone went away, or the job was reassigned. No step of the session
// runs after it, on that phone or another; the session stays lost.
type LostError struct {
	SessionID string `json:"-"`
	JobID     string `json:"job_id"`
	// Generation is the generation of the grant the session held.
	Generation int64 `json:"generation"`
	// LastStep is the seq of the last step whose reply the coordinator
	// received (0: none, or not known after a coordinator restart).
	LastStep int `json:"last_step"`
	// Reason says how the loss was seen.
	Reason string `json:"reason"`
}

func (e *LostError) Error() string {
	return fmt.Sprintf("session %s lost at generation %d after step %d: %s", e.SessionID, e.Generation, e.LastStep, e.Reason)
}

// EndedError answers a call on a session that is over without being lost:
// closed by its caller, or its job ended otherwise (idle timeout, cancelled,
// a step failure that failed the job).
type EndedError struct {
	SessionID string
	Status    string // StatusClosed or StatusEnded
	JobStatus string // the job's status
	Reason    string // the job's failure reason, when it has one
}

func (e *EndedError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("session %s is %s (job %s: %s)", e.SessionID, e.Status, e.JobStatus, e.Reason)
	}
	return fmt.Sprintf("session %s is %s (job %s)", e.SessionID, e.Status, e.JobStatus)
}

// BusyError answers an Open that got no phone: none connected matches the
// selector, or none of those became free within the wait.
type BusyError struct{ Detail string }

func (e *BusyError) Error() string { return "no phone for the session: " + e.Detail }

// UnavailableError: the agent holding the session's phone did not take a
// step (no reply, not reachable, busy finishing) while the job's lease is
// still the session's. The session stays open; the call may be retried.
type UnavailableError struct {
	Detail string
	// MayHaveRun is set when the request went out and no reply came back:
	// the step may have run; the seq of the next step's reply tells.
	MayHaveRun bool
}

func (e *UnavailableError) Error() string { return e.Detail }

// InputError is a request the manager refuses before doing anything;
// Field names what was wrong ("steps[1].op", "idle_timeout").
type InputError struct {
	Field string
	Msg   string
}

func (e *InputError) Error() string { return e.Field + ": " + e.Msg }

func inputErr(field, format string, a ...any) error {
	return &InputError{Field: field, Msg: fmt.Sprintf(format, a...)}
}
