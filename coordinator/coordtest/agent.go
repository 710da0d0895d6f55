package coordtest

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
)

// Behavior is what an Agent does with one assigned job.
type Behavior int

const (
	// Finish renews, works for the configured time while renewing every
	// TTL/3, registers its artifacts and sends the result. A revoke or a
	// 409 stops it at once, as the real agent does.
	Finish Behavior = iota
	// Hold renews forever and never finishes, until revoked or stale.
	Hold
	// StopRenewing renews once and then does nothing more for the job: a
	// hung process whose agent still sends heartbeats.
	StopRenewing
	// Zombie works like Finish but ignores revokes and 409s: after its
	// work it still registers and sends its result, the late write of a
	// stale worker the coordinator must refuse.
	Zombie
	// Fail renews once, then reports the failure Options.Failure gives
	// for the token (fail verb) and ends the job, as the real agent does
	// when a step fails.
	Fail
)

// Options configures an Agent.
type Options struct {
	ID      string
	URL     string        // NATS server; the Agent connects with its own inbox prefix
	NATS    []nats.Option // extra connection options (credentials)
	Devices []protocol.Device
	Slots   int           // default 1
	Work    time.Duration // time a job takes after its first renewal (default 10ms)
	Jitter  time.Duration // random extra work time, up to this
	// Artifacts is how many artifacts each job registers before its result.
	Artifacts int
	// Behavior chooses what to do with each assigned job (default Finish).
	Behavior func(tok fencing.Token) Behavior
	// Failure is the failure a job with behaviour Fail reports (its token
	// is filled in).
	Failure func(tok fencing.Token) protocol.Fail
	// RequestTimeout bounds each request (default 5s).
	RequestTimeout time.Duration
	// Refuse, when set, may refuse an assign as the reference agent would:
	// a code other than 0 is answered with desc and the job is not taken.
	Refuse func(as protocol.Assign) (code int, desc string)
	// CheckSettings, when set, vets the settings of a config command; an
	// error is answered 400 and nothing is applied.
	CheckSettings func(map[string]string) error
}

// Outcome is the reply to one fenced call of a job.
type Outcome struct {
	Token fencing.Token
	Verb  string
	Err   error     // nil when accepted
	At    time.Time // when the reply arrived
	// ExpiresAt is the lease expiry of an accepted renewal (database clock).
	ExpiresAt time.Time
}

// Agent speaks wire protocol v1 to a coordinator the way the reference agent
// does, with no phones: the work of a job is a pause. It records every
// assign, revoke, control command and fenced reply, so tests can check what
// the coordinator did from the agent's side.
type Agent struct {
	opts Options
	nc   *nats.Conn
	subs []*nats.Subscription

	mu        sync.Mutex
	bootID    string
	draining  bool
	settings  map[string]string
	hello     protocol.HelloReply
	hellos    int
	assigns   []fencing.Token
	assignMsg []protocol.Assign // the accepted assigns as received
	refused   []fencing.Token   // assigns answered with an error
	revokes   []protocol.Revoke
	controls  []protocol.Control
	outcomes  []Outcome
	jobs      map[string]*job
	stopped   bool
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	heartbeat time.Duration
}

type job struct {
	tok    fencing.Token
	cancel context.CancelFunc
	ignore bool // zombie: revokes and 409s do not stop it
}

// Start connects and says hello; the agent runs until Stop or the end of
// the test.
func Start(t testing.TB, opts Options) *Agent {
	t.Helper()
	a, err := New(opts)
	if err != nil {
		t.Fatalf("start test agent %s: %v", opts.ID, err)
	}
	t.Cleanup(a.Stop)
	if err := a.Start(); err != nil {
		t.Fatalf("start test agent %s: %v", opts.ID, err)
	}
	return a
}

// New connects an agent without starting it.
func New(opts Options) (*Agent, error) {
	if opts.Slots <= 0 {
		opts.Slots = 1
	}
	if opts.Work <= 0 {
		opts.Work = 10 * time.Millisecond
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 5 * time.Second
	}
	if opts.Behavior == nil {
		opts.Behavior = func(fencing.Token) Behavior { return Finish }
	}
	nopts := append([]nats.Option{nats.Name("test agent " + opts.ID), nats.CustomInboxPrefix(protocol.InboxPrefix(opts.ID))}, opts.NATS...)
	nc, err := nats.Connect(opts.URL, nopts...)
	if err != nil {
		return nil, fmt.Errorf("connect nats: %w", err)
	}
	return &Agent{opts: opts, nc: nc, bootID: newBootID(), jobs: map[string]*job{}, settings: map[string]string{}}, nil
}

