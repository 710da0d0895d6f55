package events

import (
	"context"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// backfillPage is how many events a stream reads from the store at once.
const backfillPage = 500

// Stream is one client's ordered view of the events matching a filter after
// a given id: first what the store has, then what the broker hands out,
// with no event missed or given twice, also when the client falls behind
// and the broker drops its subscription.
type Stream struct {
	b       *Broker
	src     Source
	f       Filter
	last    int64 // id of the last event returned (or the resume point)
	sub     *Subscription
	pending []Message // read from the store, up to sub.From
	live    []Message // taken from the subscription
	filled  bool      // the store has been read up to sub.From
}

// Open returns a stream of the events matching f with an id above after.
func (b *Broker) Open(f Filter, after int64) *Stream {
	return &Stream{b: b, src: b.src, f: f, last: after}
}

// Last returns the id of the last event Next returned (or the resume point).
func (s *Stream) Last() int64 { return s.last }

// Start subscribes to the broker, if the stream has no subscription yet.
func (s *Stream) Start(ctx context.Context) error {
	if s.sub != nil {
		return nil
	}
	sub, err := s.b.Subscribe(ctx, s.f)
	if err != nil {
		return err
	}
	s.sub, s.filled, s.live = sub, false, nil
	return nil
}

// Close releases the stream's subscription.
func (s *Stream) Close() {
	if s.sub != nil {
		s.sub.Close()
		s.sub = nil
	}
}

// Next returns the next event. It returns ok false, without an error, when
// wake fires first (nil never fires), and ctx's error when ctx is done.
func (s *Stream) Next(ctx context.Context, wake <-chan time.Time) (ev jobstore.Event, ok bool, err error) {
	m, ok, err := s.NextMessage(ctx, wake)
	return m.Event, ok, err
}

// NextMessage is Next with the event's SSE frame, when the broker rendered
// it (events read from the store have none).
func (s *Stream) NextMessage(ctx context.Context, wake <-chan time.Time) (m Message, ok bool, err error) {
	for {
		if len(s.pending) > 0 {
			m, s.pending = s.pending[0], s.pending[1:]
			s.last = m.Event.ID
			return m, true, nil
		}
		for len(s.live) > 0 {
			m, s.live = s.live[0], s.live[1:]
			if m.Event.ID > s.last {
				s.last = m.Event.ID
				return m, true, nil
			}
		}
		s.live = nil
		if s.sub == nil {
			if err := s.Start(ctx); err != nil {
				return m, false, err
			}
		}
		if !s.filled {
			if err := s.fill(ctx); err != nil {
				return m, false, err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return m, false, ctx.Err()
		case <-wake:
			return m, false, nil
		case <-s.sub.Ready():
			got, open := s.sub.Take()
			if !open {
				lagged := s.sub.Lagged()
				s.sub = nil
				if !lagged {
					return m, false, ErrBrokerStopped
				}
				continue // resubscribe and read what was missed from the store
			}
			s.live = got
		}
	}
}

// fill reads one page of the store's events between the last one returned
// and the subscription's start; Next calls it only with nothing pending.
func (s *Stream) fill(ctx context.Context) error {
	if s.last >= s.sub.From {
		s.filled = true
		return nil
	}
	evs, err := s.src.Events(ctx, jobstore.EventQuery{
		JobID: s.f.JobID, Projects: s.f.Projects, AfterID: s.last, UpTo: s.sub.From, Limit: backfillPage,
	})
	if err != nil {
		return err
	}
	if len(evs) < backfillPage {
		s.filled = true
	}
	for _, e := range evs {
		s.pending = append(s.pending, Message{Event: e})
	}
	return nil
}
