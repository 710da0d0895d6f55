package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/outbox"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// effects is the part of a Server that keeps effects: the effect verb, the
// in-doubt sweep and, when configured, the outbox dispatcher.
type effects struct {
	s          *Server
	dispatcher *outbox.Dispatcher // nil: this coordinator delivers nothing
	publish    bool               // accepted results are written to the outbox

	requests *prometheus.CounterVec // action, state
	inDoubt  prometheus.Counter
}

func newEffects(s *Server) *effects {
	fx := &effects{
		s:       s,
		publish: s.opts.Outbox.Publish || s.opts.Outbox.Sender != nil,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "effect_requests_total",
			Help: "Effect requests of agents answered, by action (reserve, receipt, evidence) and the intent's state after it.",
		}, []string{"action", "state"}),
		inDoubt: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "effects_marked_in_doubt_total",
			Help: "Effect intents written down as in doubt by the sweep: reserved by a token that lost its lease before its receipt.",
		}),
	}
	s.metrics.reg.MustRegister(fx.requests, fx.inDoubt)
	s.metrics.stale.WithLabelValues(protocol.VerbEffect)
	s.metrics.forbidden.WithLabelValues(protocol.VerbEffect)
	if s.opts.Outbox.Sender != nil {
		fx.dispatcher = outbox.NewDispatcher(s.store, s.opts.Outbox, s.log)
		s.metrics.reg.MustRegister(fx.dispatcher.Collectors()...)
	}
	return fx
}

// run sweeps intents into in_doubt every reap interval and runs the outbox
// dispatcher, until ctx is done.
func (fx *effects) run(ctx context.Context) {
	var wg sync.WaitGroup
	if fx.dispatcher != nil {
		wg.Go(func() { _ = fx.dispatcher.Run(ctx) })
	}
	fx.s.loop(ctx, fx.s.opts.ReapInterval, nil, fx.sweep)
	wg.Wait()
}

// sweep writes down in_doubt for intents whose reserving token lost its
// lease before its receipt. Reads report them in doubt already; the sweep
// makes the stored state say so too.
func (fx *effects) sweep(ctx context.Context) {
	n, err := fx.s.store.MarkEffectsInDoubt(ctx)
	if err != nil {
		if ctx.Err() == nil {
			fx.s.log.Error().Err(err).Msg("mark effects in doubt")
		}
		return
	}
	if n > 0 {
		fx.inDoubt.Add(float64(n))
		fx.s.log.Warn().Int("effects", n).Msg("effects in doubt: reserved by a lease lost before its receipt; a person decides (edgecoord effect list)")
	}
}

// commit accepts a result: through the outbox when results are published.
func (s *Server) commit(ctx context.Context, tok fencing.Token, result json.RawMessage) error {
	if !s.fx.publish {
		return s.store.Commit(ctx, tok, result)
	}
	if err := s.store.CommitOutbox(ctx, tok, result, jobstore.OutboxKey(tok.JobID)); err != nil {
		return err
	}
	if s.fx.dispatcher != nil {
		s.fx.dispatcher.Kick()
	}
	return nil
}

// failJob records a failure: through the outbox when results are
// published, so receivers learn of jobs that end without a result as of
// succeeded ones (a retried attempt publishes nothing).
func (s *Server) failJob(ctx context.Context, tok fencing.Token, f jobstore.Failure) error {
	if !s.fx.publish {
		return s.store.Fail(ctx, tok, f)
	}
	if err := s.store.FailOutbox(ctx, tok, f, jobstore.OutboxFailureKey(tok.JobID, tok.Generation)); err != nil {
		return err
	}
	if s.fx.dispatcher != nil {
		s.fx.dispatcher.Kick()
	}
	return nil
}

// effect serves the effect verb: reserve an intent before an effect step,
// record its receipt after it, or attach evidence to an intent in doubt.
// Every action is fenced: a token that is not current gets 409 and changes
// nothing.
func (s *Server) effect(ctx context.Context, agentID string, data []byte) (any, error) {
	var e protocol.Effect
	if err := decode(data, &e); err != nil {
		return nil, err
	}
	if err := s.checkToken(ctx, protocol.VerbEffect, agentID, e.Token); err != nil {
		return nil, err
	}
	if err := protocol.ValidateEffectKey(e.Key); err != nil {
		return nil, badRequest("%v", err)
	}
	tok := e.Token
	var (
		rec jobstore.EffectRecord
		err error
	)
	switch e.Action {
	case protocol.EffectActionReserve:
		rec, err = s.store.ReserveEffect(ctx, tok, jobstore.EffectIntent{Key: e.Key, Step: e.Step, Op: e.Op, Attempt: e.Attempt})
	case protocol.EffectActionReceipt:
		if e.Receipt == nil {
			return nil, badRequest("receipt is missing")
		}
		if e.Receipt.Outcome != protocol.ReceiptOK && e.Receipt.Outcome != protocol.ReceiptError {
			return nil, badRequest("receipt outcome %q: want %s or %s", e.Receipt.Outcome, protocol.ReceiptOK, protocol.ReceiptError)
		}
		if err := ownKeys(tok, e.Receipt.Artifacts); err != nil {
			return nil, err
		}
		rec, err = s.store.RecordEffectReceipt(ctx, tok, e.Key, *e.Receipt)
	case protocol.EffectActionEvidence:
		if len(e.Evidence) == 0 {
			return nil, badRequest("evidence is empty")
		}
		if err := ownKeys(tok, e.Evidence); err != nil {
			return nil, err
		}
		rec, err = s.store.AddEffectEvidence(ctx, tok, e.Key, e.Evidence)
	default:
		return nil, badRequest("unknown effect action %q", e.Action)
	}
	if errors.Is(err, jobstore.ErrEffectNotFound) {
		return nil, badRequest("no effect intent %q", e.Key)
	}
	if err != nil {
		return nil, s.fenced(protocol.VerbEffect, err)
	}
	rep, err := rec.Reply()
	if err != nil {
		return nil, err
	}
	s.fx.requests.WithLabelValues(e.Action, rep.State).Inc()
	ev := s.jobLog(tok).Info()
	if rep.State == protocol.EffectInDoubt || (e.Action == protocol.EffectActionReserve && !rep.Holds(tok) && rep.State != protocol.EffectDone) {
		ev = s.jobLog(tok).Warn()
	}
	ev.Str("action", e.Action).Str("effect_key", e.Key).Str("state", rep.State).
		Str("holder_owner", rep.Owner).Int64("holder_generation", rep.Generation).Msg("effect " + e.Action)
	return rep, nil
}

// ownKeys checks that artifact keys lie under the token's own prefix
// jobs/<job_id>/g<generation>/ (protocol.CheckOwnKey).
func ownKeys(tok fencing.Token, keys []string) error {
	for _, k := range keys {
		if err := protocol.CheckOwnKey(tok, k); err != nil {
			return badRequest("%v", err)
		}
	}
	return nil
}
