package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// permissionErrors collects the asynchronous permission violations the
// server reports to one connection.
type permissionErrors struct {
	mu   sync.Mutex
	errs []string
}

func (p *permissionErrors) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if errors.Is(err, nats.ErrPermissionViolation) {
		p.mu.Lock()
		p.errs = append(p.errs, err.Error())
		p.mu.Unlock()
	}
}

func (p *permissionErrors) saw(substr string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.errs {
		if strings.Contains(e, substr) {
			return true
		}
	}
	return false
}

// natsFromExample starts an embedded NATS server with the users and
// permissions of examples/nats-server.conf.
func natsFromExample(t *testing.T) *server.Server {
	t.Helper()
	t.Setenv("EDGE_NATS_PASSWORD", "coord-secret")
	t.Setenv("EDGE_NATS_PC_KITCHEN_PASSWORD", "kitchen-secret")
	t.Setenv("EDGE_NATS_PC_GARAGE_PASSWORD", "garage-secret")
	opts, err := server.ProcessConfigFile(filepath.Join("..", "examples", "nats-server.conf"))
	if err != nil {
		t.Fatalf("examples/nats-server.conf: %v", err)
	}
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("start nats server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// TestNATSPermissionsBindAgentIdentity: with the
// per-user permissions of examples/nats-server.conf, agent A's credentials
// cannot publish on B's subjects nor read B's inbox or B's commands; and a
// request on A's own subject carrying B's token is refused with 403 and
// recorded in write_events.
func TestNATSPermissionsBindAgentIdentity(t *testing.T) {
	ns := natsFromExample(t)
	url := ns.ClientURL()
	store := openSQLite(t)
	c := startCoordinator(t, url, store, fastOptions(t, "c1"),
		nats.UserInfo("edgecoord", "coord-secret"), nats.CustomInboxPrefix("_INBOX_edgecoord"))

	hold := func(fencing.Token) coordtest.Behavior { return coordtest.Hold }
	var aErrs permissionErrors
	a := coordtest.Start(t, coordtest.Options{
		ID: "pc-kitchen", URL: url, Devices: []protocol.Device{phone("K1")}, Behavior: hold,
		NATS: []nats.Option{nats.UserInfo("pc-kitchen", "kitchen-secret"), nats.ErrorHandler(aErrs.handler)},
	})
	b := coordtest.Start(t, coordtest.Options{
		ID: "pc-garage", URL: url, Devices: []protocol.Device{phone("G1")}, Behavior: hold,
		NATS: []nats.Option{nats.UserInfo("pc-garage", "garage-secret")},
	})
	submit(t, store, "job-a", protocol.DeviceSelector{Serial: "K1"})
	submit(t, store, "job-b", protocol.DeviceSelector{Serial: "G1"})
	waitAssign(t, a, "job-a", 5*time.Second)
	waitAssign(t, b, "job-b", 5*time.Second)
	tokB := b.Assigns()[0]
	ctx := context.Background()
	eventsOfB := func() []jobstore.WriteEvent {
		evs, err := store.WriteEvents(ctx, "job-b")
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	refusedOfB := func() int {
		n := 0
		for _, e := range eventsOfB() {
			if !e.Accepted {
				n++
			}
		}
		return n
	}

	// 1. A cannot publish as B: the server drops the request and tells A.
	nc := a.Conn()
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err := natsrpc.Request(rctx, nc, protocol.CoordSubject("pc-garage", protocol.VerbResult), protocol.Result{Token: tokB}, nil)
	cancel()
	if err == nil {
		t.Fatal("A's request on B's subject was answered")
	}
	testenv.Eventually(t, 5*time.Second, "permission violation for publishing on B's subject", func() bool {
		return aErrs.saw(`Publish to "edge.v1.coord.pc-garage.result"`)
	})
	if n := refusedOfB(); n != 0 {
		t.Fatalf("the coordinator saw A's request on B's subject: %+v", eventsOfB())
	}
	if j := getJob(t, store, "job-b"); j.Status != jobstore.StatusInProgress || j.WorkerID != tokB.Owner {
		t.Fatalf("job-b changed: %+v", j)
	}

	// 2. A cannot read B's replies nor B's commands.
	got := make(chan *nats.Msg, 16)
	for _, subj := range []string{protocol.InboxPrefix("pc-garage") + ".>", protocol.AgentSubject("pc-garage", ">")} {
		if _, err := nc.ChanSubscribe(subj, got); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc.Flush()
	testenv.Eventually(t, 5*time.Second, "permission violations for subscribing to B's inbox and subjects", func() bool {
		return aErrs.saw(`Subscription to "_INBOX.pc-garage.>"`) && aErrs.saw(`Subscription to "edge.v1.agent.pc-garage.>"`)
	})
	// B talks to the coordinator and is talked to; none of it reaches A.
	if err := b.Request(ctx, protocol.VerbRenew, protocol.Renew{Token: tokB}, &protocol.RenewReply{}); err != nil {
		t.Fatalf("B's own renewal: %v", err)
	}
	if _, err := coordinator.PushControl(ctx, c.nc, "pc-garage", protocol.Control{Command: protocol.ControlStatus}); err != nil {
		t.Fatalf("status of B: %v", err)
	}
	_ = nc.Flush()
	select {
	case m := <-got:
		t.Fatalf("A read %s", m.Subject)
	case <-time.After(200 * time.Millisecond):
	}

	// 3. On its own subject A may speak, but not with B's token: 403, and
	// the attempt is counted under A.
	err = a.Request(ctx, protocol.VerbRenew, protocol.Renew{Token: tokB}, &protocol.RenewReply{})
	if !errors.Is(err, protocol.ErrForbidden) {
		t.Fatalf("renewal of B's token on A's subject: %v, want 403", err)
	}
	err = a.Request(ctx, protocol.VerbResult, protocol.Result{Token: tokB, Result: []byte(`{"by":"A"}`)}, &protocol.ResultReply{})
	if !errors.Is(err, protocol.ErrForbidden) {
		t.Fatalf("result with B's token on A's subject: %v, want 403", err)
	}
	forbidden, err := store.AgentRefusals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(forbidden) != 2 || forbidden[0].AgentID != "pc-kitchen" || forbidden[0].Verb != jobstore.VerbRenew || forbidden[1].Verb != jobstore.VerbResult ||
		forbidden[0].Count != 1 || forbidden[0].JobID != "job-b" || forbidden[0].Owner != tokB.Owner || forbidden[0].Generation != tokB.Generation ||
		!strings.Contains(forbidden[0].Detail, "pc-kitchen") {
		t.Fatalf("counted forbidden attempts %+v", forbidden)
	}
	if n := refusedOfB(); n != 0 {
		t.Fatalf("forbidden attempts recorded as events of job-b: %+v", eventsOfB())
	}
	for verb, want := range map[string]float64{protocol.VerbRenew: 1, protocol.VerbResult: 1, protocol.VerbFail: 0} {
		if got := metricValue(t, c.srv.Registry(), "forbidden_requests_total", map[string]string{"verb": verb}); got != want {
			t.Errorf("forbidden_requests_total{verb=%q} = %v, want %v", verb, got, want)
		}
	}
	if j := getJob(t, store, "job-b"); j.Status != jobstore.StatusInProgress || j.WorkerID != tokB.Owner || j.Generation != 1 {
		t.Fatalf("job-b changed: %+v", j)
	}
	// A's own lease is untouched by all this.
	if err := a.Request(ctx, protocol.VerbRenew, protocol.Renew{Token: a.Assigns()[0]}, &protocol.RenewReply{}); err != nil {
		t.Fatalf("A's own renewal: %v", err)
	}
}

// TestNATSExampleLimits: examples/nats-server.conf bounds a body, the
// connections to the server and the subscriptions of one connection, and
// the server enforces the last on an agent that opens more.
func TestNATSExampleLimits(t *testing.T) {
	t.Setenv("EDGE_NATS_PASSWORD", "coord-secret")
	t.Setenv("EDGE_NATS_PC_KITCHEN_PASSWORD", "kitchen-secret")
	t.Setenv("EDGE_NATS_PC_GARAGE_PASSWORD", "garage-secret")
	opts, err := server.ProcessConfigFile(filepath.Join("..", "examples", "nats-server.conf"))
	if err != nil {
		t.Fatalf("examples/nats-server.conf: %v", err)
	}
	if opts.MaxPayload != 1<<20 || opts.MaxConn != 1000 || opts.MaxSubs != 100 || opts.MaxPending != 64<<20 {
		t.Fatalf("examples/nats-server.conf: max_payload %d, max_connections %d, max_subscriptions %d, max_pending %d",
			opts.MaxPayload, opts.MaxConn, opts.MaxSubs, opts.MaxPending)
	}

	ns := natsFromExample(t)
	var (
		mu   sync.Mutex
		seen []string
	)
	saw := func(substr string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(seen, func(e string) bool { return strings.Contains(strings.ToLower(e), substr) })
	}
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo("pc-kitchen", "kitchen-secret"),
		nats.CustomInboxPrefix(protocol.InboxPrefix("pc-kitchen")), nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			seen = append(seen, err.Error())
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for i := range opts.MaxSubs + 1 {
		if _, err := nc.Subscribe(fmt.Sprintf("%s.sub%d", protocol.InboxPrefix("pc-kitchen"), i), func(*nats.Msg) {}); err != nil {
			break
		}
	}
	_ = nc.Flush()
	testenv.Eventually(t, 5*time.Second, "the subscription past max_subscriptions refused", func() bool {
		if err := nc.LastError(); err != nil {
			mu.Lock()
			seen = append(seen, err.Error())
			mu.Unlock()
		}
		return saw("maximum subscriptions exceeded")
	})
}
