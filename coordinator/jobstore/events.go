package jobstore

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Job event types (docs/api.md, "Events"). They are derived from the accepted
// rows of write_events joined with the job, so an event's id is the
// write_events id and a stream resumes exactly after the last id it gave.
const (
	EventQueued             = "queued"         // submitted
	EventGranted            = "granted"        // claim, reassign or takeover: a new generation
	EventReclaimed          = "reclaimed"      // a lease taken away (expired, agent restarted); the job is queued again
	EventAttemptFailed      = "attempt_failed" // the agent failed the attempt and the job is queued again
	EventArtifactRegistered = "artifact"       // an artifact registered
	EventStep               = "step"           // a step of an interactive session done (RecordEvent)
	EventResolved           = "resolved"       // a person's decision on an effect in doubt
	EventSucceeded          = "succeeded"
	EventFailed             = "failed"
	EventCancelled          = "cancelled"
	EventTimedOut           = "timed_out"
	EventNeedsDecision      = "needs_decision"
)

// EndEvent is the event type of the end state status ("" for a live one).
func EndEvent(status string) string {
	if !Finished(status) {
		return ""
	}
	return strings.ToLower(status)
}

// EventQuery selects job events for EventStore.Events, oldest first.
type EventQuery struct {
	// JobID selects one job's events; "" selects every job.
	JobID string
	// Projects, when not nil, keeps only the events of jobs of these
	// projects (an empty, non-nil list selects nothing).
	Projects []string
	// AfterID returns only events with a larger id (the SSE Last-Event-ID).
	AfterID int64
	// UpTo, when positive, returns only events with an id at most UpTo.
	UpTo int64
	// Limit bounds the answer; ≤ 0 means 1000.
	Limit int
	// All returns every write_events row after AfterID, the rows that are
	// no job event included (with Type ""), and rows of unknown jobs: the
	// broker uses it to see every id (it settles gaps, docs/api.md, "Events").
	// JobID and Projects must be empty with All.
	All bool
}

// DefaultEventLimit is the page size of an EventQuery without a limit.
const DefaultEventLimit = 1000

// EventArtifact names the artifact of an artifact event.
type EventArtifact struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// Event is one job event.
type Event struct {
	ID         int64          `json:"id"`
	Type       string         `json:"type"` // Event*; "" for a row that is no event (EventQuery.All)
	JobID      string         `json:"job_id"`
	Project    string         `json:"project,omitempty"`
	Generation int64          `json:"generation"`
	Owner      string         `json:"owner,omitempty"` // <agent_id>/<boot_id> of the token the row names
	Agent      string         `json:"agent,omitempty"` // agent id of the owner
	Phone      string         `json:"phone,omitempty"` // the phone of a grant, when it is the job's current one
	At         time.Time      `json:"at"`              // database clock
	Status     string         `json:"status,omitempty"`
	Reason     string         `json:"reason,omitempty"`
	Artifact   *EventArtifact `json:"artifact,omitempty"`
	Detail     string         `json:"detail,omitempty"` // a step's outcome, a reclaim's cause
	Message    string         `json:"message"`          // one human line
}

// RawEvent is a write_events row with what the job says about it, as the
// stores read it; NewEvent classifies it.
type RawEvent struct {
	ID         int64
	JobID      string
	Verb       string
	Owner      string
	Generation int64
	Accepted   bool
	At         time.Time
	Detail     string
	JobFound   bool   // the job exists
	Project    string // the job's
	JobStatus  string // the job's status now
	JobGen     int64  // the job's generation now
	JobPhone   string // the job's phone now
	FailReason string // the job's last failure reason
	ArtSize    int64  // size of the artifact named Detail (verb artifact), -1 when unknown
	// Ended: the job is finished and no later accepted row of an ending
	// verb exists, so this row ended the job (EventEndingVerb).
	Ended bool
}