func newBootID() string {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Conn returns the agent's NATS connection.
func (a *Agent) Conn() *nats.Conn { return a.nc }

// Start subscribes to the agent's subjects, says hello and starts the
// heartbeats.
func (a *Agent) Start() error {
	a.mu.Lock()
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.mu.Unlock()
	for verb, h := range map[string]nats.MsgHandler{
		protocol.VerbAssign:  a.onAssign,
		protocol.VerbRevoke:  a.onRevoke,
		protocol.VerbControl: a.onControl,
	} {
		s, err := a.nc.Subscribe(protocol.AgentSubject(a.opts.ID, verb), h)
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", verb, err)
		}
		a.subs = append(a.subs, s)
	}
	if err := a.nc.Flush(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	// Like the reference agent, hello is retried while no coordinator
	// serves it yet: a coordinator answers service pings before its verb
	// endpoints are added.
	for deadline := time.Now().Add(30 * time.Second); ; {
		err := a.Hello()
		if err == nil {
			break
		}
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.wg.Go(a.heartbeats)
	return nil
}

// Hello sends a hello for the current boot and keeps the reply.
func (a *Agent) Hello() error {
	a.mu.Lock()
	h := protocol.Hello{BootID: a.bootID, Version: "test", Devices: a.opts.Devices, Slots: a.opts.Slots, Draining: a.draining}
	a.mu.Unlock()
	var rep protocol.HelloReply
	if err := a.Request(context.Background(), protocol.VerbHello, h, &rep); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	a.mu.Lock()
	a.hello = rep
	a.hellos++
	a.heartbeat = time.Duration(rep.HeartbeatMS) * time.Millisecond
	for k, v := range rep.Settings {
		a.settings[k] = v
	}
	a.mu.Unlock()
	return nil
}

// Restart simulates a new process of the same agent: its jobs vanish
// without a word, it takes a new boot id and says hello.
func (a *Agent) Restart() error {
	a.mu.Lock()
	for id, j := range a.jobs {
		j.ignore = false
		j.cancel()
		delete(a.jobs, id)
	}
	a.bootID = newBootID()
	a.mu.Unlock()
	return a.Hello()
}

// Stop ends the agent like a crash: jobs stop, nothing more is sent.
func (a *Agent) Stop() {
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		return
	}
	a.stopped = true
	if a.cancel != nil {
		a.cancel()
	}
	for _, j := range a.jobs {
		j.cancel()
	}
	a.mu.Unlock()
	for _, s := range a.subs {
		_ = s.Unsubscribe()
	}
	a.wg.Wait()
	a.nc.Close()
}

// Request sends one request on the agent's own subject for verb.
func (a *Agent) Request(ctx context.Context, verb string, req, resp any) error {
	ctx, cancel := context.WithTimeout(ctx, a.opts.RequestTimeout)
	defer cancel()
	return natsrpc.Request(ctx, a.nc, protocol.CoordSubject(a.opts.ID, verb), req, resp)
}

// Owner returns the owner string of the current boot.
func (a *Agent) Owner() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return fencing.Owner(a.opts.ID, a.bootID)
}

// ID returns the agent id.
func (a *Agent) ID() string { return a.opts.ID }

// HelloReply returns the last hello reply.
func (a *Agent) HelloReply() protocol.HelloReply {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.hello
}

// Assigns returns every token assigned and accepted so far.
func (a *Agent) Assigns() []fencing.Token {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]fencing.Token(nil), a.assigns...)
}

// Refused returns every token whose assign was answered with an error.
func (a *Agent) Refused() []fencing.Token {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]fencing.Token(nil), a.refused...)
}

// AssignMessages returns every assign accepted so far, as received.
func (a *Agent) AssignMessages() []protocol.Assign {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]protocol.Assign(nil), a.assignMsg...)
}

// Revokes returns every revoke received.
func (a *Agent) Revokes() []protocol.Revoke {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]protocol.Revoke(nil), a.revokes...)
}

// Controls returns every control command received.
func (a *Agent) Controls() []protocol.Control {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]protocol.Control(nil), a.controls...)
}

// Settings returns the settings received (hello replies and config).
func (a *Agent) Settings() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]string{}
	for k, v := range a.settings {
		out[k] = v
	}
	return out
}

// Draining reports whether a drain command is in force.
func (a *Agent) Draining() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.draining
}

// Outcomes returns the replies to every fenced call, in order.
func (a *Agent) Outcomes() []Outcome {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Outcome(nil), a.outcomes...)
}

