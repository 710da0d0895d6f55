package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uploader"
)

// ErrShutdown is the stop cause of jobs cut short by the agent shutting down.
var ErrShutdown = errors.New("agent shutting down")

// Phone runs the steps of one job on one acquired phone.
type Phone interface {
	Serial() string
	// RunStep performs one step and returns what it captured.
	RunStep(ctx context.Context, step protocol.Step) ([]capture.Artifact, error)
	// OpLog returns the operation log so far as an artifact, and how many
	// entries it holds.
	OpLog() (capture.Artifact, int)
}

// Phones hands out phones for jobs, one job per phone.
type Phones interface {
	// Acquire locks a phone matching sel for the job whose context is
	// jobCtx, until release is called.
	Acquire(jobCtx context.Context, sel protocol.DeviceSelector) (p Phone, release func(), err error)
	// Inventory lists the phones attached now.
	Inventory() []protocol.Device
}

// Options configures an Agent.
type Options struct {
	AgentID        string
	Version        string
	Conn           *nats.Conn
	Phones         Phones
	Store          uploader.Uploader
	Slots          int           // jobs run at once
	SafetyMargin   time.Duration // subtracted from the TTL for the self-fence deadline
	RequestTimeout time.Duration // per NATS request
	Log            zerolog.Logger
}

// StopRecord says when and why a job was stopped and what was cut short.
type StopRecord struct {
	Token    fencing.Token
	Cause    string
	At       time.Time
	CutShort string // the step or call in progress
}

// JobStatus is a running job as the agent sees it.
type JobStatus struct {
	Token    fencing.Token
	Step     int
	Deadline time.Time
}

// Agent is the daemon core. Construct with New, then Run.
type Agent struct {
	opts   Options
	nc     *nats.Conn
	bootID string
	owner  string
	log    zerolog.Logger

	mu    sync.Mutex
	jobs  map[string]*job
	stops []StopRecord
	wg    sync.WaitGroup
	ttl   time.Duration
}

// New validates opts and returns an agent with a fresh boot id.
func New(opts Options) (*Agent, error) {
	if err := protocol.ValidateAgentID(opts.AgentID); err != nil {
		return nil, fmt.Errorf("new agent: %w", err)
	}
	if opts.Conn == nil || opts.Phones == nil || opts.Store == nil {
		return nil, errors.New("new agent: conn, phones and store are required")
	}
	if opts.Slots <= 0 {
		opts.Slots = 1
	}
	if opts.SafetyMargin <= 0 {
		opts.SafetyMargin = 2 * time.Second
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 5 * time.Second
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("new agent: boot id: %w", err)
	}
	a := &Agent{
		opts:   opts,
		nc:     opts.Conn,
		bootID: hex.EncodeToString(b[:]),
		jobs:   map[string]*job{},
	}
	a.owner = fencing.Owner(opts.AgentID, a.bootID)
	a.log = opts.Log.With().Str("component", "agent").Str("agent_id", opts.AgentID).Str("boot_id", a.bootID).Logger()
	return a, nil
}

// Owner returns "<agent_id>/<boot_id>" of this process.
func (a *Agent) Owner() string { return a.owner }

// BootID returns this process's boot id.
func (a *Agent) BootID() string { return a.bootID }

// Stops returns every stop recorded so far.
func (a *Agent) Stops() []StopRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]StopRecord(nil), a.stops...)
}

// Jobs returns the jobs running now.
func (a *Agent) Jobs() []JobStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]JobStatus, 0, len(a.jobs))
	for _, j := range a.jobs {
		out = append(out, j.status())
	}
	return out
}

func (a *Agent) request(ctx context.Context, verb string, req, resp any) error {
	rctx, cancel := context.WithTimeout(ctx, a.opts.RequestTimeout)
	defer cancel()
	return protocol.Request(rctx, a.nc, protocol.CoordSubject(a.opts.AgentID, verb), req, resp)
}

