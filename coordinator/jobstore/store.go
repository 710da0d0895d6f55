package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	// StatusCancelled: an operator or researcher cancelled the job.
	StatusCancelled = "CANCELLED"
	// StatusTimedOut: the job's deadline passed before it succeeded.
	StatusTimedOut = "TIMED_OUT"
	// StatusNeedsDecision: an effect step of the job is in doubt and waits
	// for a person to resolve it (docs/effects.md).
	StatusNeedsDecision = "NEEDS_DECISION"
)

// Statuses lists every job status, the end states after the two live ones.
var Statuses = []string{StatusQueued, StatusInProgress, StatusSucceeded, StatusFailed, StatusCancelled, StatusTimedOut, StatusNeedsDecision}

// Finished reports whether status is an end state: no grant, renewal or
// write is accepted for the job any more (NEEDS_DECISION leaves only when a
// person resolves the effect).
func Finished(status string) bool {
	return status != StatusQueued && status != StatusInProgress
}

// Job defaults.
const (
	// DefaultProject is the project of a job submitted without one.
	DefaultProject = "default"
	// DefaultMaxAttempts is the grant limit of a job submitted without one.
	DefaultMaxAttempts = 3
)

// Failure is how an attempt of a job ended without a result
// (docs/operations.md, "Deadlines, attempts and end states"). Store.Fail
// decides the job's next state from it:
//
//   - Cause protocol.CauseDeadline: TIMED_OUT.
//   - Reason starting with ReasonNeedsDecision (an effect is in doubt):
//     NEEDS_DECISION, until a person resolves the effect.
//   - Class protocol.FailClassJob, or an empty class without Requeue: FAILED
//     at once.
//   - Class protocol.FailClassInfrastructure, or an empty class with
//     Requeue (a release by an agent that does not classify): retried, that
//     is back to QUEUED at generation + 1 with no owner, not granted again
//     before the retry backoff (RetryPolicy) has passed, while the job has
//     attempts left; FAILED with every attempt's cause listed otherwise.
//     A hand-back before the agent's PC sleeps (cause
//     protocol.CauseAgentSleep), on shutdown (CauseAgentShutdown) or
//     before a self-update (CauseAgentUpdate) is retried without the
//     backoff (Immediate): the job did nothing wrong and another agent
//     can take it at once.
//   - NotRun (an assign the agent refused because it or the granted phone
//     was not ready, docs/protocol.md, assign): back to QUEUED at
//     generation + 1 with no owner at once, the grant not counted as an
//     attempt and not listed among the attempt ends: the job never ran.
type Failure struct {
	Reason  string // free text, kept as the job's fail reason
	Class   string // protocol.FailClassInfrastructure, protocol.FailClassJob or ""
	Cause   string // protocol.Cause*, or a coordinator cause such as CauseAssignRefused
	Requeue bool   // legacy: release for a retry when Class is empty
	NotRun  bool   // the grant was refused before the job ran: requeued, no attempt spent
}

// CauseAssignRefused is the cause of an attempt whose agent did not accept
// the assign: an infrastructure failure, retried.
const CauseAssignRefused = "assign_refused"

// OutcomeRetry is the Outcome of a Failure that is retried: back to the
// queue while the job has attempts left, else StatusFailed.
const OutcomeRetry = "RETRY"

// OutcomeRequeue is the Outcome of a Failure.NotRun: back to the queue at
// once, the grant not counted as an attempt.
const OutcomeRequeue = "REQUEUE"

// Outcome is the state Store.Fail moves the job to for f: StatusTimedOut,
// StatusNeedsDecision, StatusFailed, OutcomeRetry or OutcomeRequeue.
func (f Failure) Outcome() string {
	switch {
	case f.NotRun:
		return OutcomeRequeue
	case f.Cause == protocol.CauseDeadline:
		return StatusTimedOut
	case f.Cause == protocol.CauseNeedsDecision, strings.HasPrefix(f.Reason, ReasonNeedsDecision):
		return StatusNeedsDecision
	case f.Class == protocol.FailClassInfrastructure, f.Class == "" && f.Requeue:
		return OutcomeRetry
	}
	return StatusFailed
}

