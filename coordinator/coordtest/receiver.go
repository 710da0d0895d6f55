package coordtest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/coordinator/outbox"
)

// Delivery is one outbox message as a Receiver got it.
type Delivery struct {
	Key        string // the Idempotency-Key header
	PayloadKey string // the payload's own "key"
	JobID      string
	Applied    bool // the key was new: the message took effect
	Replied    bool // false when the reply was dropped (lost)
}

// Receiver consumes outbox messages on a NATS subject the way a results
// consumer must: it drops keys it has seen. The first delivery of a key
// takes effect and is answered with a receipt; a later one takes no effect
// and is answered with the same receipt. DropReplies makes it lose replies,
// as a network would, after the message took effect.
type Receiver struct {
	nc  *nats.Conn
	sub *nats.Subscription

	mu         sync.Mutex
	receipts   map[string]json.RawMessage
	applied    []string
	deliveries []Delivery
	drop       int
}

// StartReceiver subscribes a receiver to subject on the NATS server at url
// until the end of the test.
func StartReceiver(t testing.TB, url, subject string) *Receiver {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name("outbox receiver"))
	if err != nil {
		t.Fatalf("connect receiver: %v", err)
	}
	r := &Receiver{nc: nc, receipts: map[string]json.RawMessage{}}
	r.sub, err = nc.Subscribe(subject, r.onMsg)
	if err != nil {
		nc.Close()
		t.Fatalf("subscribe receiver: %v", err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush receiver: %v", err)
	}
	t.Cleanup(nc.Close)
	return r
}

func (r *Receiver) onMsg(m *nats.Msg) {
	var p struct {
		Key   string `json:"key"`
		JobID string `json:"job_id"`
	}
	_ = json.Unmarshal(m.Data, &p)
	d := Delivery{Key: m.Header.Get(outbox.HeaderIdempotencyKey), PayloadKey: p.Key, JobID: p.JobID}
	r.mu.Lock()
	rc, seen := r.receipts[d.Key]
	if !seen {
		d.Applied = true
		r.applied = append(r.applied, d.Key)
		rc = json.RawMessage(fmt.Sprintf(`{"key": %q, "seq": %d}`, d.Key, len(r.applied)))
		r.receipts[d.Key] = rc
	}
	d.Replied = r.drop == 0
	if r.drop > 0 {
		r.drop--
	}
	r.deliveries = append(r.deliveries, d)
	r.mu.Unlock()
	if d.Replied {
		_ = m.Respond(rc)
	}
}

// DropReplies makes the next n deliveries take effect as usual but lose
// their reply.
func (r *Receiver) DropReplies(n int) {
	r.mu.Lock()
	r.drop = n
	r.mu.Unlock()
}

// Applied returns the keys that took effect, in order.
func (r *Receiver) Applied() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.applied...)
}

// Deliveries returns every delivery received, in order.
func (r *Receiver) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.deliveries...)
}