// Run subscribes to the agent's subjects, says hello, keeps heartbeats going
// and runs assigned jobs until ctx is cancelled. On return every job has
// stopped and every goroutine it started has ended.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Jobs get their own context so that shutdown stops them with a cause
	// that says so.
	jobsCtx, stopJobs := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopJobs(ErrShutdown)
	var subs []*nats.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	for verb, h := range map[string]nats.MsgHandler{
		protocol.VerbAssign:  func(m *nats.Msg) { a.onAssign(ctx, jobsCtx, m) },
		protocol.VerbRevoke:  a.onRevoke,
		protocol.VerbControl: a.onControl,
	} {
		s, err := a.nc.Subscribe(protocol.AgentSubject(a.opts.AgentID, verb), h)
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", verb, err)
		}
		subs = append(subs, s)
	}
	if err := a.nc.FlushTimeout(a.opts.RequestTimeout); err != nil {
		a.log.Warn().Err(err).Msg("flush subscriptions")
	}
	hb, err := a.hello(ctx)
	if err != nil {
		return err
	}
	// Say hello again whenever NATS reconnects: the coordinator may have
	// restarted and forgotten us.
	a.nc.SetReconnectHandler(func(*nats.Conn) {
		a.wg.Go(func() {
			if _, err := a.hello(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn().Err(err).Msg("hello after reconnect")
			}
		})
	})
	a.wg.Go(func() { a.heartbeats(ctx, hb) })
	<-ctx.Done()
	stopJobs(ErrShutdown)
	a.wg.Wait()
	return nil
}

