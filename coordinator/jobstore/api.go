package jobstore

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// API token scopes (docs/api.md, "Tokens and scopes").
const (
	ScopeRead    = "read"    // GET routes
	ScopeSubmit  = "submit"  // POST /api/v1/jobs
	ScopeOperate = "operate" // cancel, sessions
	ScopeAdmin   = "admin"   // agents drain and resume, settings
)

// Scopes lists every API token scope.
var Scopes = []string{ScopeRead, ScopeSubmit, ScopeOperate, ScopeAdmin}

// Errors of the API store.
var (
	// ErrTokenNotFound: no token has that name or id.
	ErrTokenNotFound = errors.New("api token not found")
	// ErrTokenExists: a token of that name exists already.
	ErrTokenExists = errors.New("an api token of that name exists")
	// ErrIdempotencyMismatch: an Idempotency-Key was reused with another
	// request body.
	ErrIdempotencyMismatch = errors.New("idempotency key reused with a different request")
)

// APIToken is a stored API token. Only the SHA-256 of its secret is kept:
// the secret is shown once, when it is created.
type APIToken struct {
	ID         int64
	Name       string
	Hash       [sha256.Size]byte
	Projects   []string
	Scopes     []string
	CreatedAt  time.Time
	RevokedAt  time.Time // zero while valid
	LastUsedAt time.Time // zero before its first use
}

// Revoked reports whether the token was revoked.
func (t APIToken) Revoked() bool { return !t.RevokedAt.IsZero() }

// APIDenial counts the requests of one token refused for one kind of
// reason (DenialKind) within one DenialWindow: the stores keep one row per
// token, kind and window, counting the refusals in it and keeping the last
// one's method, path, job and project, so that refusals an attacker makes
// at will cannot fill the disk (docs/security.md, "Refused requests").
type APIDenial struct {
	ID        int64
	TokenName string
	Method    string
	Route     string // the request path
	JobID     string
	Project   string    // the job's project, or the project asked for
	Kind      string    // DenialJob or DenialProject; the stores set it from JobID
	Window    time.Time // start of the DenialWindow the row counts
	Count     int64     // refusals in the window
	At        time.Time // the last one
}

// AgentRefusal counts the requests of one agent on one verb refused
// before any fenced statement (Store.RecordRefused) within one
// DenialWindow, keeping the last one's token and detail.
type AgentRefusal struct {
	ID         int64
	AgentID    string // the agent of the subject
	Verb       string
	Window     time.Time
	Count      int64
	JobID      string // of the last refused token
	Owner      string
	Generation int64
	Detail     string
	At         time.Time // the last one
}

// DenialWindow is the span one APIDenial or AgentRefusal row counts.
const DenialWindow = time.Minute

// Kinds of APIDenial.
const (
	DenialJob     = "job"     // a request for another project's job
	DenialProject = "project" // a request for the jobs of a project the token lacks
)

// DenialKind is the kind of a refusal: DenialJob when it named a job,
// DenialProject otherwise.
func DenialKind(d APIDenial) string {
	if d.JobID != "" {
		return DenialJob
	}
	return DenialProject
}

// Idempotent is what a submit with an Idempotency-Key stored: the hash of
// the request body and the reply's document.
type Idempotent struct {
	TokenID     int64
	Key         string
	RequestHash string
	Reply       json.RawMessage
	CreatedAt   time.Time
	// Replayed is set by SubmitIdempotent when the key was stored already
	// (by an earlier submit or a concurrent one that committed first):
	// nothing was submitted and Reply is the stored one.
	Replayed bool
}

// JobPageFilter selects a page of jobs for ListJobPage. Zero fields select
// everything.
type JobPageFilter struct {
	Projects []string // jobs of these projects; nil: every project
	Statuses []string
	AgentID  string // jobs whose current owner is a session of this agent
	Phone    string // jobs counted against this phone (serial)
	// After is the cursor: only jobs listed after it (newest first, so
	// older ones). 0 starts at the newest.
	After int64
	Limit int // at most this many; ≤ 0 means 100
}

// JobPage is one page of jobs, newest first, and the cursor of the next
// page (0 when this page is the last).
type JobPage struct {
	Jobs []Job
	Next int64
}

// APIStore is what the HTTP API keeps beside the jobs (migration 0006):
// API tokens, the submits made with an Idempotency-Key, refused requests,
// and a keyset-paginated job list. Both stores implement it.
type APIStore interface {
	// CreateAPIToken stores a token; ErrTokenExists when the name is taken.
	CreateAPIToken(ctx context.Context, t APIToken) (APIToken, error)
	// APITokens lists every token, revoked ones included, by id.
	APITokens(ctx context.Context) ([]APIToken, error)
	// APITokenByHash returns the token with that secret hash, revoked or
	// not, and records its use (last_used_at); ErrTokenNotFound otherwise.
	APITokenByHash(ctx context.Context, hash [sha256.Size]byte) (APIToken, error)
	// RevokeAPIToken revokes the token of that name, or of that id when
	// nameOrID is a number no name matches; ErrTokenNotFound otherwise.
	// Revoking a revoked token keeps its first revocation time.
	RevokeAPIToken(ctx context.Context, nameOrID string) (APIToken, error)

	// Idempotent returns the stored submit of the token under key;
	// ErrNotFound when there is none.
	Idempotent(ctx context.Context, tokenID int64, key string) (Idempotent, error)
	// SubmitIdempotent submits specs in one transaction and stores reply
	// (built by reply from the jobs) under the token's key. When the key is
	// stored already nothing is submitted: the stored record is returned
	// with Replayed set, or ErrIdempotencyMismatch when its request hash
	// differs. Of concurrent submits with one key exactly one answers with
	// Replayed unset.
	SubmitIdempotent(ctx context.Context, rec Idempotent, specs []JobSpec, reply func([]Job) (json.RawMessage, error)) (Idempotent, error)
	// SubmitAll submits specs in one transaction: all or none.
	SubmitAll(ctx context.Context, specs []JobSpec) ([]Job, error)

	// RecordAPIDenial counts a refused request in the row of its token,
	// DenialKind and DenialWindow (made by the first), whose method, path,
	// job and project become d's.
	RecordAPIDenial(ctx context.Context, d APIDenial) error
	// APIDenials lists the rows of refusals, oldest first.
	APIDenials(ctx context.Context) ([]APIDenial, error)

	// ListJobPage lists jobs newest first from a cursor. The cursor is the
	// store's insertion order, so a page boundary does not move when jobs
	// are submitted between two pages.
	ListJobPage(ctx context.Context, f JobPageFilter) (JobPage, error)
}

// CheckScopes accepts a list of known scopes, at least one.
func CheckScopes(scopes []string) error {
	if len(scopes) == 0 {
		return errors.New("at least one scope is required (read, submit, operate, admin)")
	}
	for _, s := range scopes {
		known := false
		for _, k := range Scopes {
			known = known || s == k
		}
		if !known {
			return fmt.Errorf("unknown scope %q: want read, submit, operate or admin", s)
		}
	}
	return nil
}

// CheckTokenName accepts a token name: the rules of a project name
// (CheckProject), and not all digits, so that a name is never taken for an
// id.
func CheckTokenName(name string) error {
	if err := CheckProject(name); err != nil {
		return err
	}
	for _, r := range name {
		if r < '0' || r > '9' {
			return nil
		}
	}
	return fmt.Errorf("%q: a name must not be all digits (it would read as an id)", name)
}
