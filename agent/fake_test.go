package agent_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
	"github.com/edgeagent/edgeagent/testkit/testenv"
	"github.com/edgeagent/edgeagent/uploader"
)

// fakeCoord answers the agent verbs from memory, records every request and
// lets a test decide the answers. It is for tests of the agent's behaviour
// that need exact control of the replies (and for the stop benchmark); the
// end-to-end tests use the real coordinator.
type fakeCoord struct {
	tb  testing.TB
	nc  *nats.Conn
	ttl time.Duration

	mu    sync.Mutex
	reqs  []fakeReq
	stale map[string]bool // job ids whose every fenced call gets 409
	// firstStale is when the first 409 was answered, per job.
	firstStale map[string]time.Time
	// hook, when set, may answer a request itself: it returns the reply
	// (nil body with code for an error) and true, or false to let the fake
	// answer; drop=true sends no reply at all.
	hook func(verb string, tok fencing.Token) (resp any, code int, drop, handled bool)
}

type fakeReq struct {
	at   time.Time
	verb string
	tok  fencing.Token
	data []byte
}

func newFakeCoord(tb testing.TB, url string, ttl time.Duration) *fakeCoord {
	nc, err := nats.Connect(url, nats.Name("fake-coord"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	f := &fakeCoord{tb: tb, nc: nc, ttl: ttl, stale: map[string]bool{}, firstStale: map[string]time.Time{}}
	if _, err := nc.Subscribe("edge.v1.coord.*.*", f.serve); err != nil {
		tb.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	// The first request creates the connection's reply subscription; make
	// it now, so that goroutine counts taken later do not include it.
	_, _ = nc.Request("edge.v1.warmup", nil, 20*time.Millisecond)
	return f
}

func (f *fakeCoord) serve(m *nats.Msg) {
	p := strings.Split(m.Subject, ".")
	verb := p[len(p)-1]
	var body struct {
		Token fencing.Token `json:"token"`
	}
	_ = json.Unmarshal(m.Data, &body)
	f.mu.Lock()
	f.reqs = append(f.reqs, fakeReq{at: time.Now(), verb: verb, tok: body.Token, data: m.Data})
	stale := f.stale[body.Token.JobID]
	hook := f.hook
	f.mu.Unlock()
	if hook != nil {
		if resp, code, drop, ok := hook(verb, body.Token); ok {
			switch {
			case drop:
			case code != 0:
				replyErr(m, code)
			default:
				data, _ := json.Marshal(resp)
				_ = m.Respond(data)
			}
			return
		}
	}
	var resp any
	switch verb {
	case protocol.VerbHello:
		resp = protocol.HelloReply{LeaseTTLMS: f.ttl.Milliseconds(), HeartbeatMS: 100, ServerTime: time.Now().UTC(), CoordinatorID: "fake"}
	case protocol.VerbHeartbeat:
		resp = protocol.Ack{OK: true}
	case protocol.VerbRenew:
		resp = protocol.RenewReply{LeaseTTLMS: f.ttl.Milliseconds()}
	case protocol.VerbResult:
		resp = protocol.ResultReply{Accepted: true}
	default:
		resp = protocol.Ack{OK: true}
	}
	if stale && verb != protocol.VerbHello && verb != protocol.VerbHeartbeat {
		f.mu.Lock()
		if _, ok := f.firstStale[body.Token.JobID]; !ok {
			f.firstStale[body.Token.JobID] = time.Now()
		}
		f.mu.Unlock()
		replyErr(m, protocol.CodeStale)
		return
	}
	data, _ := json.Marshal(resp)
	_ = m.Respond(data)
}

func replyErr(m *nats.Msg, code int) {
	r := nats.NewMsg(m.Reply)
	r.Header.Set("Nats-Service-Error", "refused")
	r.Header.Set("Nats-Service-Error-Code", itoa(code))
	_ = m.RespondMsg(r)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func (f *fakeCoord) setStale(jobID string) {
	f.mu.Lock()
	f.stale[jobID] = true
	f.mu.Unlock()
}

func (f *fakeCoord) setHook(h func(verb string, tok fencing.Token) (any, int, bool, bool)) {
	f.mu.Lock()
	f.hook = h
	f.mu.Unlock()
}

// requests returns the recorded requests about jobID ("" for all).
func (f *fakeCoord) requests(jobID string) []fakeReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeReq
	for _, r := range f.reqs {
		if jobID == "" || r.tok.JobID == jobID {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeCoord) verbs(jobID string) []string {
	var out []string
	for _, r := range f.requests(jobID) {
		out = append(out, r.verb)
	}
	return out
}

// assign sends an assign for tok to the agent and returns its answer.
func (f *fakeCoord) assign(agentID string, tok fencing.Token, task protocol.Task) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return natsrpc.Request(ctx, f.nc, protocol.AgentSubject(agentID, protocol.VerbAssign),
		protocol.Assign{Token: tok, LeaseTTLMS: f.ttl.Milliseconds(), Task: task}, &protocol.Ack{})
}

// assignOn sends an assign for tok that names the granted phone serial.
func (f *fakeCoord) assignOn(agentID string, tok fencing.Token, task protocol.Task, serial string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return natsrpc.Request(ctx, f.nc, protocol.AgentSubject(agentID, protocol.VerbAssign),
		protocol.Assign{Token: tok, LeaseTTLMS: f.ttl.Milliseconds(), Task: task, Serial: serial}, &protocol.Ack{})
}

// send sends a request to the agent's verb subject.
func (f *fakeCoord) send(agentID, verb string, req, resp any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return natsrpc.Request(ctx, f.nc, protocol.AgentSubject(agentID, verb), req, resp)
}

func (f *fakeCoord) revoke(tok fencing.Token) {
	data, _ := json.Marshal(protocol.Revoke{Token: tok, Reason: "reassigned"})
	if err := f.nc.Publish(protocol.AgentSubject(tok.AgentID(), protocol.VerbRevoke), data); err != nil {
		f.tb.Fatal(err)
	}
	_ = f.nc.Flush()
}

// memStore is an in-memory uploader that records every upload; bps > 0
// streams bodies at that rate (honouring the context).
type memStore struct {
	bps int64

	mu      sync.Mutex
	objects map[string][]byte
	calls   []memCall
}

type memCall struct {
	key        string
	start, end time.Time
	err        error
}

func (s *memStore) Upload(ctx context.Context, tok fencing.Token, a uploader.Artifact) (uploader.Result, error) {
	start := time.Now()
	key := tok.ObjectKey(a.Name)
	var r io.Reader = a.Body
	if a.Path != "" {
		// A capture spooled to a file.
		f, err := os.Open(a.Path)
		if err != nil {
			return uploader.Result{}, err
		}
		defer f.Close()
		r = f
	}
	if s.bps > 0 {
		r = &slowReader{ctx: ctx, r: r, bps: s.bps}
	}
	data, err := io.ReadAll(r)
	if err == nil {
		err = ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, memCall{key: key, start: start, end: time.Now(), err: err})
	if err != nil {
		return uploader.Result{}, err
	}
	if s.objects == nil {
		s.objects = map[string][]byte{}
	}
	s.objects[key] = data
	return uploader.Result{Key: key, Size: int64(len(data)), SHA256: a.SHA256}, nil
}

func (s *memStore) uploads() []memCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]memCall(nil), s.calls...)
}

// rig is an agent with one simulated phone against a fake coordinator.
type rig struct {
	t      testing.TB
	url    string
	coord  *fakeCoord
	store  *memStore
	phone  *capture.Simulated
	a      *agent.Agent
	cancel context.CancelFunc
	done   chan error
	logs   *logBuffer
}

type rigSetup struct {
	ttl    time.Duration
	margin time.Duration
	slots  int
	bps    int64
	phones agent.Phones // replaces the simulated phone
	tweak  func(*agent.Options)
	// hook is set on the fake coordinator before the agent starts.
	hook func(verb string, tok fencing.Token) (any, int, bool, bool)
}

func newRig(t testing.TB, st rigSetup) *rig {
	t.Helper()
	if st.ttl == 0 {
		st.ttl = 3 * time.Second
	}
	if st.margin == 0 {
		st.margin = 300 * time.Millisecond
	}
	ns := testenv.NATS(t)
	r := &rig{t: t, url: ns.ClientURL(), store: &memStore{bps: st.bps}, logs: &logBuffer{}, done: make(chan error, 1)}
	r.coord = newFakeCoord(t, r.url, st.ttl)
	if st.hook != nil {
		r.coord.setHook(st.hook)
	}
	nc, err := nats.Connect(r.url, nats.Name("agent"), nats.CustomInboxPrefix(protocol.InboxPrefix("pc-a")), nats.ReconnectBufSize(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	phones := st.phones
	if phones == nil {
		r.phone = capture.NewSimulated(capture.SimOptions{Serial: "sim-1", Width: 96, Height: 160})
		inv := capture.NewInventory()
		if err := inv.Add(r.phone); err != nil {
			t.Fatal(err)
		}
		phones = agent.InventoryPhones(inv, "", capture.OpLogOptions{})
	}
	opts := agent.Options{
		AgentID: "pc-a", Conn: nc, Phones: phones, Store: r.store, Slots: st.slots,
		SafetyMargin: st.margin, RequestTimeout: time.Second,
		Log: zerolog.New(r.logs).Level(zerolog.DebugLevel),
	}
	if st.tweak != nil {
		st.tweak(&opts)
	}
	r.a, err = agent.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.a.Run(ctx) }()
	t.Cleanup(func() { r.stop() })
	deadline := time.Now().Add(10 * time.Second)
	for !r.a.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("agent never became ready")
		}
		time.Sleep(2 * time.Millisecond)
	}
	return r
}

// stop cancels the agent's Run and waits for it (idempotent).
func (r *rig) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		r.t.Errorf("agent run: %v", err)
	}
}

var jobSeq struct {
	sync.Mutex
	n int
}

func (r *rig) token(gen int64) fencing.Token {
	jobSeq.Lock()
	jobSeq.n++
	n := jobSeq.n
	jobSeq.Unlock()
	return fencing.Token{JobID: "job-" + itoa(n), Owner: r.a.Owner(), Generation: gen}
}