func (a *Agent) hello(ctx context.Context) (time.Duration, error) {
	backoff := 200 * time.Millisecond
	for {
		var rep protocol.HelloReply
		err := a.request(ctx, protocol.VerbHello, protocol.Hello{
			BootID: a.bootID, Version: a.opts.Version, Devices: a.opts.Phones.Inventory(),
			Slots: a.opts.Slots, Capabilities: []string{"screenshot", "ui_dump", "input", "record"},
		}, &rep)
		if err == nil {
			a.mu.Lock()
			a.ttl = time.Duration(rep.LeaseTTLMS) * time.Millisecond
			a.mu.Unlock()
			a.log.Info().Str("coordinator_id", rep.CoordinatorID).Int64("lease_ttl_ms", rep.LeaseTTLMS).Msg("connected to coordinator")
			hb := time.Duration(rep.HeartbeatMS) * time.Millisecond
			if hb <= 0 {
				hb = 5 * time.Second
			}
			return hb, nil
		}
		if errors.Is(err, protocol.ErrForbidden) || errors.Is(err, protocol.ErrBadRequest) {
			return 0, fmt.Errorf("hello: %w", err)
		}
		a.log.Warn().Err(err).Dur("retry_in", backoff).Msg("hello failed")
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

func (a *Agent) heartbeats(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.mu.Lock()
		hb := protocol.Heartbeat{BootID: a.bootID, Free: a.opts.Slots - len(a.jobs)}
		for _, j := range a.jobs {
			hb.Running = append(hb.Running, j.tok)
		}
		a.mu.Unlock()
		hb.Devices = a.opts.Phones.Inventory()
		err := a.request(ctx, protocol.VerbHeartbeat, hb, &protocol.Ack{})
		if errors.Is(err, protocol.ErrUnavailable) {
			// The coordinator lost our session (restart): say hello again.
			if _, err := a.hello(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn().Err(err).Msg("hello after heartbeat refusal")
			}
		} else if err != nil && ctx.Err() == nil {
			a.log.Debug().Err(err).Msg("heartbeat")
		}
	}
}

func reply(m *nats.Msg, v any) {
	if m.Reply == "" {
		return
	}
	data, _ := json.Marshal(v)
	_ = m.Respond(data)
}

func replyError(m *nats.Msg, code int, desc string) {
	if m.Reply == "" {
		return
	}
	msg := nats.NewMsg(m.Reply)
	msg.Header.Set("Nats-Service-Error", desc)
	msg.Header.Set("Nats-Service-Error-Code", fmt.Sprint(code))
	_ = m.RespondMsg(msg)
}

func (a *Agent) onAssign(ctx, jobsCtx context.Context, m *nats.Msg) {
	var as protocol.Assign
	if err := json.Unmarshal(m.Data, &as); err != nil {
		replyError(m, protocol.CodeBadRequest, "decode assign: "+err.Error())
		return
	}
	if err := as.Token.Validate(); err != nil {
		replyError(m, protocol.CodeBadRequest, err.Error())
		return
	}
	if as.Token.Owner != a.owner {
		replyError(m, protocol.CodeForbidden, "token owner is not this agent process")
		return
	}
	if err := as.Task.Validate(); err != nil {
		replyError(m, protocol.CodeBadRequest, "invalid task: "+err.Error())
		return
	}
	if as.LeaseTTLMS <= 0 {
		replyError(m, protocol.CodeBadRequest, "lease_ttl_ms must be positive")
		return
	}
	ttl := time.Duration(as.LeaseTTLMS) * time.Millisecond
	if ttl <= a.opts.SafetyMargin {
		replyError(m, protocol.CodeBadRequest, "lease_ttl_ms is not longer than the agent's safety margin")
		return
	}
	a.mu.Lock()
	if ctx.Err() != nil {
		a.mu.Unlock()
		replyError(m, protocol.CodeUnavailable, "agent shutting down")
		return
	}
	if old, ok := a.jobs[as.Token.JobID]; ok {
		a.mu.Unlock()
		if old.tok == as.Token {
			reply(m, protocol.Ack{OK: true}) // duplicate delivery
			return
		}
		replyError(m, protocol.CodeUnavailable, "job already running under another token")
		return
	}
	if len(a.jobs) >= a.opts.Slots {
		a.mu.Unlock()
		replyError(m, protocol.CodeUnavailable, "no free slot")
		return
	}
	j := newJob(a, as.Token, ttl, as.Task)
	a.jobs[as.Token.JobID] = j
	a.wg.Add(1)
	a.mu.Unlock()
	reply(m, protocol.Ack{OK: true})
	go func() {
		defer a.wg.Done()
		j.run(jobsCtx)
		a.mu.Lock()
		delete(a.jobs, j.tok.JobID)
		a.mu.Unlock()
	}()
}

func (a *Agent) onRevoke(m *nats.Msg) {
	var r protocol.Revoke
	if err := json.Unmarshal(m.Data, &r); err != nil {
		a.log.Warn().Err(err).Msg("bad revoke message")
		return
	}
	a.mu.Lock()
	j := a.jobs[r.Token.JobID]
	a.mu.Unlock()
	// A revoke names the token it takes away; it stops our job only when
	// that is the job's token (or an older grant to us, which implies ours
	// is gone too).
	if j == nil || r.Token.Owner != j.tok.Owner || r.Token.Generation < j.tok.Generation {
		return
	}
	j.stop(fmt.Errorf("%w: %s", fencing.ErrRevoked, r.Reason))
}

func (a *Agent) onControl(m *nats.Msg) {
	var c protocol.Control
	if err := json.Unmarshal(m.Data, &c); err != nil {
		replyError(m, protocol.CodeBadRequest, "decode control: "+err.Error())
		return
	}
	switch c.Command {
	case protocol.ControlCancel:
		a.mu.Lock()
		j := a.jobs[c.JobID]
		a.mu.Unlock()
		if j == nil {
			replyError(m, protocol.CodeUnknownJob, "no such running job")
			return
		}
		j.stop(errors.New("cancelled by coordinator"))
		reply(m, protocol.Ack{OK: true})
	case protocol.ControlStatus:
		reply(m, map[string]any{"boot_id": a.bootID, "jobs": a.Jobs()})
	default:
		replyError(m, protocol.CodeBadRequest, "unsupported control command "+c.Command)
	}
}

func (a *Agent) recordStop(r StopRecord) {
	a.mu.Lock()
	a.stops = append(a.stops, r)
	a.mu.Unlock()
}
