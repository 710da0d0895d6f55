package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// Kinds of effect rows. Both live in one table, keyed by the idempotency
// key.
const (
	// EffectKindStep is an effect step of a job, run by an agent on a phone
	// after it reserved the intent.
	EffectKindStep = "step"
	// EffectKindOutbox is a message the coordinator delivers (an accepted
	// result or a failure published), written in the transaction that
	// accepted the result or the failure and delivered by the dispatcher.
	EffectKindOutbox = "outbox"
)

// Decisions of ResolveEffect.
const (
	// ResolveDone: a person confirms the effect happened; later
	// generations skip the step.
	ResolveDone = "done"
	// ResolveRetry: a person confirms the effect did not happen; the next
	// reservation with the key takes the intent again and runs the step.
	ResolveRetry = "retry"
)

// ReasonNeedsDecision starts the failure reason of a job that stopped
// because one of its effects is in doubt: a fail with a reason
// "needs_decision: ..." ends the job NEEDS_DECISION until a person resolves
// the effect, which queues the job again.
const ReasonNeedsDecision = protocol.ReasonNeedsDecision

// NeedsDecision reports whether a job stopped because an effect of it is in
// doubt.
func NeedsDecision(j Job) bool {
	return j.Status == StatusNeedsDecision
}

// ErrEffectNotFound is returned for an effect key the store does not have.
var ErrEffectNotFound = errors.New("effect not found")

// EffectIntent is what a reservation records about the step.
type EffectIntent struct {
	Key  string
	Step int    // 1-based step number in the job, for display
	Op   string // the step's op, for display
	// Attempt identifies the run of the token that reserves: the same
	// token reserving again with another attempt finds the intent in
	// doubt (its job was started twice; the first run may have done it).
	Attempt string
}

// EffectRecord is one row of the effects table. State is the effective
// state: an intent still reserved by a token that is no longer current is
// reported as in_doubt even before a sweep or a reservation attempt has
// written that down.
type EffectRecord struct {
	Key   string
	Kind  string // step or outbox
	State string // reserved, done, in_doubt, retry (steps); pending, done (outbox)
	JobID string
	Step  int
	Op    string
	// Owner and Generation are the token that reserved the intent (steps)
	// or whose accepted result the message publishes (outbox).
	Owner      string
	Generation int64
	Attempt    string // the run of the token that reserved it (steps)
	// Receipt is the step's protocol.EffectReceipt (steps), or the
	// receiver's reply (outbox); nil before.
	Receipt json.RawMessage
	// Evidence are artifact keys recorded by generations that met the
	// intent in doubt.
	Evidence []string
	// Payload is the message an outbox row delivers.
	Payload json.RawMessage
	// Attempts counts deliveries of an outbox row; LastError is the last
	// failed one's error.
	Attempts  int
	LastError string
	// Reservations counts the times the intent was reserved: 1, plus one
	// for every reservation after a person's "retry".
	Reservations int
	// Resolution is a person's last decision (done or retry), Note their
	// comment.
	Resolution string
	Note       string
	CreatedAt  time.Time // database clock
	UpdatedAt  time.Time
	DoneAt     time.Time // zero until done
}

// StepReceipt decodes the receipt of a step intent; nil when it has none.
func (r EffectRecord) StepReceipt() (*protocol.EffectReceipt, error) {
	if len(r.Receipt) == 0 || string(r.Receipt) == "null" {
		return nil, nil
	}
	var rc protocol.EffectReceipt
	if err := json.Unmarshal(r.Receipt, &rc); err != nil {
		return nil, err
	}
	return &rc, nil
}

// Reply is the record as answered to an effect request.
func (r EffectRecord) Reply() (protocol.EffectReply, error) {
	rc, err := r.StepReceipt()
	if err != nil {
		return protocol.EffectReply{}, err
	}
	return protocol.EffectReply{
		Key: r.Key, State: r.State, JobID: r.JobID, Owner: r.Owner, Generation: r.Generation,
		Receipt: rc, Evidence: r.Evidence,
	}, nil
}

// HeldBy reports whether the record is an intent reserved by exactly tok.
func (r EffectRecord) HeldBy(tok fencing.Token) bool {
	return r.State == protocol.EffectReserved && r.JobID == tok.JobID && r.Owner == tok.Owner && r.Generation == tok.Generation
}

// EffectFilter selects effects for ListEffects. Zero fields select
// everything.
type EffectFilter struct {
	States []string // effective states
	Kind   string
	JobID  string
	Limit  int // at most this many, oldest first; ≤ 0 means no limit
}

