// Package outbox delivers the coordinator's transactional outbox
// (docs/effects.md): the messages that publish accepted results and job
// failures, written by the store in the transaction that accepted them, sent
// by a Dispatcher through a Sender (a NATS subject or an HTTP endpoint) with
// their idempotency key, and marked delivered with the receiver's receipt.
package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/internal/redact"
)

// HeaderIdempotencyKey carries an outbox message's key on every delivery
// (NATS header and HTTP header). The NATS sender also sets Nats-Msg-Id to
// the key, so a JetStream stream drops duplicates within its window.
const HeaderIdempotencyKey = "Idempotency-Key"

// Message is one delivery of an outbox message. Key is the same on
// every attempt of every coordinator: a receiver drops a key it has seen.
type Message struct {
	Key        string
	JobID      string
	Generation int64
	Owner      string
	Attempt    int             // 1 for the first delivery
	Payload    json.RawMessage // {key, event, job_id, generation, owner, result or reason, manifest}
}

// Sender delivers outbox messages to whatever publishes results (a
// NATS subject, an HTTP endpoint). Send returns the receiver's receipt (its
// reply, as JSON); an error means the delivery may or may not have arrived,
// and it is retried with the same key.
type Sender interface {
	Send(ctx context.Context, m Message) (receipt json.RawMessage, err error)
}

// Options configures the transactional outbox. Zero durations take
// defaults.
type Options struct {
	// Publish writes the message of every accepted result, and of every
	// failure that ends a job, to the outbox in the transaction that
	// accepts it. It is implied by Sender.
	Publish bool
	// Sender, when set, makes this coordinator run a dispatcher that
	// delivers the outbox (any coordinator sharing the store may).
	Sender Sender
	// Interval is how often the dispatcher looks for due messages besides
	// being woken by a commit (default 1s).
	Interval time.Duration
	// Lease is how long a claimed message is not given to another
	// dispatcher: a coordinator that dies while delivering leaves it to
	// others after this (default 30s). It must exceed Timeout.
	Lease time.Duration
	// Timeout bounds one delivery (default 5s).
	Timeout time.Duration
	// Batch is how many messages one pass claims (default 16).
	Batch int
	// Backoff is the wait before the second attempt, doubled for every
	// later one up to MaxBackoff (defaults 500ms and 1m).
	Backoff    time.Duration
	MaxBackoff time.Duration
}

func (o *Options) defaults() {
	if o.Interval <= 0 {
		o.Interval = defaultOutboxInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultOutboxTimeout
	}
	if o.Lease <= 0 {
		o.Lease = defaultOutboxLease
	}
	if o.Lease <= o.Timeout {
		o.Lease = 2 * o.Timeout
	}
	if o.Batch <= 0 {
		o.Batch = defaultOutboxBatch
	}
	if o.Backoff <= 0 {
		o.Backoff = defaultOutboxBackoff
	}
	if o.MaxBackoff < o.Backoff {
		o.MaxBackoff = max(defaultOutboxMaxWait, o.Backoff)
	}
}

// defaultOutboxInterval and friends are the dispatcher's defaults.
const (
	defaultOutboxInterval = time.Second
	defaultOutboxLease    = 30 * time.Second
	defaultOutboxBatch    = 16
	defaultOutboxTimeout  = 5 * time.Second
	defaultOutboxBackoff  = 500 * time.Millisecond
	defaultOutboxMaxWait  = time.Minute
)

// Dispatcher delivers the outbox: it claims due pending messages from the
// store, sends each with its idempotency key and stores the receipt. A
// delivery that fails (or whose reply is lost) is retried with the same key
// after a backoff; one whose dispatcher dies is claimed again after the
// lease. Delivery is at least once; with a receiver that drops keys it has
// seen, each message takes effect once.
type Dispatcher struct {
	store jobstore.Store
	opts  Options
	log   zerolog.Logger
	kick  chan struct{}

	delivered prometheus.Counter
	failed    prometheus.Counter
}

// NewDispatcher returns a dispatcher of store's outbox through opts.Sender.
func NewDispatcher(store jobstore.Store, opts Options, log zerolog.Logger) *Dispatcher {
	opts.defaults()
	return &Dispatcher{
		store: store, opts: opts, kick: make(chan struct{}, 1),
		log: log.With().Str("component", "outbox").Logger(),
		delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "outbox_delivered_total",
			Help: "Outbox messages delivered by this coordinator (receipt stored).",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "outbox_delivery_failures_total",
			Help: "Outbox deliveries that failed or got no reply; each is retried with the same key.",
		}),
	}
}

// Collectors are the dispatcher's metrics, for the coordinator's registry.
func (d *Dispatcher) Collectors() []prometheus.Collector {
	return []prometheus.Collector{d.delivered, d.failed}
}

