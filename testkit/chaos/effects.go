package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// RuleEffectOnce: no effect step is executed twice. Every simulated phone
// counts the operations of effect steps it receives, by idempotency key;
// across every phone of every agent process of the schedule, no key may
// reach two. A job that succeeded ran each of its effect keys exactly once.
const RuleEffectOnce = "effect-at-most-once"

// markEffects makes every tap of the plan's tasks an effect step with a key
// of its own, and gives a task without a tap one before its last step. It
// draws nothing from the plan's random source, so the rest of the plan is
// the one the seed gives without effects.
func markEffects(p *Plan) {
	for ji := range p.Jobs {
		j := &p.Jobs[ji]
		steps := append([]protocol.Step(nil), j.Task.Steps...)
		tapped := false
		for i := range steps {
			if steps[i].Op == protocol.OpTap {
				tapped = true
			}
		}
		if !tapped {
			at := max(len(steps)-1, 0)
			steps = append(steps[:at], append([]protocol.Step{{Op: protocol.OpTap, X: 12, Y: 34}}, steps[at:]...)...)
		}
		for i := range steps {
			if steps[i].Op == protocol.OpTap {
				steps[i].Effect = &protocol.EffectSpec{Key: fmt.Sprintf("%s/tap-%d", j.ID, i)}
			}
		}
		j.Task.Steps = steps
	}
}

// phoneLedger keeps every simulated phone a schedule created, so that
// their effect counters can be summed at the end, killed processes
// included.
type phoneLedger struct {
	mu     sync.Mutex
	phones []*capture.Simulated
}

func (r *run) keepPhone(p *capture.Simulated) {
	r.phones.mu.Lock()
	r.phones.phones = append(r.phones.phones, p)
	r.phones.mu.Unlock()
}

// collectEffects reads back how often each effect key reached a phone and
// the effect intents of the plan's jobs.
func (r *run) collectEffects(ctx context.Context, f *Final) error {
	f.EffectRuns = map[string]int{}
	r.phones.mu.Lock()
	for _, p := range r.phones.phones {
		for k, n := range p.EffectCounts() {
			f.EffectRuns[k] += n
		}
	}
	r.phones.mu.Unlock()
	f.Effects = map[string]jobstore.EffectRecord{}
	for _, jp := range r.plan.Jobs {
		for _, s := range jp.Task.Steps {
			if s.Effect == nil {
				continue
			}
			e, err := r.opRaw.GetEffect(ctx, s.Effect.Key)
			if err == nil {
				f.Effects[s.Effect.Key] = e
			}
		}
	}
	return nil
}

// checkEffects audits the effect steps: no key reached the phones twice, a
// succeeded job ran each of its effect keys once and its intents are done,
// and a key that never reached a phone has no receipt.
func checkEffects(h *History, rep *Report) {
	keys := make([]string, 0, len(h.Final.EffectRuns))
	for k := range h.Final.EffectRuns {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if n := h.Final.EffectRuns[k]; n > 1 {
			rep.add(RuleEffectOnce, strings.Split(k, "/")[0], "effect %s executed %d times", k, n)
		}
	}
	for _, jp := range h.Plan.Jobs {
		j, ok := h.Final.Jobs[jp.ID]
		for _, s := range jp.Task.Steps {
			if s.Effect == nil {
				continue
			}
			k := s.Effect.Key
			e, has := h.Final.Effects[k]
			n := h.Final.EffectRuns[k]
			switch {
			case ok && j.Status == jobstore.StatusSucceeded && (n != 1 || !has || e.State != protocol.EffectDone):
				rep.add(RuleEffectOnce, jp.ID, "succeeded, but effect %s executed %d times, intent %s", k, n, e.State)
			case has && e.State == protocol.EffectDone && n == 0:
				rep.add(RuleEffectOnce, jp.ID, "effect %s has a receipt but never reached a phone", k)
			}
		}
	}
}

// The effect calls of a coordinator's store suffer the schedule's store
// faults like the other writes: an outage refuses them, a lost reply loses
// the answer of one that was applied.

func (s *faultyStore) ReserveEffect(ctx context.Context, tok fencing.Token, in jobstore.EffectIntent) (r jobstore.EffectRecord, err error) {
	err = s.write(func() error { r, err = s.Store.ReserveEffect(ctx, tok, in); return err })
	return r, err
}

func (s *faultyStore) RecordEffectReceipt(ctx context.Context, tok fencing.Token, key string, rc protocol.EffectReceipt) (r jobstore.EffectRecord, err error) {
	err = s.write(func() error { r, err = s.Store.RecordEffectReceipt(ctx, tok, key, rc); return err })
	return r, err
}

func (s *faultyStore) AddEffectEvidence(ctx context.Context, tok fencing.Token, key string, keys []string) (r jobstore.EffectRecord, err error) {
	err = s.write(func() error { r, err = s.Store.AddEffectEvidence(ctx, tok, key, keys); return err })
	return r, err
}
