package jobstore

import (
	"context"
	"errors"
	"time"

	"github.com/edgeagent/edgeagent/fencing"
)

// Enrollment is one enrollment code of an agent (docs/operations.md, "Add
// a PC"): the store keeps its hash, never the code.
type Enrollment struct {
	AgentID   string
	CodeHash  string    // enroll.Hash of the normalised code
	CreatedAt time.Time // database clock
	ExpiresAt time.Time // database clock
	UsedAt    time.Time // zero until redeemed
	PublicKey string    // the agent's NATS user public key, once redeemed
}

// CauseAgentRevoked is the cause of the attempt of a job whose agent was
// revoked (edgecoord agent revoke): an infrastructure failure, retried on
// another agent.
const CauseAgentRevoked = "agent_revoked"

// DetailAgentRevoked is the write event detail of that end.
const DetailAgentRevoked = "agent revoked"

// MaxEnrollmentTTL bounds how long a code stays valid.
const MaxEnrollmentTTL = 30 * 24 * time.Hour

// Enrollment errors.
var (
	ErrEnrollmentUnknown = errors.New("unknown enrollment code")
	ErrEnrollmentUsed    = errors.New("enrollment code already used")
	ErrEnrollmentExpired = errors.New("enrollment code expired")
	ErrAgentRevoked      = errors.New("agent revoked")
)

// EnrollStore keeps enrollment codes and revoked agents. Both stores
// implement it; coordinator/storetest holds its conformance cases.
type EnrollStore interface {
	// CreateEnrollment records a code (by its hash) for agentID that
	// expires ttl (at most MaxEnrollmentTTL) from now on the database
	// clock. ErrAgentRevoked when the agent was revoked: a revoked name
	// is not enrolled again.
	CreateEnrollment(ctx context.Context, agentID, codeHash string, ttl time.Duration) (Enrollment, error)
	// RedeemEnrollment uses the code of codeHash, once, binding publicKey
	// to it, in one statement: of any number of concurrent redeems of one
	// code exactly one succeeds. ErrEnrollmentUnknown, ErrEnrollmentUsed,
	// ErrEnrollmentExpired (judged by the database clock) or
	// ErrAgentRevoked otherwise.
	RedeemEnrollment(ctx context.Context, codeHash, publicKey string) (Enrollment, error)
	// RevokeAgent marks the agent revoked (once: a second call keeps the
	// first time) and drained, so no grant reaches it, and in the same
	// transaction ends the attempt of every in-progress job of any of its
	// boots as an infrastructure failure with cause CauseAgentRevoked
	// (retried or FAILED, as in ReclaimExpired); it returns the tokens
	// taken away. Its unused codes can no longer be redeemed.
	RevokeAgent(ctx context.Context, agentID string) ([]fencing.Token, error)
	// RevokedAgents returns every revoked agent with the time it was
	// revoked.
	RevokedAgents(ctx context.Context) (map[string]time.Time, error)
	// RevokedKeys returns the public key of every redeemed code of a
	// revoked agent with the time the agent was revoked: the users the
	// NATS account refuses.
	RevokedKeys(ctx context.Context) (map[string]time.Time, error)
}