// OutboxKey is the idempotency key of the message that publishes the
// accepted result of a job: stable across every attempt and every
// coordinator, so a receiver can drop duplicates.
func OutboxKey(jobID string) string { return protocol.ReservedKeyPrefix + "result/" + jobID }

// OutboxFailureKey is the idempotency key of the message that publishes the
// failure of one generation of a job. A job fails at most once per
// generation; one that stopped on an effect in doubt may be queued again by
// a person's decision and fail (or succeed) in a later generation.
func OutboxFailureKey(jobID string, generation int64) string {
	return fmt.Sprintf("%sfailed/%s/g%d", protocol.ReservedKeyPrefix, jobID, generation)
}

// Events of outbox messages (the payload's "event").
const (
	OutboxEventResult = "result" // an accepted result (CommitOutbox)
	OutboxEventFailed = "failed" // a job failed (FailOutbox)
)

// EffectStore is the part of the Store that keeps effects: intents of
// effect steps with their receipts, and the coordinator's outbox. Every
// method that an agent's token reaches is fenced like the other writes: it
// applies only when the token is current, checked in the statement that
// writes, and its attempt is recorded in write_events (verb effect).
type EffectStore interface {
	// ReserveEffect reserves the intent in.Key for tok in one statement:
	// inserted when no intent with the key exists (or a person chose
	// retry), otherwise left as it is, except that an intent reserved by a
	// token that is no longer current becomes in_doubt. It returns the
	// intent as it stands: HeldBy(tok) means tok may run the step.
	// fencing.ErrStale or ErrNotFound when tok is not current (nothing is
	// written then).
	ReserveEffect(ctx context.Context, tok fencing.Token, in EffectIntent) (EffectRecord, error)
	// RecordEffectReceipt records the receipt of the intent key, which
	// tok must hold: the intent becomes done (in_doubt when the receipt's
	// outcome is not ok). A repeated receipt of the token that made it done
	// returns the intent unchanged. fencing.ErrStale or ErrNotFound when
	// tok is not current, ErrConflict when tok does not hold the intent.
	RecordEffectReceipt(ctx context.Context, tok fencing.Token, key string, r protocol.EffectReceipt) (EffectRecord, error)
	// AddEffectEvidence appends artifact keys to the evidence of the step
	// intent key while tok is current. ErrEffectNotFound when there is no
	// such intent.
	AddEffectEvidence(ctx context.Context, tok fencing.Token, key string, keys []string) (EffectRecord, error)
	// MarkEffectsInDoubt writes down in_doubt for every intent still
	// reserved by a token that is no longer current, in one statement, and
	// returns how many changed.
	MarkEffectsInDoubt(ctx context.Context) (int, error)
	// ResolveEffect records a person's decision on an intent in doubt:
	// done (with a receipt saying so) or retry. In the same transaction the
	// intent's job, when it is NEEDS_DECISION, goes back to the queue
	// (requeued reports it) with one more attempt allowed when it had used
	// them all, and a fresh deadline from its next grant. ErrEffectNotFound, or ErrConflict
	// when the intent is not in doubt.
	ResolveEffect(ctx context.Context, key, decision, note string) (rec EffectRecord, requeued bool, err error)
	// GetEffect returns one effect, or ErrEffectNotFound.
	GetEffect(ctx context.Context, key string) (EffectRecord, error)
	// ListEffects lists effects oldest first.
	ListEffects(ctx context.Context, f EffectFilter) ([]EffectRecord, error)

	// CommitOutbox is Commit that, in the same transaction and only when
	// the result is accepted, writes the outbox message key (pending) that
	// publishes it: job, generation, owner, result and manifest.
	CommitOutbox(ctx context.Context, tok fencing.Token, result json.RawMessage, key string) error
	// FailOutbox is Fail that, in the same transaction and only when the
	// failure is accepted and ends the job (it is not retried), writes the
	// outbox message key (pending) that publishes it: job, generation,
	// owner, status, reason and the artifacts registered under that
	// generation.
	FailOutbox(ctx context.Context, tok fencing.Token, f Failure, key string) error
	// ClaimOutbox takes up to limit pending outbox messages that are due,
	// counts a delivery attempt on each and makes them not due again for
	// lease (so another dispatcher does not send them meanwhile). Several
	// dispatchers may claim at once; none gets a message another holds.
	ClaimOutbox(ctx context.Context, limit int, lease time.Duration) ([]EffectRecord, error)
	// OutboxDelivered stores the receiver's receipt: the message is done.
	// A message already done is left as it is.
	OutboxDelivered(ctx context.Context, key string, receipt json.RawMessage) error
	// OutboxFailed records a failed delivery; the message is due again
	// after retryIn.
	OutboxFailed(ctx context.Context, key, errText string, retryIn time.Duration) error
}
