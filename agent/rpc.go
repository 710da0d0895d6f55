package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/protocol/natsrpc"
)

// rpc sends the agent's requests and routes their replies, from one
// subscription on the agent's own inbox. Unlike nats.Conn.Request it
// separates the publish from the wait, so that a job's fenced request is
// published only while its lease is held, atomically with the job's stop
// (see job.gate): once a stop has returned, no request of that job leaves
// the agent.
type rpc struct {
	nc     *nats.Conn
	prefix string // <inbox>. ; replies arrive on <inbox>.<seq>
	sub    *nats.Subscription

	mu      sync.Mutex
	seq     uint64
	waiting map[string]chan *nats.Msg
}

func newRPC(nc *nats.Conn) (*rpc, error) {
	r := &rpc{nc: nc, prefix: nc.NewInbox() + ".", waiting: map[string]chan *nats.Msg{}}
	sub, err := nc.Subscribe(r.prefix+"*", r.deliver)
	if err != nil {
		return nil, fmt.Errorf("subscribe replies: %w", err)
	}
	r.sub = sub
	return r, nil
}

func (r *rpc) close() { _ = r.sub.Unsubscribe() }

func (r *rpc) deliver(m *nats.Msg) {
	r.mu.Lock()
	ch := r.waiting[m.Subject]
	delete(r.waiting, m.Subject)
	r.mu.Unlock()
	if ch != nil {
		ch <- m
	}
}

// request publishes data on subj through publish (nil: publish at once)
// and decodes the reply into resp. publish returns an error to refuse
// sending.
func (r *rpc) request(ctx context.Context, subj string, req, resp any, publish func(func() error) error) error {
	data, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode %s: %w", subj, err)
	}
	ch := make(chan *nats.Msg, 1)
	r.mu.Lock()
	r.seq++
	reply := r.prefix + strconv.FormatUint(r.seq, 36)
	r.waiting[reply] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.waiting, reply)
		r.mu.Unlock()
	}()
	m := &nats.Msg{Subject: subj, Reply: reply, Data: data}
	send := func() error { return r.nc.PublishMsg(m) }
	if publish != nil {
		err = publish(send)
	} else {
		err = send()
	}
	if err != nil {
		return fmt.Errorf("request %s: %w", subj, err)
	}
	select {
	case msg := <-ch:
		return natsrpc.DecodeReply(msg, subj, resp)
	case <-ctx.Done():
		return fmt.Errorf("request %s: %w", subj, ctx.Err())
	}
}
