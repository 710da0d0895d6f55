package bench

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
)

// agentStats are what the protocol-level agents of a run measured.
type agentStats struct {
	heartbeats atomic.Int64
	hbErrors   atomic.Int64
	assigns    atomic.Int64
	results    atomic.Int64
	stale      atomic.Int64
	errs       atomic.Int64
	hbLatency  Durations
	commitLat  Durations
	lastErrMu  sync.Mutex
	lastErr    error
	onAssign   func(jobID string, at time.Time)
	// onResult, when set, is called once a job's result was accepted.
	onResult func(jobID string, at time.Time)
	// onHeartbeat, when set, is called after every heartbeat with the
	// time it was sent, its round trip and its error.
	onHeartbeat func(start time.Time, rtt time.Duration, err error)
	measureFrom atomic.Int64 // unix nanos; latencies before it are not kept
}

func (s *agentStats) measuring(t time.Time) bool {
	from := s.measureFrom.Load()
	return from != 0 && t.UnixNano() >= from
}

func (s *agentStats) fail(err error) {
	s.errs.Add(1)
	s.lastErrMu.Lock()
	s.lastErr = err
	s.lastErrMu.Unlock()
}

// simAgent speaks wire protocol v1 as an agent does (hello, heartbeats, the
// first renewal before any work, renewals every TTL/3, registrations and a
// result per job, a stop at once on revoke or 409) and runs each job's steps
// on a simulated phone. It uploads nothing: the artifacts it registers are
// the UI dumps the phone produced, with their real size and SHA-256.
type simAgent struct {
	id    string
	nc    *nats.Conn
	phone *capture.Simulated
	slots int
	work  time.Duration // extra time each job takes
	stats *agentStats
	// skipWaits makes the agent pass over wait steps: it stands in for
	// the new owner of a job and only needs to finish it.
	skipWaits bool

	bootID string
	subs   []*nats.Subscription
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	jobs    map[string]context.CancelFunc
	hbEvery time.Duration
	ttl     time.Duration
}

func newSimAgent(id string, nc *nats.Conn, phone *capture.Simulated, slots int, work time.Duration, stats *agentStats) *simAgent {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &simAgent{id: id, nc: nc, phone: phone, slots: max(1, slots), work: work, stats: stats,
		bootID: hex.EncodeToString(b[:]), jobs: map[string]context.CancelFunc{}}
}

func (a *simAgent) owner() string { return fencing.Owner(a.id, a.bootID) }

func (a *simAgent) devices() []protocol.Device {
	if a.phone == nil {
		return nil
	}
	return []protocol.Device{a.phone.Info()}
}

// start subscribes, says hello and starts the heartbeats.
func (a *simAgent) start(ctx context.Context) error {
	a.ctx, a.cancel = context.WithCancel(ctx)
	for verb, h := range map[string]nats.MsgHandler{
		protocol.VerbAssign:  a.onAssign,
		protocol.VerbRevoke:  a.onRevoke,
		protocol.VerbControl: a.onControl,
	} {
		s, err := a.nc.Subscribe(protocol.AgentSubject(a.id, verb), h)
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", verb, err)
		}
		a.subs = append(a.subs, s)
	}
	if err := a.nc.Flush(); err != nil {
		return fmt.Errorf("flush subscriptions: %w", err)
	}
	if err := a.hello(); err != nil {
		return err
	}
	a.wg.Go(a.heartbeats)
	return nil
}

func (a *simAgent) stop() {
	if a.cancel != nil {
		a.cancel()
	}
	for _, s := range a.subs {
		_ = s.Unsubscribe()
	}
	a.wg.Wait()
}

func (a *simAgent) request(ctx context.Context, verb string, req, resp any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return natsrpc.Request(ctx, a.nc, protocol.CoordSubject(a.id, verb), req, resp)
}

func (a *simAgent) hello() error {
	var rep protocol.HelloReply
	err := a.request(a.ctx, protocol.VerbHello, protocol.Hello{BootID: a.bootID, Version: "bench", Devices: a.devices(), Slots: a.slots}, &rep)
	if err != nil {
		return fmt.Errorf("hello as %s: %w", a.id, err)
	}
	a.mu.Lock()
	a.hbEvery = time.Duration(rep.HeartbeatMS) * time.Millisecond
	a.ttl = time.Duration(rep.LeaseTTLMS) * time.Millisecond
	a.mu.Unlock()
	return nil
}

func (a *simAgent) heartbeats() {
	a.mu.Lock()
	every := a.hbEvery
	a.mu.Unlock()
	if every <= 0 {
		every = 5 * time.Second
	}
	// Agents start at different moments in real life: spread the beats.
	t := time.NewTimer(time.Duration(mrand.Int64N(int64(every))))
	defer t.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(every)
		a.mu.Lock()
		hb := protocol.Heartbeat{BootID: a.bootID, Devices: a.devices(), Free: max(0, a.slots-len(a.jobs))}
		a.mu.Unlock()
		start := time.Now()
		err := a.request(a.ctx, protocol.VerbHeartbeat, hb, &protocol.Ack{})
		if a.ctx.Err() != nil {
			return
		}
		if a.stats.onHeartbeat != nil {
			a.stats.onHeartbeat(start, time.Since(start), err)
		}
		if err != nil {
			a.stats.hbErrors.Add(1)
			if errors.Is(err, protocol.ErrUnavailable) {
				_ = a.hello()
			}
			continue
		}
		a.stats.heartbeats.Add(1)
		if a.stats.measuring(start) {
			a.stats.hbLatency.Add(time.Since(start))
		}
	}
}

