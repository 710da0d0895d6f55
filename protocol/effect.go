package protocol

import (
	"fmt"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/fencing"
)

// VerbEffect is the agent → coordinator verb that reserves an effect
// intent, records its receipt, or attaches evidence to it (fenced).
const VerbEffect = "effect"

// EffectSpec marks a step as an effect in the world (submitting a form,
// sending a message, paying): something a stale or restarted worker must
// never do twice. Key is the idempotency key, chosen by whoever submits the
// job and the same across every generation of the job.
type EffectSpec struct {
	Key string `json:"key"`
}

// Actions of an Effect request.
const (
	// EffectActionReserve asks to reserve the intent for the token before
	// the step runs. The reply says whether the token holds it now.
	EffectActionReserve = "reserve"
	// EffectActionReceipt records what the step did; the intent becomes
	// done (or in_doubt when the step failed on the phone).
	EffectActionReceipt = "receipt"
	// EffectActionEvidence attaches artifact keys (what the phone showed
	// when the agent met an intent in doubt) to the intent.
	EffectActionEvidence = "evidence"
)

// States of an effect intent.
const (
	// EffectReserved: a generation reserved the intent and has not yet
	// recorded a receipt. Held by a token that is no longer current, it is
	// in doubt.
	EffectReserved = "reserved"
	// EffectDone: the receipt is recorded; later generations skip the step
	// and reuse the receipt.
	EffectDone = "done"
	// EffectInDoubt: the reserving generation lost its lease before its
	// receipt (or the step failed on the phone): nobody knows whether the
	// effect happened. It is never re-run automatically; a person decides.
	EffectInDoubt = "in_doubt"
	// EffectRetry: a person decided the effect did not happen; the next
	// reservation with the key takes the intent again.
	EffectRetry = "retry"
	// EffectPending: an outbox message of the coordinator waiting for
	// delivery (retried with the same key until a receipt is stored).
	EffectPending = "pending"
)

// Effect is one fenced effect request: reserve an intent, record its
// receipt, or attach evidence.
type Effect struct {
	Token  fencing.Token `json:"token"`
	Action string        `json:"action"` // reserve, receipt or evidence
	Key    string        `json:"key"`
	// Step is the 1-based step number within the job and Op its op (for
	// display); set on reserve.
	Step int    `json:"step,omitempty"`
	Op   string `json:"op,omitempty"`
	// Attempt identifies this run of the token on the agent (reserve): a
	// reservation asked again by the same token with the same attempt is
	// a retry and still held; with another attempt the token's job was
	// started twice, and the intent is answered in doubt.
	Attempt string `json:"attempt,omitempty"`
	// Receipt is what the step did (receipt).
	Receipt *EffectReceipt `json:"receipt,omitempty"`
	// Evidence are artifact keys registered under the token (evidence).
	Evidence []string `json:"evidence,omitempty"`
}

// Receipt outcomes.
const (
	ReceiptOK    = "ok"
	ReceiptError = "error"
)

// EffectReceipt says what an effect step did: its outcome, when, and the
// keys of the artifacts that show it (a screenshot and a UI dump taken
// right after the step).
type EffectReceipt struct {
	Outcome   string    `json:"outcome"`         // ok or error
	Error     string    `json:"error,omitempty"` // for error
	At        time.Time `json:"at"`              // when the step ended, agent clock (display only)
	Artifacts []string  `json:"artifacts,omitempty"`
	// Owner and Generation are the token the receipt was recorded under;
	// the coordinator fills them in.
	Owner      string `json:"owner,omitempty"`
	Generation int64  `json:"generation,omitempty"`
	// Note is a person's comment when the receipt was written by
	// "edgecoord effect resolve --done".
	Note string `json:"note,omitempty"`
}

// EffectReply is the intent as it stands after the request.
type EffectReply struct {
	Key   string `json:"key"`
	State string `json:"state"` // reserved, done or in_doubt
	// JobID, Owner and Generation are the token that reserved the intent
	// (for reserve: the caller's own token when it holds the intent).
	JobID      string         `json:"job_id"`
	Owner      string         `json:"owner"`
	Generation int64          `json:"generation"`
	Receipt    *EffectReceipt `json:"receipt,omitempty"`
	Evidence   []string       `json:"evidence,omitempty"`
}

// Holds reports whether tok holds the intent: it is reserved by exactly
// this token, so the step may run (once).
func (r EffectReply) Holds(tok fencing.Token) bool {
	return r.State == EffectReserved && r.JobID == tok.JobID && r.Owner == tok.Owner && r.Generation == tok.Generation
}

// ReasonNeedsDecision starts the failure reason (fail) of a job that
// stopped because one of its effects is in doubt: nobody knows whether it
// happened, so it is not run again until a person decides.
const ReasonNeedsDecision = "needs_decision"

// ReservedKeyPrefix starts the keys the coordinator chooses itself (its
// outbox); a task may not use it.
const ReservedKeyPrefix = "edgecoord/"

// ValidateEffectKey accepts 1 to 200 printable ASCII characters without
// spaces, not starting with ReservedKeyPrefix.
func ValidateEffectKey(key string) error {
	if key == "" || len(key) > 200 {
		return fmt.Errorf("invalid effect key %q: want 1-200 characters", key)
	}
	for i := 0; i < len(key); i++ {
		if key[i] <= ' ' || key[i] > '~' {
			return fmt.Errorf("invalid effect key %q: only printable ASCII without spaces", key)
		}
	}
	if strings.HasPrefix(key, ReservedKeyPrefix) {
		return fmt.Errorf("invalid effect key %q: the prefix %q is the coordinator's", key, ReservedKeyPrefix)
	}
	return nil
}

// EffectOps are the ops a step marked as an effect may have: the inputs
// that change what the phone (and the world behind it) does.
var EffectOps = []string{OpLaunch, OpTap, OpLongPress, OpSwipe, OpText, OpKey}

// validateEffect checks the effect mark of one step: a valid key on an
// input op.
func (s Step) validateEffect() error {
	if err := ValidateEffectKey(s.Effect.Key); err != nil {
		return fmt.Errorf("key: %w", err)
	}
	for _, op := range EffectOps {
		if s.Op == op {
			return nil
		}
	}
	return fmt.Errorf("op %q cannot be an effect (only %s)", s.Op, strings.Join(EffectOps, ", "))
}

// validateEffects checks the effect marks of a task's steps: a valid key,
// an input op, and no key used twice in one task.
func validateEffects(steps []Step) error {
	seen := map[string]int{}
	for i, s := range steps {
		if s.Effect == nil {
			continue
		}
		if err := s.validateEffect(); err != nil {
			return fmt.Errorf("steps[%d]: effect: %w", i, err)
		}
		if j, dup := seen[s.Effect.Key]; dup {
			return fmt.Errorf("steps[%d]: effect key %q is already used by steps[%d]", i, s.Effect.Key, j)
		}
		seen[s.Effect.Key] = i
	}
	return nil
}
