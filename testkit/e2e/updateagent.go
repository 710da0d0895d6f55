package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// UpdateAgentOptions are the options of an UpdateAgent.
type UpdateAgentOptions struct {
	// ID is the agent id.
	ID string
	// Version is the version it says hello with first.
	Version string
	// Platform is the GOOS/GOARCH it announces (capability platform:…);
	// "" announces none.
	Platform string
	// PublicKey is the release key it trusts (update.public_key): an
	// order whose signature does not verify under it is refused.
	PublicKey ed25519.PublicKey
	// OptedOut: it reports update state opted_out and refuses orders, as
	// an agent with update.auto false.
	OptedOut bool
	// OnUpdate decides what becomes of an order that verified: "" (or
	// protocol.UpdateDone) comes back with the order's version; another
	// update state (failed, rolled_back) is reported with the old version
	// running; "silent" never comes back. Nil: every order succeeds.
	OnUpdate func(o protocol.UpdateOrder) string
}

// UpdateAgent speaks the agent protocol for updates only, on the Env's
// NATS server: it says hello with its version, heartbeats every 200 ms
// with its update state, and answers an update order (ControlUpdate) as
// an agent would: it reports downloading, downloads the binary from the
// order's presigned URL and checks its size, SHA-256 and signature
// (refused otherwise), reports restarting and says hello again with a new
// boot id and the order's version, unless OnUpdate says otherwise. It
// runs no jobs: for tests of the coordinator's rollouts.
type UpdateAgent struct {
	ID   string
	Conn *nats.Conn
	o    UpdateAgentOptions

	mu      sync.Mutex
	version string
	boot    string
	status  protocol.UpdateStatus
	orders  []protocol.UpdateOrder
	held    chan struct{} // closed by Release; nil: not held

	ctx  context.Context // ends with the test
	done chan struct{}
}

// StartUpdateAgent runs an UpdateAgent until the test ends, once its
// first hello was answered.
func (e *Env) StartUpdateAgent(o UpdateAgentOptions) *UpdateAgent {
	t := e.t
	t.Helper()
	a := &UpdateAgent{ID: o.ID, o: o, version: o.Version, boot: o.ID + "-boot-1", done: make(chan struct{}),
		status: protocol.UpdateStatus{State: protocol.UpdateIdle}}
	if o.OptedOut {
		a.status.State = protocol.UpdateOptedOut
	}
	var err error
	a.Conn, err = nats.Connect(e.NATSURL(), nats.Name(o.ID), nats.CustomInboxPrefix(protocol.InboxPrefix(o.ID)),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	if _, err := a.Conn.Subscribe(protocol.AgentSubject(o.ID, protocol.VerbControl), a.onControl); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.ctx = ctx
	testenv.Eventually(t, WaitTimeout, "agent "+o.ID+" said hello", func() bool { return a.hello(ctx) == nil })
	go func() {
		defer close(a.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				a.heartbeat(ctx)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-a.done
		a.Conn.Close()
	})
	return a
}

// Hold makes the next orders wait, once verified, until Release.
func (a *UpdateAgent) Hold() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.held = make(chan struct{})
}

// Release lets the held orders go on.
func (a *UpdateAgent) Release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held != nil {
		close(a.held)
		a.held = nil
	}
}

// Orders are the update orders it received.
func (a *UpdateAgent) Orders() []protocol.UpdateOrder {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]protocol.UpdateOrder(nil), a.orders...)
}

// Version is the version it runs.
func (a *UpdateAgent) Version() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.version
}

// Status is its update state.
func (a *UpdateAgent) Status() protocol.UpdateStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status
}

func (a *UpdateAgent) hello(ctx context.Context) error {
	a.mu.Lock()
	h := protocol.Hello{BootID: a.boot, Version: a.version, Slots: 1, Update: new(a.status)}
	if a.o.Platform != "" {
		h.Capabilities = []string{protocol.CapabilityPlatformPrefix + a.o.Platform}
	}
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var reply protocol.HelloReply
	return natsrpc.Request(ctx, a.Conn, protocol.CoordSubject(a.ID, protocol.VerbHello), h, &reply)
}

