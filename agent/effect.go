package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
)

// needsDecisionError ends a job whose effect step is in doubt: the step is
// not run, and the job fails with a reason starting "needs_decision" until
// a person decides (edgecoord effect resolve).
type needsDecisionError struct{ msg string }

func (e *needsDecisionError) Error() string { return e.msg }

// runGuarded runs one step of the job. A step marked as an effect runs only
// after its intent is reserved for this token, at most once:
//
//   - reserved by this token: the step runs, then the agent captures what
//     the phone shows (a screenshot and a UI dump), publishes them, and
//     records the receipt (outcome, time, those keys) with a fenced call;
//   - done: an earlier generation ran it and recorded its receipt; the step
//     is skipped and the receipt reused (it goes into the result);
//   - in doubt (or held by another token): nobody knows whether it
//     happened; the step is not run, the agent captures and attaches what
//     the phone shows now, and the job ends needing a decision.
//
// Other steps run as they are.
func (j *job) runGuarded(phone Phone, seq int, what, kind string, s protocol.Step) ([]string, error) {
	info := capture.StepInfo{Seq: seq}
	if s.Effect == nil {
		return j.runStep(phone, info, what, kind, s)
	}
	key := s.Effect.Key
	rep, err := j.effectRequest(j.work, "reserve effect "+key, protocol.Effect{
		Token: j.tok, Action: protocol.EffectActionReserve, Key: key, Step: seq, Op: s.Op,
		Attempt: j.effectAttempt(),
	})
	if err != nil {
		return nil, err
	}
	log := j.log.With().Str("effect_key", key).Int("step", seq).Str("op", s.Op).Logger()
	switch {
	case rep.Holds(j.tok):
	case rep.State == protocol.EffectDone:
		j.keepReceipt(key, rep.Receipt)
		j.skipStep(phone, seq, s, fmt.Sprintf("effect %s done by %s generation %d: receipt reused", key, rep.Owner, rep.Generation), nil)
		log.Info().Str("done_by", rep.Owner).Int64("done_in_generation", rep.Generation).
			Msg("effect done by an earlier generation: step skipped, receipt reused")
		return nil, nil
	default:
		return nil, j.effectInDoubt(phone, seq, what, s, rep)
	}

	keys, err := j.runStep(phone, info, what, kind, s)
	var se *stepError
	if err != nil && !errors.As(err, &se) {
		// Stopped (or a capture of the step could not be published): no
		// receipt; the intent stays reserved by this token, which makes it
		// in doubt once the token is gone.
		return keys, err
	}
	rc := protocol.EffectReceipt{Outcome: protocol.ReceiptOK, At: time.Now().UTC()}
	if se != nil {
		rc.Outcome, rc.Error = protocol.ReceiptError, se.Error()
	}
	// The receipt is recorded while the lease is held even if the job is
	// being released: the step ran.
	ev, everr := j.captureEvidence(phone, seq, key, "after")
	rc.Artifacts = ev
	rep, err = j.effectRequest(j.ctx, "record receipt of effect "+key, protocol.Effect{
		Token: j.tok, Action: protocol.EffectActionReceipt, Key: key, Receipt: &rc,
	})
	if err != nil {
		return keys, err
	}
	j.keepReceipt(key, rep.Receipt)
	log.Info().Str("outcome", rc.Outcome).Strs("evidence", ev).Str("state", rep.State).Msg("effect receipt recorded")
	switch {
	case se != nil:
		return keys, se
	case everr != nil:
		return keys, everr
	}
	return keys, nil
}

