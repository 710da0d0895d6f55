package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// Job statuses.
const (
	StatusQueued     = "QUEUED"
	StatusInProgress = "IN_PROGRESS"
	StatusSucceeded  = "SUCCEEDED"
	StatusFailed     = "FAILED"
)

// Store errors callers branch on. A fenced write that matches no row returns
// fencing.ErrStale (wrapped) when the job exists, ErrNotFound when it does not.
var (
	ErrNotFound = errors.New("job not found")
	ErrNoJob    = errors.New("no queued job")
	ErrConflict = errors.New("job not in a state that allows this")
)

// JobSpec is a job to submit.
type JobSpec struct {
	ID   string        // optional; a random id is chosen when empty
	Task protocol.Task // validated by Submit
}

// Job is the stored state of one job.
type Job struct {
	ID             string
	Status         string
	Task           protocol.Task
	Generation     int64
	WorkerID       string // owner of the current lease, "" when none
	LeaseExpiresAt time.Time
	Result         json.RawMessage
	CompletedBy    string
	FailReason     string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Lease is a granted ownership of a job.
type Lease struct {
	Token     fencing.Token
	ExpiresAt time.Time // database clock
	Task      protocol.Task
}

// ArtifactRecord is a registered artifact.
type ArtifactRecord struct {
	JobID       string
	Generation  int64
	Owner       string
	Name        string
	Key         string
	Size        int64
	SHA256      string
	ContentType string
	ETag        string
	CreatedAt   time.Time
}

// WriteEvent records one fenced write attempt, accepted or not.
type WriteEvent struct {
	ID         int64
	JobID      string
	Verb       string // claim, reassign, reclaim, renew, artifact, result, fail
	Owner      string
	Generation int64
	Accepted   bool
	At         time.Time // database clock
}

// Store is the coordinator's job store. Every fenced method applies its write
// in one statement whose WHERE clause checks the token (job, generation,
// owner, status), records a write_events row for the attempt, and answers a
// zero-row update with fencing.ErrStale. Lease expiry is judged by the
// database clock.
type Store interface {
	// Submit inserts a queued job at generation 0.
	Submit(ctx context.Context, spec JobSpec) (Job, error)
	// ClaimNext grants the oldest queued job to owner (generation + 1).
	// ErrNoJob when none is queued.
	ClaimNext(ctx context.Context, owner string, ttl time.Duration) (Lease, error)
	// Claim grants the given queued job to owner (generation + 1).
	// ErrConflict when it is not queued.
	Claim(ctx context.Context, jobID, owner string, ttl time.Duration) (Lease, error)
	// Reassign grants a queued or in-progress job to newOwner (generation + 1),
	// whatever its current lease. ErrConflict when the job is finished.
	Reassign(ctx context.Context, jobID, newOwner string, ttl time.Duration) (Lease, error)
	// Renew extends a current, unexpired lease; it never changes generation.
	Renew(ctx context.Context, tok fencing.Token, ttl time.Duration) (time.Time, error)
	// Commit accepts a result for the current token: status SUCCEEDED.
	Commit(ctx context.Context, tok fencing.Token, result json.RawMessage) error
	// Fail ends the current lease: FAILED, or back to QUEUED when requeue.
	Fail(ctx context.Context, tok fencing.Token, reason string, requeue bool) error
	// RegisterArtifact records an artifact under the current token.
	RegisterArtifact(ctx context.Context, tok fencing.Token, a ArtifactRecord) error
	// Artifacts lists the artifacts registered for one generation of a job.
	Artifacts(ctx context.Context, jobID string, generation int64) ([]ArtifactRecord, error)
	// ReclaimExpired returns up to limit in-progress jobs whose lease expired
	// on the database clock to QUEUED (generation + 1, no owner) and returns
	// the tokens they were taken from.
	ReclaimExpired(ctx context.Context, limit int) ([]fencing.Token, error)
	// Get returns a job, or ErrNotFound.
	Get(ctx context.Context, jobID string) (Job, error)
	// WriteEvents lists every recorded attempt on a job, oldest first.
	WriteEvents(ctx context.Context, jobID string) ([]WriteEvent, error)
	// Close releases the store.
	Close() error
}
