package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// Source is what the broker reads events from: a jobstore.Store.
type Source interface {
	Events(ctx context.Context, q jobstore.EventQuery) ([]jobstore.Event, error)
	LastEventID(ctx context.Context) (int64, error)
}

// BrokerOptions tune a Broker. Zero fields take the defaults.
type BrokerOptions struct {
	// Interval is how often the poller reads new events (default 100ms).
	Interval time.Duration
	// GapTimeout is how long an id missing below committed ones is waited
	// for (a transaction that took its id and has not committed yet) before
	// it is taken as never coming (a rolled-back one). Default 5s.
	GapTimeout time.Duration
	// Batch is how many rows one read takes (default 1000).
	Batch int
	// Buffer is how many events a subscriber may fall behind before it is
	// dropped (it then resumes from the store). Default 1024. The queue
	// grows to it on demand: an idle subscriber holds none.
	Buffer int
	Log    zerolog.Logger
}

func (o *BrokerOptions) defaults() {
	if o.Interval <= 0 {
		o.Interval = 100 * time.Millisecond
	}
	if o.GapTimeout <= 0 {
		o.GapTimeout = 5 * time.Second
	}
	if o.Batch <= 0 {
		o.Batch = 1000
	}
	if o.Buffer <= 0 {
		o.Buffer = 1024
	}
}

// Broker reads the store's new events with one poller and hands each to
// every subscriber whose filter it matches, so the number of watchers does
// not change the load on the database.
//
// Events are handed out in id order and only once every smaller id is
// settled: write_events ids are taken when a row is inserted, so in
// PostgreSQL a row can become visible after a row with a larger id. A
// missing id holds back the ones after it until it appears or GapTimeout
// passes. A subscriber therefore sees, on its channel, exactly the events
// with an id above its From, and the store has every event up to From: a
// stream that reads the store up to From and then the channel misses none
// and repeats none (Stream).
type Broker struct {
	src  Source
	opts BrokerOptions
	log  zerolog.Logger
	kick chan struct{}

	ready    chan struct{}
	readyErr error

	mu       sync.Mutex
	cursor   int64 // every id ≤ cursor is settled
	subs     map[*Subscription]struct{}
	gapSince map[int64]time.Time // first missing id → when it was first missed
	running  bool
}

// NewBroker returns a broker of src; Run starts it.
func NewBroker(src Source, opts BrokerOptions) *Broker {
	opts.defaults()
	return &Broker{
		src: src, opts: opts, log: opts.Log.With().Str("component", "events").Logger(),
		kick: make(chan struct{}, 1), ready: make(chan struct{}),
		subs: map[*Subscription]struct{}{}, gapSince: map[int64]time.Time{},
	}
}

// ErrBrokerStopped: the broker is not running (any more).
var ErrBrokerStopped = errors.New("event broker stopped")

// Run polls until ctx is done, then closes every subscription.
func (b *Broker) Run(ctx context.Context) error {
	b.mu.Lock()
	if b.running {
		b.mu.Unlock()
		return fmt.Errorf("run event broker: already running")
	}
	b.running = true
	b.mu.Unlock()
	defer b.stop()
	for {
		last, err := b.src.LastEventID(ctx)
		if err == nil {
			b.mu.Lock()
			b.cursor = last
			b.mu.Unlock()
			close(b.ready)
			break
		}
		b.log.Warn().Err(err).Msg("read last event id")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(b.opts.Interval * 10):
		}
	}
	t := time.NewTicker(b.opts.Interval)
	defer t.Stop()
	for {
		for {
			n, err := b.PollOnce(ctx)
			if err != nil && ctx.Err() == nil {
				b.log.Warn().Err(err).Msg("poll events")
			}
			if err != nil || n < b.opts.Batch {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-b.kick:
		}
	}
}

func (b *Broker) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.ready:
	default:
		b.readyErr = ErrBrokerStopped
		close(b.ready)
	}
	b.readyErr = ErrBrokerStopped
	for s := range b.subs {
		s.closeLocked(false)
	}
}

// Kick asks the poller to read now (after a write this process made).
func (b *Broker) Kick() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// Cursor returns the id up to which every event is settled.
func (b *Broker) Cursor() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cursor
}