// Kick asks the dispatcher to look for due messages now.
func (d *Dispatcher) Kick() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Run delivers until ctx is done.
func (d *Dispatcher) Run(ctx context.Context) error {
	t := time.NewTicker(d.opts.Interval)
	defer t.Stop()
	for {
		for {
			n, err := d.DispatchOnce(ctx)
			if err != nil && ctx.Err() == nil {
				d.log.Error().Err(err).Msg("dispatch outbox")
			}
			if err != nil || n < d.opts.Batch {
				break // a full batch: more may be due
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-d.kick:
		}
	}
}

// DispatchOnce claims one batch of due messages and delivers them, one at a
// time; it returns how many it claimed.
func (d *Dispatcher) DispatchOnce(ctx context.Context) (int, error) {
	msgs, err := d.store.ClaimOutbox(ctx, d.opts.Batch, d.opts.Lease)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, m := range msgs {
		if ctx.Err() != nil {
			// Stopping: the claimed messages go to whoever claims them
			// after the lease, as after a crash.
			return len(msgs), nil
		}
		if err := d.deliver(ctx, m); err != nil {
			errs = append(errs, err)
		}
	}
	return len(msgs), errors.Join(errs...)
}

func (d *Dispatcher) deliver(ctx context.Context, r jobstore.EffectRecord) error {
	log := d.log.With().Str("effect_key", r.Key).Str("job_id", r.JobID).Str("owner", r.Owner).
		Int64("generation", r.Generation).Int("attempt", r.Attempts).Logger()
	sctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	receipt, err := d.opts.Sender.Send(sctx, Message{
		Key: r.Key, JobID: r.JobID, Generation: r.Generation, Owner: r.Owner, Attempt: r.Attempts, Payload: r.Payload,
	})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopping; the lease hands the message on
		}
		d.failed.Inc()
		wait := d.backoff(r.Attempts)
		log.Warn().Err(err).Dur("retry_in", wait).Msg("outbox delivery failed; retrying with the same key")
		if err := d.store.OutboxFailed(ctx, r.Key, err.Error(), wait); err != nil {
			return err
		}
		return nil
	}
	if len(receipt) == 0 || !json.Valid(receipt) {
		receipt, _ = json.Marshal(string(receipt))
	}
	if err := d.store.OutboxDelivered(ctx, r.Key, receipt); err != nil {
		return err
	}
	d.delivered.Inc()
	log.Info().Msg("outbox message delivered")
	return nil
}

// backoff is the wait after the attempt-th failed delivery.
func (d *Dispatcher) backoff(attempt int) time.Duration {
	w := d.opts.Backoff
	for i := 1; i < attempt && w < d.opts.MaxBackoff; i++ {
		w *= 2
	}
	return min(w, d.opts.MaxBackoff)
}

// NATSSender delivers outbox messages as NATS requests to Subject, with
// the key in the Idempotency-Key and Nats-Msg-Id headers. The reply is the
// receipt: a JetStream stream's publish acknowledgement, or whatever the
// subscriber answers. A reply carrying the NATS micro error headers, or a
// JSON object with an "error" member (a JetStream error), is a failed
// delivery.
type NATSSender struct {
	Conn    *nats.Conn
	Subject string
}

var _ Sender = NATSSender{}

// Send delivers m and returns the reply.
func (n NATSSender) Send(ctx context.Context, m Message) (json.RawMessage, error) {
	msg := nats.NewMsg(n.Subject)
	msg.Data = m.Payload
	msg.Header.Set(HeaderIdempotencyKey, m.Key)
	msg.Header.Set(nats.MsgIdHdr, m.Key)
	resp, err := n.Conn.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("publish %s to %s: %w", m.Key, n.Subject, err)
	}
	if code := resp.Header.Get(micro.ErrorCodeHeader); code != "" {
		return nil, fmt.Errorf("publish %s to %s: receiver answered %s %s", m.Key, n.Subject, code, resp.Header.Get(micro.ErrorHeader))
	}
	if len(resp.Data) == 0 && resp.Header.Get("Status") != "" {
		return nil, fmt.Errorf("publish %s to %s: status %s", m.Key, n.Subject, resp.Header.Get("Status"))
	}
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(resp.Data, &e) == nil && len(e.Error) > 0 && string(e.Error) != "null" {
		return nil, fmt.Errorf("publish %s to %s: receiver error %s", m.Key, n.Subject, e.Error)
	}
	return resp.Data, nil
}

// HTTPSender delivers outbox messages as HTTP POSTs of the payload to URL
// with the key in the Idempotency-Key header. A 2xx answer is the receipt
// ({"status": code, "body": the body}); anything else is a failed delivery.
type HTTPSender struct {
	URL    string
	Client *http.Client // nil: http.DefaultClient
}

var _ Sender = HTTPSender{}

// Send posts m and returns the answer.
func (h HTTPSender) Send(ctx context.Context, m Message) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(m.Payload))
	if err != nil {
		return nil, fmt.Errorf("post %s: %w", m.Key, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderIdempotencyKey, m.Key)
	c := h.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post %s: %w", m.Key, redact.Error(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("post %s: read answer: %w", m.Key, redact.Error(err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("post %s: %s", m.Key, resp.Status)
	}
	var b any = string(body)
	if json.Valid(body) {
		b = json.RawMessage(body)
	}
	return json.Marshal(map[string]any{"status": resp.StatusCode, "body": b})
}