// Retried reports whether f is an infrastructure failure, which is retried
// while the job has attempts left.
func (f Failure) Retried() bool { return f.Outcome() == OutcomeRetry }

// Immediate reports whether f is retried without the retry backoff: a job
// the agent handed back because it is shutting down or its PC is going to
// sleep or updating itself (nothing is wrong with the job or the phone;
// docs/design.md, The stop path; docs/updates.md).
func (f Failure) Immediate() bool { return f.AgentLeaving() && f.Retried() }

// AgentLeaving reports whether f is a job handed back because its agent
// is leaving: shutting down, its PC going to sleep, or updating itself.
func (f Failure) AgentLeaving() bool {
	switch f.Cause {
	case protocol.CauseAgentSleep, protocol.CauseAgentShutdown, protocol.CauseAgentUpdate:
		return true
	}
	return false
}

// RecordedClass is the class recorded for f: its own, or the class its
// outcome implies when it has none (infrastructure for a legacy requeue,
// job otherwise).
func (f Failure) RecordedClass() string {
	if f.Class != "" {
		return f.Class
	}
	if f.Retried() || f.NotRun {
		return protocol.FailClassInfrastructure
	}
	return protocol.FailClassJob
}

// RetryPolicy is the backoff before a retried attempt: the job is not
// granted again before Backoff × 2^(attempts − 1), at most BackoffMax,
// has passed on the database clock.
type RetryPolicy struct {
	Backoff    time.Duration
	BackoffMax time.Duration
}

// DefaultRetryPolicy is the backoff of a store no policy was set on.
var DefaultRetryPolicy = RetryPolicy{Backoff: 2 * time.Second, BackoffMax: time.Minute}