// NewEvent classifies a row; Type "" means it is no job event.
func NewEvent(r RawEvent) Event {
	e := Event{ID: r.ID, JobID: r.JobID, Project: r.Project, Generation: r.Generation, At: r.At, Owner: r.Owner}
	if agent, _, ok := strings.Cut(r.Owner, "/"); ok {
		e.Agent = agent
	}
	if !r.Accepted || !r.JobFound || contains(NonEventVerbs, r.Verb) {
		return e
	}
	switch r.Verb {
	case VerbSubmit:
		e.Type = EventQueued
		e.Message = "queued"
		if r.Detail != "" {
			e.Message += " by " + r.Detail
		}
		return e
	case VerbClaim, VerbReassign:
		e.Type = EventGranted
		e.Message = fmt.Sprintf("granted g%d to agent %s", r.Generation, e.Agent)
		if r.Generation == r.JobGen && r.JobPhone != "" {
			e.Phone = r.JobPhone
			e.Message += " on phone " + r.JobPhone
		}
		if r.Verb == VerbReassign {
			e.Detail = "reassign"
		}
		return e
	case VerbArtifact:
		e.Type = EventArtifactRegistered
		e.Message = fmt.Sprintf("artifact registered under g%d", r.Generation)
		if r.Detail != "" {
			e.Artifact = &EventArtifact{Name: r.Detail, Size: r.ArtSize}
			e.Message = fmt.Sprintf("artifact %s (%d bytes) registered under g%d", r.Detail, r.ArtSize, r.Generation)
		}
		return e
	case VerbStep:
		e.Type = EventStep
		e.Detail = r.Detail
		e.Message = fmt.Sprintf("g%d step %s", r.Generation, r.Detail)
		return e
	case VerbResolve:
		e.Type = EventResolved
		e.Detail = r.Detail
		e.Message = "effect decided: " + r.Detail
		return e
	}
	if r.Ended {
		e.Type = EndEvent(r.JobStatus)
		e.Status = r.JobStatus
		switch r.Verb {
		case VerbCancel:
			e.Reason = r.Detail
		case VerbResult:
		default:
			e.Reason = r.FailReason
			if e.Reason == "" {
				e.Reason = r.Detail
			}
		}
		e.Message = fmt.Sprintf("%s at g%d", e.Type, r.Generation)
		if e.Reason != "" {
			e.Message += ": " + e.Reason
		}
		return e
	}
	switch r.Verb {
	case VerbResult:
		e.Type = EventSucceeded
		e.Status = StatusSucceeded
		e.Message = fmt.Sprintf("succeeded at g%d", r.Generation)
	case VerbFail:
		e.Type = EventAttemptFailed
		e.Message = fmt.Sprintf("g%d failed; queued again", r.Generation)
	case VerbCancel:
		e.Type = EventCancelled
		e.Status = StatusCancelled
		e.Reason = r.Detail
		e.Message = fmt.Sprintf("cancelled at g%d", r.Generation)
	case VerbReclaim:
		e.Type = EventReclaimed
		e.Detail = r.Detail
		e.Message = fmt.Sprintf("g%d reclaimed from agent %s", r.Generation, e.Agent)
		if r.Detail != "" {
			e.Message += ": " + r.Detail
		}
	default:
		e.Type = r.Verb
		e.Detail = r.Detail
		e.Message = fmt.Sprintf("%s at g%d", r.Verb, r.Generation)
	}
	return e
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// JobEvent is an event a component records besides the fenced writes: a
// step of an interactive session.
type JobEvent struct {
	JobID      string
	Verb       string // VerbStep
	Owner      string // the token's owner
	Generation int64  // the token's generation
	Detail     string // what happened: "3 tap: ok"
}

// CheckJobEvent validates an event to record.
func CheckJobEvent(e JobEvent) error {
	if e.Verb != VerbStep {
		return fmt.Errorf("verb: %q cannot be recorded; only %q", e.Verb, VerbStep)
	}
	if e.JobID == "" {
		return fmt.Errorf("job id is empty")
	}
	if len(e.Detail) > 1024 {
		return fmt.Errorf("detail: %d bytes, at most 1024", len(e.Detail))
	}
	return nil
}

// EventStore reads job events and records the ones that are not fenced
// writes. Both stores implement it (docs/api.md, "Events").
type EventStore interface {
	// Events lists events oldest first (by id) as q selects them.
	Events(ctx context.Context, q EventQuery) ([]Event, error)
	// LastEventID returns the highest write_events id, 0 when none.
	LastEventID(ctx context.Context) (int64, error)
	// RecordEvent records e (accepted) and returns its id. ErrNotFound
	// when the job does not exist.
	RecordEvent(ctx context.Context, e JobEvent) (int64, error)
	// PublishEnd writes the outbox message (pending) that publishes the
	// end event e of a job that did not succeed, under key, unless a
	// message with key exists already (FailOutbox wrote it with the
	// failure) or the job is no longer in e.Status. It reports whether it
	// wrote one.
	PublishEnd(ctx context.Context, e Event, key string) (bool, error)
}

// OutboxEndEvent is the outbox event ("event" of the payload) that
// publishes a job's end in status: OutboxEventFailed for FAILED, the
// lowercased status (cancelled, timed_out, needs_decision) for the others.
func OutboxEndEvent(status string) string {
	if status == StatusFailed {
		return OutboxEventFailed
	}
	return strings.ToLower(status)
}
