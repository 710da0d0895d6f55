package events

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// EndStore is what the end publisher writes to: a jobstore.Store.
type EndStore interface {
	Source
	PublishEnd(ctx context.Context, e jobstore.Event, key string) (bool, error)
}

// DefaultCatchUp is how many write_events rows before its start an end
// publisher reads again, for the ends that happened while no coordinator
// published.
const DefaultCatchUp = 100000

// EndPublisher writes an outbox message for every job that ends other than
// SUCCEEDED (FAILED, CANCELLED, TIMED_OUT, NEEDS_DECISION) with its reason,
// under the key jobstore.OutboxFailureKey(job, generation of the end
// event). An agent's failure has that message already (FailOutbox writes it
// with the failure); the publisher adds it for the ends no agent reports:
// cancels, deadlines, attempts used up, decisions awaited. Every
// coordinator may run one: the key makes the message unique.
type EndPublisher struct {
	Broker *Broker
	Store  EndStore
	// CatchUp is how many rows before the newest the publisher starts
	// from (DefaultCatchUp when zero; negative: none).
	CatchUp int64
	// Published, when set, is called after each message written (to kick
	// the dispatcher).
	Published func()
	Log       zerolog.Logger
}

// Run publishes until ctx is done.
func (p *EndPublisher) Run(ctx context.Context) error {
	catchUp := p.CatchUp
	if catchUp == 0 {
		catchUp = DefaultCatchUp
	}
	last, err := p.Store.LastEventID(ctx)
	for err != nil {
		p.Log.Warn().Err(err).Msg("read last event id")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
		last, err = p.Store.LastEventID(ctx)
	}
	s := p.Broker.Open(Filter{}, max(0, last-max(catchUp, 0)))
	defer s.Close()
	for {
		e, _, err := s.Next(ctx, nil)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !PublishesEnd(e) {
			continue
		}
		for {
			ok, err := p.Store.PublishEnd(ctx, e, jobstore.OutboxFailureKey(e.JobID, e.Generation))
			if err == nil {
				if ok {
					p.Log.Info().Str("job_id", e.JobID).Int64("generation", e.Generation).Str("status", e.Status).Msg("end of job written to the outbox")
					if p.Published != nil {
						p.Published()
					}
				}
				break
			}
			p.Log.Warn().Err(err).Str("job_id", e.JobID).Msg("write end of job to the outbox; retrying")
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
}

// PublishesEnd reports whether e is the end of a job the outbox publishes
// as a failure: any end state but SUCCEEDED.
func PublishesEnd(e jobstore.Event) bool {
	return e.Status != "" && e.Status != jobstore.StatusSucceeded && jobstore.Finished(e.Status)
}