func respond(m *nats.Msg, v any) {
	data, _ := json.Marshal(v)
	_ = m.Respond(data)
}

func respondError(m *nats.Msg, code int, desc string) {
	msg := nats.NewMsg(m.Reply)
	msg.Header.Set("Nats-Service-Error", desc)
	msg.Header.Set("Nats-Service-Error-Code", fmt.Sprint(code))
	_ = m.RespondMsg(msg)
}

func (a *simAgent) onAssign(m *nats.Msg) {
	at := time.Now()
	var as protocol.Assign
	if err := json.Unmarshal(m.Data, &as); err != nil {
		respondError(m, protocol.CodeBadRequest, "decode assign")
		return
	}
	a.mu.Lock()
	if as.Token.Owner != a.owner() {
		a.mu.Unlock()
		respondError(m, protocol.CodeForbidden, "token owner is not this agent process")
		return
	}
	if _, ok := a.jobs[as.Token.JobID]; ok || len(a.jobs) >= a.slots || a.ctx.Err() != nil {
		a.mu.Unlock()
		respondError(m, protocol.CodeUnavailable, "no free slot")
		return
	}
	ctx, cancel := context.WithCancel(a.ctx)
	a.jobs[as.Token.JobID] = cancel
	a.mu.Unlock()
	respond(m, protocol.Ack{OK: true})
	a.stats.assigns.Add(1)
	if a.stats.onAssign != nil {
		a.stats.onAssign(as.Token.JobID, at)
	}
	ttl := time.Duration(as.LeaseTTLMS) * time.Millisecond
	a.wg.Go(func() {
		defer cancel()
		a.run(ctx, as.Token, ttl, as.Task)
		a.mu.Lock()
		delete(a.jobs, as.Token.JobID)
		a.mu.Unlock()
	})
}

func (a *simAgent) onRevoke(m *nats.Msg) {
	var r protocol.Revoke
	if json.Unmarshal(m.Data, &r) != nil {
		return
	}
	a.mu.Lock()
	cancel := a.jobs[r.Token.JobID]
	a.mu.Unlock()
	if cancel != nil && r.Token.Owner == a.owner() {
		cancel()
	}
}

func (a *simAgent) onControl(m *nats.Msg) {
	respond(m, protocol.Ack{OK: true})
}

// call sends one fenced request of a job; a 409 stops the job.
func (a *simAgent) call(ctx context.Context, cancel func(), verb string, req, resp any) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	err := a.request(context.WithoutCancel(ctx), verb, req, resp)
	if errors.Is(err, fencing.ErrStale) {
		a.stats.stale.Add(1)
		cancel()
	}
	return err
}

func (a *simAgent) run(ctx context.Context, tok fencing.Token, ttl time.Duration, task protocol.Task) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	renew := func() error {
		return a.call(ctx, cancel, protocol.VerbRenew, protocol.Renew{Token: tok}, &protocol.RenewReply{})
	}
	if err := renew(); err != nil {
		if ctx.Err() == nil {
			a.stats.fail(fmt.Errorf("renew %s: %w", tok, err))
		}
		return
	}
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	lastRenew := time.Now()
	var arts int
	for i, s := range task.Steps {
		if ctx.Err() != nil {
			return
		}
		if time.Since(lastRenew) > ttl/3 {
			if err := renew(); err != nil {
				return
			}
			lastRenew = time.Now()
		}
		switch s.Op {
		case protocol.OpWait:
			if a.skipWaits {
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(s.DurationMS) * time.Millisecond):
			}
		case protocol.OpTap:
			if a.phone != nil {
				_ = a.phone.Tap(ctx, s.X, s.Y)
			}
		case protocol.OpUIDump:
			var data []byte
			if a.phone != nil {
				data, _ = a.phone.UIDump(ctx)
			}
			name := s.Name
			if name == "" {
				name = fmt.Sprintf("step-%d.xml", i+1)
			}
			sum := sha256.Sum256(data)
			err := a.call(ctx, cancel, protocol.VerbArtifact, protocol.Artifact{
				Token: tok, Name: name, Key: tok.ObjectKey(name), Size: int64(len(data)),
				SHA256: hex.EncodeToString(sum[:]), ContentType: "application/xml",
			}, &protocol.Ack{})
			if err != nil {
				if ctx.Err() == nil {
					a.stats.fail(fmt.Errorf("register %s: %w", tok, err))
				}
				return
			}
			arts++
		}
	}
	if a.work > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(a.work):
		}
	}
	res, _ := json.Marshal(map[string]any{"artifacts": arts, "steps": len(task.Steps)})
	start := time.Now()
	err := a.call(ctx, cancel, protocol.VerbResult, protocol.Result{Token: tok, Result: res}, &protocol.ResultReply{})
	if err != nil {
		if ctx.Err() == nil {
			a.stats.fail(fmt.Errorf("result %s: %w", tok, err))
		}
		return
	}
	a.stats.results.Add(1)
	if a.stats.onResult != nil {
		a.stats.onResult(tok.JobID, time.Now())
	}
	if a.stats.measuring(start) {
		a.stats.commitLat.Add(time.Since(start))
	}
}
