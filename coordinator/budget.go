package coordinator

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

// Reasons an agent request is refused before any store work, the reason
// label of agent_requests_refused_total (docs/security.md, "Agent request
// budget").
const (
	refusedRate  = "rate"          // the agent's request budget is spent
	refusedReply = "reply_subject" // the reply subject is not the agent's own inbox
)

// unknownAgent is the agent label of refusals of agents the store does not
// know, so that the metric has one series per known agent at most.
const unknownAgent = "unknown"

// maxBuckets bounds the token buckets held at once: past it, buckets that
// are full (worth no more than a new one) are forgotten, and when none is,
// every further agent shares one bucket.
const maxBuckets = 4096

// budget is a token bucket per agent id: each agent request takes one
// token; tokens come back at rate per second up to burst. A zero rate is no
// budget. It is checked on the subscription's delivery, before a request
// reaches a worker, so that one agent's flood costs the others nothing but
// that check (docs/security.md, "Agent request budget").
type budget struct {
	rate  float64
	burst float64

	mu       sync.Mutex
	buckets  map[string]*bucket
	overflow bucket
	now      func() time.Time
}

type bucket struct {
	tokens  float64
	at      time.Time
	refused bool // the last request was refused
}

func newBudget(rate, burst int) *budget {
	if burst < 1 {
		burst = max(1, rate)
	}
	return &budget{rate: float64(rate), burst: float64(burst), buckets: map[string]*bucket{}, now: time.Now}
}

// allow takes a token of agentID's bucket and reports whether there was
// one, and, when there was not, whether the refusal is the first since the
// agent's last allowed request (the one answered).
func (b *budget) allow(agentID string) (ok, first bool) {
	if b == nil || b.rate <= 0 {
		return true, false
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	k, ok := b.buckets[agentID]
	if !ok {
		if len(b.buckets) >= maxBuckets {
			b.prune(now)
		}
		if len(b.buckets) >= maxBuckets {
			k = &b.overflow
		} else {
			k = &bucket{tokens: b.burst, at: now}
			b.buckets[agentID] = k
		}
	}
	k.refill(now, b.rate, b.burst)
	if k.tokens < 1 {
		first = !k.refused
		k.refused = true
		return false, first
	}
	k.tokens--
	k.refused = false
	return true, false
}

func (k *bucket) refill(now time.Time, rate, burst float64) {
	if k.at.IsZero() {
		k.tokens, k.at = burst, now
		return
	}
	if d := now.Sub(k.at); d > 0 {
		k.tokens = min(burst, k.tokens+d.Seconds()*rate)
		k.at = now
	}
}

// prune forgets the buckets that have refilled completely.
func (b *budget) prune(now time.Time) {
	for id, k := range b.buckets {
		k.refill(now, b.rate, b.burst)
		if k.tokens >= b.burst {
			delete(b.buckets, id)
		}
	}
}

// ownInbox reports whether reply lies in agentID's own reply inbox,
// _INBOX.<agent_id>.>, the only inbox examples/nats-server.conf lets that
// agent subscribe to: a reply anywhere else would go to a subject the
// agent named but may not read, such as another agent's inbox or subjects.
func ownInbox(agentID, reply string) bool {
	p := protocol.InboxPrefix(agentID)
	return len(reply) > len(p)+1 && strings.HasPrefix(reply, p) && reply[len(p)] == '.'
}

// knownAgents is the set of agent ids the store knows, for the agent label
// of refusals: it is replaced from every agent list read from the store and
// grows with every accepted hello.
type knownAgents struct {
	mu  sync.Mutex
	ids atomic.Pointer[map[string]bool]
}

func (k *knownAgents) label(agentID string) string {
	if m := k.ids.Load(); m != nil && (*m)[agentID] {
		return agentID
	}
	return unknownAgent
}

func (k *knownAgents) set(ids []string) {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	k.mu.Lock()
	k.ids.Store(&m)
	k.mu.Unlock()
}

func (k *knownAgents) add(agentID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	old := k.ids.Load()
	if old != nil && (*old)[agentID] {
		return
	}
	m := map[string]bool{agentID: true}
	if old != nil {
		for id := range *old {
			m[id] = true
		}
	}
	k.ids.Store(&m)
}