// PollOnce reads the rows after the cursor, settles what it can and fans
// the events out; it returns how many rows it read.
func (b *Broker) PollOnce(ctx context.Context) (int, error) {
	b.mu.Lock()
	after := b.cursor
	b.mu.Unlock()
	rows, err := b.src.Events(ctx, jobstore.EventQuery{AfterID: after, All: true, Limit: b.opts.Batch})
	if err != nil {
		return 0, err
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	next := b.cursor
	var out []jobstore.Event
	for _, e := range rows {
		if e.ID != next+1 {
			first, seen := b.gapSince[next+1]
			if !seen {
				b.gapSince[next+1] = now
				break
			}
			if now.Sub(first) < b.opts.GapTimeout {
				break
			}
			b.log.Debug().Int64("from", next+1).Int64("to", e.ID-1).Msg("event ids never committed; going on")
		}
		next = e.ID
		if e.Type != "" {
			out = append(out, e)
		}
	}
	b.cursor = next
	for id := range b.gapSince {
		if id <= next {
			delete(b.gapSince, id)
		}
	}
	for _, e := range out {
		m := Message{Event: e, Frame: Frame(e)} // rendered once for every subscriber
		for s := range b.subs {
			if !s.filter.match(e) {
				continue
			}
			if len(s.queue) >= b.opts.Buffer {
				s.closeLocked(true)
				continue
			}
			s.queue = append(s.queue, m)
			select {
			case s.ready <- struct{}{}:
			default:
			}
		}
	}
	return len(rows), nil
}

// Message is an event as the broker hands it out, with its SSE frame.
type Message struct {
	Event jobstore.Event
	Frame []byte // the event as Server-Sent Events (Frame); nil: not rendered yet
}

// Frame renders e as one Server-Sent Events frame: its id, its type as the
// event name and the event as JSON.
func Frame(e jobstore.Event) []byte {
	data, err := json.Marshal(e)
	if err != nil {
		// An Event holds only strings, numbers and times: it always encodes.
		panic(fmt.Sprintf("encode event %d: %v", e.ID, err))
	}
	return fmt.Appendf(nil, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Type, data)
}

// Filter selects the events of a subscription.
type Filter struct {
	JobID    string   // "" for every job
	Projects []string // nil for every project
}

func (f Filter) match(e jobstore.Event) bool {
	if f.JobID != "" && e.JobID != f.JobID {
		return false
	}
	return f.Projects == nil || slices.Contains(f.Projects, e.Project)
}

// Subscription receives the events with an id above From that match its
// filter, in id order, until Close: Ready fires when Take has some. It
// ends when the subscriber fell behind by more than the buffer (Lagged)
// or the broker stopped.
type Subscription struct {
	From   int64
	ready  chan struct{} // a wake-up: queued events, or the end
	queue  []Message
	filter Filter
	b      *Broker
	lagged bool
	closed bool
}

// Subscribe registers a subscription once the broker has read its start.
func (b *Broker) Subscribe(ctx context.Context, f Filter) (*Subscription, error) {
	select {
	case <-b.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.readyErr != nil {
		return nil, b.readyErr
	}
	s := &Subscription{ready: make(chan struct{}, 1), From: b.cursor, filter: f, b: b}
	b.subs[s] = struct{}{}
	return s, nil
}

// Subscribers returns the number of open subscriptions.
func (b *Broker) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.closeLocked(false)
}

// Ready fires when Take has events for the subscriber or the subscription
// ended.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Take returns the events queued for the subscriber, in id order; open
// false once the subscription ended and every queued event was taken.
func (s *Subscription) Take() (msgs []Message, open bool) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	msgs, s.queue = s.queue, nil
	return msgs, len(msgs) > 0 || !s.closed
}

// Lagged reports whether the subscription ended because the subscriber
// fell behind.
func (s *Subscription) Lagged() bool {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.lagged
}

func (s *Subscription) closeLocked(lagged bool) {
	if s.closed {
		return
	}
	s.closed, s.lagged = true, lagged
	delete(s.b.subs, s)
	close(s.ready)
}
