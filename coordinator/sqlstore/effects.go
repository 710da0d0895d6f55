package sqlstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// EffectDetail is the write_events detail of an effect request.
func EffectDetail(action, key, state string) string {
	if state == "" {
		state = "refused"
	}
	return action + " " + key + ": " + state
}

// CheckEffectIntent validates a reservation.
func CheckEffectIntent(in jobstore.EffectIntent) error {
	return protocol.ValidateEffectKey(in.Key)
}

// CheckDecision validates a person's decision.
func CheckDecision(decision string) error {
	if decision != jobstore.ResolveDone && decision != jobstore.ResolveRetry {
		return fmt.Errorf("decision %q: want %s or %s", decision, jobstore.ResolveDone, jobstore.ResolveRetry)
	}
	return nil
}

// ResolvedReceipt is the receipt a person's "done" writes on an intent:
// outcome ok, the time of the decision and the person's note.
func ResolvedReceipt(note string, at time.Time) []byte {
	b, _ := json.Marshal(protocol.EffectReceipt{Outcome: protocol.ReceiptOK, At: at.UTC(), Note: note})
	return b
}

// MergeEvidence appends add to cur, leaving out keys cur already has.
func MergeEvidence(cur, add []string) []string {
	out := append([]string(nil), cur...)
	for _, k := range add {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// EncodeEvidence encodes an evidence list for storage; nil is stored as [].
func EncodeEvidence(keys []string) []byte { return EncodeStrings(keys) }

// DecodeEvidence decodes a stored evidence list.
func DecodeEvidence(b []byte) ([]string, error) {
	var out []string
	if len(b) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decode evidence: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// ValidStates lists the effect states a filter may name.
var ValidStates = []string{protocol.EffectReserved, protocol.EffectDone, protocol.EffectInDoubt, protocol.EffectRetry, protocol.EffectPending}