// Running returns the ids of the jobs running now.
func (a *Agent) Running() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for id := range a.jobs {
		out = append(out, id)
	}
	return out
}

func (a *Agent) heartbeats() {
	for {
		a.mu.Lock()
		every := a.heartbeat
		ctx := a.ctx
		a.mu.Unlock()
		if every <= 0 {
			every = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		a.mu.Lock()
		hb := protocol.Heartbeat{BootID: a.bootID, Devices: a.opts.Devices, Free: max(0, a.opts.Slots-len(a.jobs)), Draining: a.draining}
		for _, j := range a.jobs {
			hb.Running = append(hb.Running, j.tok)
		}
		a.mu.Unlock()
		err := a.Request(ctx, protocol.VerbHeartbeat, hb, &protocol.Ack{})
		if errors.Is(err, protocol.ErrUnavailable) {
			_ = a.Hello()
		}
	}
}

func reply(m *nats.Msg, v any) {
	data, _ := json.Marshal(v)
	_ = m.Respond(data)
}

func replyError(m *nats.Msg, code int, desc string) {
	msg := nats.NewMsg(m.Reply)
	msg.Header.Set("Nats-Service-Error", desc)
	msg.Header.Set("Nats-Service-Error-Code", fmt.Sprint(code))
	_ = m.RespondMsg(msg)
}

func (a *Agent) onAssign(m *nats.Msg) {
	var as protocol.Assign
	if err := json.Unmarshal(m.Data, &as); err != nil {
		replyError(m, protocol.CodeBadRequest, "decode assign")
		return
	}
	if a.opts.Refuse != nil {
		if code, desc := a.opts.Refuse(as); code != 0 {
			a.mu.Lock()
			a.refused = append(a.refused, as.Token)
			a.mu.Unlock()
			replyError(m, code, desc)
			return
		}
	}
	a.mu.Lock()
	switch {
	case a.stopped:
		a.mu.Unlock()
		return
	case as.Token.Owner != fencing.Owner(a.opts.ID, a.bootID):
		a.refused = append(a.refused, as.Token)
		a.mu.Unlock()
		replyError(m, protocol.CodeForbidden, "token owner is not this agent process")
		return
	case len(a.jobs) >= a.opts.Slots || a.draining:
		a.refused = append(a.refused, as.Token)
		a.mu.Unlock()
		replyError(m, protocol.CodeUnavailable, "no free slot")
		return
	}
	if old, ok := a.jobs[as.Token.JobID]; ok {
		a.mu.Unlock()
		if old.tok == as.Token {
			reply(m, protocol.Ack{OK: true})
		} else {
			replyError(m, protocol.CodeUnavailable, "job already running under another token")
		}
		return
	}
	behavior := a.opts.Behavior(as.Token)
	ctx, cancel := context.WithCancel(a.ctx)
	j := &job{tok: as.Token, cancel: cancel, ignore: behavior == Zombie}
	a.jobs[as.Token.JobID] = j
	a.assigns = append(a.assigns, as.Token)
	a.assignMsg = append(a.assignMsg, as)
	a.wg.Add(1)
	a.mu.Unlock()
	reply(m, protocol.Ack{OK: true})
	ttl := time.Duration(as.LeaseTTLMS) * time.Millisecond
	go func() {
		defer a.wg.Done()
		defer cancel()
		a.run(ctx, j, behavior, ttl)
		a.mu.Lock()
		if a.jobs[j.tok.JobID] == j {
			delete(a.jobs, j.tok.JobID)
		}
		a.mu.Unlock()
	}()
}

func (a *Agent) stopJob(j *job) {
	a.mu.Lock()
	ignore := j.ignore
	a.mu.Unlock()
	if !ignore {
		j.cancel()
	}
}

// call sends one fenced request of a job unless the job has stopped, and
// records the reply. A 409 stops the job.
func (a *Agent) call(ctx context.Context, j *job, verb string, req, resp any) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	err := a.Request(context.WithoutCancel(ctx), verb, req, resp)
	o := Outcome{Token: j.tok, Verb: verb, Err: err, At: time.Now()}
	if rr, ok := resp.(*protocol.RenewReply); ok && err == nil {
		o.ExpiresAt = rr.ExpiresAt
	}
	a.mu.Lock()
	a.outcomes = append(a.outcomes, o)
	a.mu.Unlock()
	if errors.Is(err, fencing.ErrStale) {
		a.stopJob(j)
	}
	return err
}