func (a *UpdateAgent) heartbeat(ctx context.Context) {
	a.mu.Lock()
	hb := protocol.Heartbeat{BootID: a.boot, Free: 1, Update: new(a.status)}
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var ack protocol.Ack
	_ = natsrpc.Request(ctx, a.Conn, protocol.CoordSubject(a.ID, protocol.VerbHeartbeat), hb, &ack)
}

// report sets the update state and sends it in a heartbeat.
func (a *UpdateAgent) report(ctx context.Context, o protocol.UpdateOrder, state, outcome string) {
	a.mu.Lock()
	a.status = protocol.UpdateStatus{State: state, Target: o.Release.Version, Outcome: outcome,
		AtUnixMilli: time.Now().UnixMilli(), RolloutID: o.RolloutID}
	a.mu.Unlock()
	a.heartbeat(ctx)
}

func (a *UpdateAgent) onControl(m *nats.Msg) {
	var c protocol.Control
	if err := json.Unmarshal(m.Data, &c); err != nil {
		a.replyError(m, protocol.CodeBadRequest, "decode control: "+err.Error())
		return
	}
	if c.Command != protocol.ControlUpdate {
		data, _ := json.Marshal(protocol.Ack{OK: true})
		_ = m.Respond(data)
		return
	}
	if c.Update == nil {
		a.replyError(m, protocol.CodeBadRequest, "update: no release")
		return
	}
	if a.o.OptedOut {
		a.replyError(m, protocol.CodeBadRequest, "update.auto is false: this agent does not update on its own")
		return
	}
	a.mu.Lock()
	a.orders = append(a.orders, *c.Update)
	a.mu.Unlock()
	data, _ := json.Marshal(protocol.Ack{OK: true})
	_ = m.Respond(data)
	go a.update(*c.Update)
}

func (a *UpdateAgent) replyError(m *nats.Msg, code int, desc string) {
	msg := nats.NewMsg(m.Reply)
	msg.Header.Set("Nats-Service-Error", desc)
	msg.Header.Set("Nats-Service-Error-Code", fmt.Sprint(code))
	_ = m.RespondMsg(msg)
}

// update carries out an order as an agent would.
func (a *UpdateAgent) update(o protocol.UpdateOrder) {
	ctx := a.ctx
	a.report(ctx, o, protocol.UpdateDownloading, "")
	if err := a.verify(ctx, o); err != nil {
		a.report(ctx, o, protocol.UpdateRefused, err.Error())
		return
	}
	a.mu.Lock()
	held := a.held
	a.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-ctx.Done():
			return
		}
	}
	outcome := ""
	if a.o.OnUpdate != nil {
		outcome = a.o.OnUpdate(o)
	}
	switch outcome {
	case "", protocol.UpdateDone:
		a.report(ctx, o, protocol.UpdateRestarting, "")
		a.mu.Lock()
		a.version = o.Release.Version
		a.boot = fmt.Sprintf("%s-boot-%d", a.ID, len(a.orders)+1)
		a.status = protocol.UpdateStatus{State: protocol.UpdateDone, Target: o.Release.Version, Outcome: "running " + o.Release.Version,
			AtUnixMilli: time.Now().UnixMilli(), RolloutID: o.RolloutID}
		a.mu.Unlock()
		for a.hello(ctx) != nil && ctx.Err() == nil {
			select { // the coordinator did not answer: say it again
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	case "silent":
	default:
		a.report(ctx, o, outcome, "the new binary did not come up healthy")
	}
}

// verify downloads the order's binary and checks it as an agent does.
func (a *UpdateAgent) verify(ctx context.Context, o protocol.UpdateOrder) error {
	if err := o.Release.Verify(a.o.PublicKey); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.URL, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("download: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("download: %s", resp.Status)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(resp.Body, protocol.MaxReleaseSize+1))
	if err != nil {
		return fmt.Errorf("download: %v", err)
	}
	if n != o.Release.Size || hex.EncodeToString(h.Sum(nil)) != o.Release.SHA256 {
		return fmt.Errorf("the download (%d bytes) is not the release's binary", n)
	}
	return nil
}