// effectInDoubt logs effect step seq as not run, captures what the phone
// shows now, attaches it to the intent as evidence and returns the error
// that ends the job needing a decision.
func (j *job) effectInDoubt(phone Phone, seq int, what string, s protocol.Step, rep protocol.EffectReply) error {
	key := s.Effect.Key
	holder := fmt.Sprintf("%s generation %d", rep.Owner, rep.Generation)
	if rep.JobID != j.tok.JobID {
		holder = fmt.Sprintf("job %s (%s)", rep.JobID, holder)
	}
	why := "reserved by " + holder + " without a receipt"
	if rep.State == protocol.EffectReserved {
		why = "reserved by " + holder + ", which still runs"
	}
	nd := &needsDecisionError{fmt.Sprintf("%s: %s: effect %q is %s (%s); not run again until a person decides (edgecoord effect resolve)",
		protocol.ReasonNeedsDecision, what, key, protocol.EffectInDoubt, why)}
	j.skipStep(phone, seq, s, "effect "+key+" in doubt", nd)
	ev, err := j.captureEvidence(phone, seq, key, "doubt")
	if errors.Is(err, errStopped) {
		return errStopped
	}
	if len(ev) > 0 {
		_, err := j.effectRequest(j.work, "attach evidence to effect "+key, protocol.Effect{
			Token: j.tok, Action: protocol.EffectActionEvidence, Key: key, Evidence: ev,
		})
		if errors.Is(err, errStopped) {
			return errStopped
		}
		if err != nil {
			j.log.Warn().Err(err).Str("effect_key", key).Msg("evidence not attached")
		}
	}
	j.log.Warn().Str("effect_key", key).Str("state", rep.State).Str("holder_owner", rep.Owner).
		Int64("holder_generation", rep.Generation).Strs("evidence", ev).Msg("effect in doubt: step not run; the job needs a decision")
	return nd
}

// captureEvidence takes a screenshot and a UI dump of the phone as
// evidence of effect step seq, publishes them under the token and returns
// their keys. Both are named effect-<seq>-<hash>-<when> (seq zero-padded to
// three digits, hash the first 8 hex digits of the key's SHA-256, when
// "after" or "doubt"; docs/protocol.md section 10.2) and logged with the
// effect step's seq, marked evidence. A capture the phone cannot make is
// left out; a stop returns errStopped; a capture that cannot be published
// returns its error with the keys published so far.
func (j *job) captureEvidence(phone Phone, seq int, key, when string) ([]string, error) {
	sum := sha256.Sum256([]byte(key))
	base := fmt.Sprintf("effect-%03d-%s-%s", seq, hex.EncodeToString(sum[:4]), when)
	info := capture.StepInfo{Seq: seq, Evidence: true}
	var out []string
	for _, s := range []protocol.Step{{Op: protocol.OpScreenshot, Name: base + ".png"}, {Op: protocol.OpUIDump, Name: base + ".xml"}} {
		keys, err := j.runStep(phone, info, fmt.Sprintf("evidence of effect %s (%s)", key, s.Op), "effect_evidence", s)
		out = append(out, keys...)
		var se *stepError
		switch {
		case errors.As(err, &se):
			j.log.Warn().Err(err).Str("effect_key", key).Msg("evidence not captured")
		case err != nil:
			return out, err
		}
	}
	return out, nil
}

// effectRequest sends one fenced effect request, retrying transient
// failures with backoff until it is answered, ctx is done or the lease is
// lost (callRetrying). Retrying is safe: a reservation asked again by the
// same token answers that the token holds it, a receipt recorded again is
// answered like the first. A 409 stops the job (errStopped).
func (j *job) effectRequest(ctx context.Context, what string, req protocol.Effect) (protocol.EffectReply, error) {
	var rep protocol.EffectReply
	err := j.callRetrying(ctx, what, protocol.VerbEffect, req, &rep, false)
	if err != nil && !errors.Is(err, errStopped) {
		return rep, fmt.Errorf("%s: %w", what, err)
	}
	return rep, err
}

// effectAttempt identifies this run of the token: were the same token's job
// started twice in this process (a late duplicate of its assign), the
// second run's reservations find the intents in doubt instead of held.
func (j *job) effectAttempt() string { return strconv.FormatInt(j.started.UnixNano(), 36) }

// keepReceipt remembers the receipt of an effect step for the result.
func (j *job) keepReceipt(key string, rc *protocol.EffectReceipt) {
	if rc == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.effects == nil {
		j.effects = map[string]protocol.EffectReceipt{}
	}
	j.effects[key] = *rc
}

// resultLocked is the document the job's result carries: the keys of its
// artifacts, the number of steps (task and requested steps, run or skipped:
// the seq of the last one; docs/protocol.md section 5, result), and the receipts of its effect steps (run by
// this generation or reused from an earlier one). j.mu is held.
func (j *job) resultLocked() map[string]any {
	doc := map[string]any{"artifacts": j.arts, "steps": j.step}
	if len(j.effects) > 0 {
		doc["effects"] = j.effects
	}
	if len(j.apps) > 0 {
		doc["apps"] = j.apps
	}
	return doc
}