func (a *Agent) run(ctx context.Context, j *job, b Behavior, ttl time.Duration) {
	renew := func() error {
		return a.call(ctx, j, protocol.VerbRenew, protocol.Renew{Token: j.tok}, &protocol.RenewReply{})
	}
	if err := renew(); err != nil {
		return
	}
	switch b {
	case StopRenewing:
		<-ctx.Done()
		return
	case Fail:
		var f protocol.Fail
		if a.opts.Failure != nil {
			f = a.opts.Failure(j.tok)
		}
		f.Token = j.tok
		// The job has stopped: its slot is free before the report, as on
		// the real agent.
		a.mu.Lock()
		if a.jobs[j.tok.JobID] == j {
			delete(a.jobs, j.tok.JobID)
		}
		a.mu.Unlock()
		_ = a.call(ctx, j, protocol.VerbFail, f, &protocol.Ack{})
		return
	case Hold:
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(ttl / 3):
			}
			_ = renew()
		}
	}
	work := a.opts.Work
	if a.opts.Jitter > 0 {
		work += time.Duration(rand.Int64N(int64(a.opts.Jitter)))
	}
	done := time.After(work)
	zombie := b == Zombie
	wait := ctx
	if zombie {
		wait = context.WithoutCancel(ctx)
	}
loop:
	for {
		select {
		case <-wait.Done():
			return
		case <-done:
			break loop
		case <-time.After(ttl / 3):
			if err := renew(); err != nil && !zombie && ctx.Err() != nil {
				return
			}
		}
	}
	if zombie {
		// The late writer: whatever happened, it writes.
		ctx = context.WithoutCancel(ctx)
	}
	for i := range a.opts.Artifacts {
		name := fmt.Sprintf("art-%d.png", i)
		sum := fmt.Sprintf("%064x", i+1)
		if err := a.call(ctx, j, protocol.VerbArtifact, protocol.Artifact{
			Token: j.tok, Name: name, Key: j.tok.ObjectKey(name), Size: 1, SHA256: sum, ContentType: "image/png",
		}, &protocol.Ack{}); err != nil && !zombie {
			return
		}
	}
	res, _ := json.Marshal(map[string]any{"owner": j.tok.Owner, "generation": j.tok.Generation})
	_ = a.call(ctx, j, protocol.VerbResult, protocol.Result{Token: j.tok, Result: res}, &protocol.ResultReply{})
}

func (a *Agent) onRevoke(m *nats.Msg) {
	var r protocol.Revoke
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return
	}
	a.mu.Lock()
	a.revokes = append(a.revokes, r)
	j := a.jobs[r.Token.JobID]
	a.mu.Unlock()
	if j != nil && j.tok.Owner == r.Token.Owner && r.Token.Generation >= j.tok.Generation {
		a.stopJob(j)
	}
}

func (a *Agent) onControl(m *nats.Msg) {
	var c protocol.Control
	if err := json.Unmarshal(m.Data, &c); err != nil {
		replyError(m, protocol.CodeBadRequest, "decode control")
		return
	}
	if c.Command == protocol.ControlConfig && a.opts.CheckSettings != nil {
		if err := a.opts.CheckSettings(c.Settings); err != nil {
			replyError(m, protocol.CodeBadRequest, err.Error())
			return
		}
	}
	a.mu.Lock()
	a.controls = append(a.controls, c)
	switch c.Command {
	case protocol.ControlDrain:
		a.draining = true
	case protocol.ControlResume:
		a.draining = false
	case protocol.ControlConfig:
		for k, v := range c.Settings {
			if v == "" {
				delete(a.settings, k)
			} else {
				a.settings[k] = v
			}
		}
	case protocol.ControlCancel:
		j := a.jobs[c.JobID]
		a.mu.Unlock()
		if j == nil {
			replyError(m, protocol.CodeUnknownJob, "no such running job")
			return
		}
		j.cancel()
		reply(m, protocol.Ack{OK: true})
		return
	case protocol.ControlStatus:
		jobs := []protocol.AgentJob{}
		for _, j := range a.jobs {
			jobs = append(jobs, protocol.AgentJob{Token: j.tok})
		}
		st := map[string]any{"agent_id": a.opts.ID, "boot_id": a.bootID, "draining": a.draining, "jobs": jobs}
		a.mu.Unlock()
		reply(m, st)
		return
	}
	changed := (c.Command == protocol.ControlDrain || c.Command == protocol.ControlResume) && !a.stopped
	if changed {
		a.wg.Add(1)
	}
	a.mu.Unlock()
	reply(m, protocol.Ack{OK: true})
	if changed {
		// Like the reference agent: a drain change is told with a hello.
		go func() {
			defer a.wg.Done()
			_ = a.Hello()
		}()
	}
}