// AttemptEnd is why one attempt (grant) of a job ended without a result,
// kept with the job in order.
type AttemptEnd struct {
	Generation int64  `json:"generation"` // the attempt's token generation
	Class      string `json:"class,omitempty"`
	Cause      string `json:"cause,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// String is the attempt as listed in a fail reason: "g3 phone_unplugged:
// adb: device offline".
func (a AttemptEnd) String() string {
	s := fmt.Sprintf("g%d", a.Generation)
	if a.Cause != "" {
		s += " " + a.Cause
	}
	if a.Reason != "" {
		s += ": " + a.Reason
	}
	return s
}

// Store errors callers branch on. A fenced write that matches no row returns
// fencing.ErrStale (wrapped) when the job exists, ErrNotFound when it does not.
var (
	ErrNotFound      = errors.New("job not found")
	ErrNoJob         = errors.New("no queued job")
	ErrConflict      = errors.New("job not in a state that allows this")
	ErrNoSession     = errors.New("no session for this agent")
	ErrAgentNotFound = errors.New("agent not found")
	// ErrSchemaOutdated: the database's schema is behind this binary (an
	// empty database included). Only the commands that migrate (edgecoord
	// migrate, serve) bring it up to date; the others refuse to run on it.
	ErrSchemaOutdated = errors.New("database schema is older than this binary: run `edgecoord migrate`")
)

// JobSpec is a job to submit.
type JobSpec struct {
	ID   string        // optional; a random id is chosen when empty
	Task protocol.Task // checked by Submit with CheckSubmit; Task.TimeoutMS is the deadline
	// Project groups jobs for access and fairness; "" means DefaultProject.
	Project string
	// Priority: higher runs first; oldest first within one priority.
	Priority int
	// NotBefore: the job is not granted before this time (database clock);
	// zero means at once.
	NotBefore time.Time
	// MaxAttempts bounds the grants of the job; 0 means DefaultMaxAttempts.
	MaxAttempts int
	// SubmittedBy names who submitted the job (an API token's name, "cli").
	SubmittedBy string
	// ScheduleID and ScheduledAt name the schedule and the slot that fired
	// the job; only a store's FireSlot sets them (docs/schedules.md).
	ScheduleID  string
	ScheduledAt time.Time
	// AllowInteractive lets an interactive task through CheckSubmit. Only
	// the session manager (coordinator/session) sets it: it is what sends
	// an interactive job its steps (docs/sessions.md). It is not stored.
	AllowInteractive bool
}

// CheckSubmit checks a job before it is queued: its id, when it has one,
// must be a valid job id (protocol.CheckJobID, docs/protocol.md section 2);
// its task must be valid (protocol.Task.Validate), and it must not be
// interactive unless the session manager submits it (AllowInteractive):
// only a session sends an interactive job its steps, so one submitted
// otherwise would hold its phone until its idle timeout and fail. Every
// store's Submit calls it, so every way of submitting refuses the same
// jobs.
func CheckSubmit(spec JobSpec) error {
	if spec.ID != "" {
		if err := protocol.CheckJobID(spec.ID); err != nil {
			return fmt.Errorf("id: %w", err)
		}
	}
	t := spec.Task
	if err := t.Validate(); err != nil {
		return err
	}
	if spec.Project != "" {
		if err := CheckProject(spec.Project); err != nil {
			return fmt.Errorf("project: %w", err)
		}
	}
	if spec.MaxAttempts < 0 {
		return fmt.Errorf("max_attempts: %d is negative", spec.MaxAttempts)
	}
	if t.Interactive && !spec.AllowInteractive {
		return fmt.Errorf("interactive: interactive jobs cannot be submitted as jobs: a phone is driven step by step through a session (POST /api/v1/sessions, docs/sessions.md); submit fixed steps as a regular job (interactive: false)")
	}
	return nil
}

// Job is the stored state of one job.
type Job struct {
	ID             string
	Status         string
	Task           protocol.Task
	Generation     int64
	WorkerID       string // owner of the current lease, "" when none
	Device         string // phone (adb serial) the grant was counted against, "" when none
	LeaseExpiresAt time.Time
	Result         json.RawMessage
	CompletedBy    string
	FailReason     string
	CreatedAt      time.Time
	UpdatedAt      time.Time

	Project     string
	Priority    int
	NotBefore   time.Time // zero: none
	MaxAttempts int
	Attempts    int       // grants so far
	DeadlineAt  time.Time // set at the first grant when the task has a timeout; zero: none
	SubmittedBy string
	// AttemptEnds lists why each attempt that ended without a result
	// ended, oldest first.
	AttemptEnds []AttemptEnd
	// ScheduleID and ScheduledAt name the schedule and the slot that fired
	// the job; "" and zero for a job submitted otherwise.
	ScheduleID  string
	ScheduledAt time.Time
}

// CheckProject accepts a project name: 1 to 64 characters from
// [A-Za-z0-9_.-], starting with a letter or digit.
func CheckProject(p string) error {
	if len(p) == 0 || len(p) > 64 {
		return fmt.Errorf("%q must be 1 to 64 characters", p)
	}
	for i, r := range p {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !ok && (i == 0 || r != '_' && r != '.' && r != '-') {
			return fmt.Errorf("%q: character %d must be a letter, digit, or (after the first) one of _ . -", p, i+1)
		}
	}
	return nil
}

// Lease is a granted ownership of a job.
type Lease struct {
	Token     fencing.Token
	ExpiresAt time.Time // database clock
	Task      protocol.Task
	Device    string // phone the scheduler counted the job against ("" when it chose none)
	// DeadlineAt is the job's deadline (database clock), zero when it has
	// none. The assign tells the agent the time left: DeadlineAt minus
	// ExpiresAt plus the lease TTL.
	DeadlineAt time.Time
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
	Verb       string // claim, reassign, reclaim, renew, upload, artifact, result, fail, cancel
	Owner      string
	Generation int64
	Accepted   bool
	At         time.Time // database clock
	Detail     string    // why: "forbidden: ...", "lease expired", "agent restarted", a cancel reason
	// Class and Cause classify the end of an attempt (verbs fail, reclaim,
	// timeout): protocol.FailClass* and protocol.Cause*; "" otherwise.
	Class string
	Cause string
}

// Agent is the registry entry of one agent. It lives in the store, so every
// coordinator sharing the store sees every agent, whichever of them took the
// agent's last hello or heartbeat.
type Agent struct {
	ID            string
	BootID        string // current session; "" before the first hello
	Version       string
	Devices       []protocol.Device // as last reported
	Capabilities  []string
	Slots         int
	Draining      bool              // set by the operator: the scheduler grants it nothing new
	AgentDraining bool              // reported by the agent (drain, shutdown): nothing new either
	Settings      map[string]string // operator settings, sent with every hello reply
	CoordinatorID string            // the coordinator that took the last hello
	ConnectedAt   time.Time         // database clock at the hello of this boot; zero before
	LastSeen      time.Time         // database clock at the last hello or heartbeat; zero before
	SeenAgo       time.Duration     // database clock at the read minus LastSeen
}

// Owner returns the owner string of the agent's current session, "" when it
// has none.
func (a Agent) Owner() string {
	if a.BootID == "" {
		return ""
	}
	return fencing.Owner(a.ID, a.BootID)
}

// Online reports whether the agent has a session and was heard from within
// offlineAfter, both judged by the database clock.
func (a Agent) Online(offlineAfter time.Duration) bool {
	return a.BootID != "" && !a.LastSeen.IsZero() && a.SeenAgo <= offlineAfter
}

// AgentHello is what a hello records.
type AgentHello struct {
	AgentID       string
	BootID        string
	Version       string
	Devices       []protocol.Device
	Capabilities  []string
	Slots         int
	Draining      bool // the agent takes no new jobs
	CoordinatorID string
}

// AgentBeat is what a heartbeat records.
type AgentBeat struct {
	AgentID  string
	BootID   string
	Devices  []protocol.Device // nil keeps the stored phones
	Draining bool              // the agent takes no new jobs
}

// ClaimRequest asks for a job for one agent session.
type ClaimRequest struct {
	Owner string // <agent_id>/<boot_id>
	// Devices are the agent's phones. Only phones in state "device" that
	// hold no in-progress job of Owner are matched against job selectors.
	Devices []protocol.Device
	Slots   int // Owner holds at most this many in-progress jobs afterwards
	TTL     time.Duration
	// Capabilities are those the agent announced in its hello. A job with
	// effect steps (protocol.Task.HasEffects) is granted only to an agent
	// with protocol.CapabilityEffect: one without it would run the steps
	// unguarded.
	Capabilities []string
	// ProjectLimits bounds the in-progress jobs of the projects it names,
	// counted across every agent and coordinator sharing the store;
	// DefaultProjectLimit bounds every other project. 0 means no limit
	// (a project named with 0 is exempt from the default). See
	// docs/operations.md, "Priorities, projects and not_before".
	ProjectLimits       map[string]int
	DefaultProjectLimit int
	// DeviceProjects, by serial, restricts the projects whose jobs a phone
	// may take (the coordinator's phone rule, docs/operations.md, "Which
	// phones a project may use"); a phone without an entry, or a nil map,
	// takes jobs of every project.
	DeviceProjects map[string]DeviceProjects
}

// DeviceProjects are the projects a phone may take jobs of: with Only,
// exactly Projects; otherwise every project but Projects.
type DeviceProjects struct {
	Projects []string
	Only     bool
}

// Allows reports whether a phone with dp may take a job of project.
func (dp DeviceProjects) Allows(project string) bool {
	return slices.Contains(dp.Projects, project) == dp.Only
}

// Limited reports whether r bounds the jobs of any project.
func (r ClaimRequest) Limited() bool {
	if r.DefaultProjectLimit > 0 {
		return true
	}
	for _, n := range r.ProjectLimits {
		if n > 0 {
			return true
		}
	}
	return false
}

// JobFilter selects jobs for ListJobs. Zero fields select everything.
type JobFilter struct {
	Statuses []string
	AgentID  string // jobs whose current owner is a session of this agent
	Project  string // jobs of this project
	Limit    int    // at most this many, oldest first; ≤ 0 means no limit
}

// Store is the coordinator's job store: what the coordinator and the
// management commands use. Grants go through ClaimFor and TakeOverExpired,
// which honour the agents' phones, slots and sessions; the lab's direct
// grants (Claim, ClaimNext) and unfenced write live in sqlstore.Lab, out of
// reach of production code. Every fenced method applies its write
// in one statement whose WHERE clause checks the token (job, generation,
// owner, status), records a write_events row for the attempt, and answers a
// zero-row update with fencing.ErrStale. Lease expiry is judged by the
// database clock.
type Store interface {
	// Submit inserts a queued job at generation 0. The task is checked with
	// CheckSubmit.
	Submit(ctx context.Context, spec JobSpec) (Job, error)
	// Reassign grants a queued or in-progress job to newOwner (generation + 1),
	// whatever its current lease, its attempts (an operator may grant a job
	// past max_attempts) and its not_before. ErrConflict when the job is
	// finished.
	Reassign(ctx context.Context, jobID, newOwner string, ttl time.Duration) (Lease, error)
	// Renew extends a current, unexpired lease; it never changes generation.
	Renew(ctx context.Context, tok fencing.Token, ttl time.Duration) (time.Time, error)
	// Commit accepts a result for the current token: status SUCCEEDED.
	Commit(ctx context.Context, tok fencing.Token, result json.RawMessage) error
	// Fail ends the current attempt as f says (Failure): TIMED_OUT,
	// NEEDS_DECISION, FAILED, or retried (QUEUED at generation + 1, no
	// owner, not before the retry backoff) while attempts < max_attempts.
	// The attempt's cause is appended to the job's AttemptEnds and recorded
	// with the write event.
	Fail(ctx context.Context, tok fencing.Token, f Failure) error
	// ExpireDeadlines ends up to limit (≤ 0: all) queued or in-progress
	// jobs whose deadline passed on the database clock as TIMED_OUT, in one
	// fenced statement recorded as verb timeout with cause deadline, and
	// returns the tokens it took away (in-progress jobs only).
	ExpireDeadlines(ctx context.Context, limit int) ([]fencing.Token, error)
	// SetRetryPolicy sets the backoff of retried attempts for this store
	// value (DefaultRetryPolicy until set). Call it before the store is
	// used.
	SetRetryPolicy(p RetryPolicy)
	// RegisterArtifact records an artifact under the current token.
	RegisterArtifact(ctx context.Context, tok fencing.Token, a ArtifactRecord) error
	// Artifacts lists the artifacts registered for one generation of a job.
	Artifacts(ctx context.Context, jobID string, generation int64) ([]ArtifactRecord, error)
	// ReclaimExpired ends the attempt of up to limit in-progress jobs whose
	// lease expired on the database clock, an infrastructure failure with
	// cause lease_expired: retried (QUEUED, generation + 1, no owner, not
	// before the backoff) while attempts are left, FAILED otherwise. It
	// returns the tokens taken away.
	ReclaimExpired(ctx context.Context, limit int) ([]fencing.Token, error)
	// Get returns a job, or ErrNotFound.
	Get(ctx context.Context, jobID string) (Job, error)
	// WriteEvents lists every recorded attempt on a job, oldest first.
	WriteEvents(ctx context.Context, jobID string) ([]WriteEvent, error)

	// ClaimFor grants the first queued job, highest priority first and
	// oldest first within one priority, that is due (its not_before passed
	// on the database clock), whose project has fewer in-progress jobs than
	// its limit (req.ProjectLimits, req.DefaultProjectLimit; counted in the
	// database with the grant, so coordinators sharing the store never
	// exceed it), that the agent can run (no effect
	// steps unless req.Capabilities has protocol.CapabilityEffect) and whose
	// device selector matches one of req.Devices that is in state "device" and free (no in-progress
	// job of req.Owner counted against it), when req.Owner holds fewer than
	// req.Slots in-progress jobs and its agent is not draining (by the
	// operator or by its own report) nor registered under another boot. The lease names the phone chosen: the
	// first matching free one in serial order. ErrNoJob when nothing fits.
	// Grants for one agent are serialised, so several coordinators never
	// exceed its slots or put two jobs on one phone.
	//
	// Every grant (ClaimFor, TakeOverExpired, Reassign) counts one attempt;
	// the first grant of a job whose task has a timeout sets its deadline
	// (database clock), kept across attempts and carried in Lease.DeadlineAt.
	// ClaimFor and TakeOverExpired never grant a job whose attempts reached
	// max_attempts or whose deadline passed.
	ClaimFor(ctx context.Context, req ClaimRequest) (Lease, error)
	// TakeOverExpired is ClaimFor for in-progress jobs whose lease expired on
	// the database clock and whose owner is not req.Owner, longest expired
	// first, skipping jobs of a project that has more in-progress jobs than
	// its limit (the job itself counts among them already): one statement raises the generation and grants the job to
	// req.Owner. It returns the new lease and the token taken away, recorded
	// as a reclaim of the old token (the end of its attempt, cause
	// lease_expired) and a reassign to the new owner.
	TakeOverExpired(ctx context.Context, req ClaimRequest) (Lease, fencing.Token, error)
	// AuthorizeUpload checks, fenced like every other write, that tok is the
	// job's current token, records the attempt (verb upload) and returns
	// fencing.ErrStale or ErrNotFound otherwise.
	AuthorizeUpload(ctx context.Context, tok fencing.Token, name string) error
	// RecordRefused counts an attempt of agentID refused before it reached
	// a fenced statement, such as a token presented on another agent's
	// subject (403), in the row of its agent, verb and DenialWindow (made
	// by the first), whose job, owner, generation and detail become tok's
	// and detail (docs/security.md, "Refused requests").
	RecordRefused(ctx context.Context, agentID, verb string, tok fencing.Token, detail string) error
	// AgentRefusals lists the rows RecordRefused counts in, oldest first.
	AgentRefusals(ctx context.Context) ([]AgentRefusal, error)
	// Cancel ends a queued or in-progress job as CANCELLED with reason, in
	// one statement, and returns the token it took away (zero when the job was
	// queued). ErrConflict when the job is finished, ErrNotFound when unknown.
	Cancel(ctx context.Context, jobID, reason string) (fencing.Token, error)
	// ListJobs lists jobs oldest first.
	ListJobs(ctx context.Context, f JobFilter) ([]Job, error)
	// JobCounts counts jobs by status.
	JobCounts(ctx context.Context) (map[string]int64, error)

	// AgentHello records a hello: the agent's session (boot id), version,
	// phones and slots, last seen now. In the same transaction the attempt
	// of every in-progress job held by another boot of the agent ends as an
	// infrastructure failure with cause agent_restarted (retried or FAILED,
	// as in ReclaimExpired); their tokens are returned. It
	// works from the store alone, so it holds after a coordinator restart
	// and whichever coordinator took the hello.
	AgentHello(ctx context.Context, h AgentHello) (Agent, []fencing.Token, error)
	// AgentHeartbeat marks the session seen now, stores whether the agent
	// drains and, when hb.Devices is not nil, its phones. ErrNoSession when
	// hb.BootID is not the agent's current session.
	AgentHeartbeat(ctx context.Context, hb AgentBeat) (Agent, error)
	// Agents lists every registered agent by id.
	Agents(ctx context.Context) ([]Agent, error)
	// GetAgent returns one agent, or ErrAgentNotFound.
	GetAgent(ctx context.Context, agentID string) (Agent, error)
	// SetAgentDraining sets or clears the agent's drain flag.
	// ErrAgentNotFound when the agent never connected.
	SetAgentDraining(ctx context.Context, agentID string, draining bool) (Agent, error)
	// SetAgentSettings merges set into the agent's settings and removes the
	// keys in unset. An agent not yet registered is created without a
	// session, so settings can be given before its first hello.
	SetAgentSettings(ctx context.Context, agentID string, set map[string]string, unset []string) (Agent, error)

	// EffectStore keeps effect intents, their receipts and the outbox
	// (effectstore.go).
	EffectStore

	// EventStore reads job events and records steps (eventstore.go).
	EventStore

	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Close releases the store.
	Close() error
}
