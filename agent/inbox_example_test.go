package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
)

// coordinatorInbox returns the inbox prefix docs/protocol.md section 3
// prescribes to coordinators, or "" when the page leaves it to the NATS
// library (its default inbox).
func coordinatorInbox(t *testing.T) string {
	t.Helper()
	page, err := os.ReadFile(filepath.Join("..", "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("Coordinators MUST use the inbox prefix \\*\\*`([^`]+)`\\*\\*").FindSubmatch(page)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// pageCoordinator is a coordinator written from docs/protocol.md alone
// with a plain NATS client: it serves the agent verbs in the queue group
// edgecoord with minimal answers and sends requests to agents.
type pageCoordinator struct {
	nc   *nats.Conn
	errs permissionLog
}

type permissionLog struct{ ch chan string }

func (p permissionLog) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if errors.Is(err, nats.ErrPermissionViolation) {
		select {
		case p.ch <- err.Error():
		default:
		}
	}
}

func startPageCoordinator(t *testing.T, url, inbox string) *pageCoordinator {
	t.Helper()
	c := &pageCoordinator{errs: permissionLog{ch: make(chan string, 16)}}
	opts := []nats.Option{nats.UserInfo("edgecoord", "coord-secret"), nats.ErrorHandler(c.errs.handler)}
	if inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(inbox))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c.nc = nc
	_, err = nc.QueueSubscribe("edge.v1.coord.*.*", "edgecoord", func(m *nats.Msg) {
		var resp any = protocol.Ack{OK: true}
		switch m.Subject[strings.LastIndexByte(m.Subject, '.')+1:] {
		case protocol.VerbHello:
			resp = protocol.HelloReply{LeaseTTLMS: 5000, HeartbeatMS: 200, ServerTime: time.Now().UTC()}
		case protocol.VerbRenew:
			resp = protocol.RenewReply{LeaseTTLMS: 5000}
		case protocol.VerbResult:
			resp = protocol.ResultReply{Accepted: true}
		}
		data, _ := json.Marshal(resp)
		_ = m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *pageCoordinator) send(agentID, verb string, req, resp any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return natsrpc.Request(ctx, c.nc, protocol.AgentSubject(agentID, verb), req, resp)
}

// TestExamplePermissionsWithPageCoordinator: with
// the users and permissions of examples/nats-server.conf, a coordinator
// that follows docs/protocol.md literally (the inbox prefix section 3
// prescribes) gets the agent's replies to assign, step and control. One on
// the NATS library's default inbox gets none: the example does not let the
// coordinator user subscribe to it.
func TestExamplePermissionsWithPageCoordinator(t *testing.T) {
	t.Setenv("EDGE_NATS_PASSWORD", "coord-secret")
	t.Setenv("EDGE_NATS_PC_KITCHEN_PASSWORD", "kitchen-secret")
	t.Setenv("EDGE_NATS_PC_GARAGE_PASSWORD", "garage-secret")
	sopts, err := server.ProcessConfigFile(filepath.Join("..", "examples", "nats-server.conf"))
	if err != nil {
		t.Fatalf("examples/nats-server.conf: %v", err)
	}
	sopts.Host, sopts.Port, sopts.NoLog, sopts.NoSigs = "127.0.0.1", -1, true, true
	ns, err := server.NewServer(sopts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	url := ns.ClientURL()

	inbox := coordinatorInbox(t)
	coord := startPageCoordinator(t, url, inbox)

	// The real agent, as operations.md sets it up: its own user and inbox.
	anc, err := nats.Connect(url, nats.UserInfo("pc-kitchen", "kitchen-secret"),
		nats.CustomInboxPrefix(protocol.InboxPrefix("pc-kitchen")), nats.ReconnectBufSize(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(anc.Close)
	inv := capture.NewInventory()
	if err := inv.Add(capture.NewSimulated(capture.SimOptions{Serial: "sim-k", Width: 96, Height: 160})); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	a, err := agent.New(agent.Options{
		AgentID: "pc-kitchen", Conn: anc, Phones: agent.InventoryPhones(inv, "", capture.OpLogOptions{}),
		Store: &memStore{}, SafetyMargin: 300 * time.Millisecond, RequestTimeout: time.Second,
		Log: zerolog.New(logs).Level(zerolog.DebugLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent run: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for !a.Ready() {
		if time.Now().After(deadline) {
			t.Fatalf("agent never said hello; log:\n%s", logs.String())
		}
		time.Sleep(2 * time.Millisecond)
	}

	tok := fencing.Token{JobID: "job-inbox", Owner: a.Owner(), Generation: 1}
	if err := coord.send("pc-kitchen", protocol.VerbAssign, protocol.Assign{Token: tok, LeaseTTLMS: 5000,
		Task: protocol.Task{Interactive: true, Steps: []protocol.Step{{Op: protocol.OpLaunch, Package: "com.example"}}}}, &protocol.Ack{}); err != nil {
		t.Fatalf("assign with inbox %q: %v (permission errors: %v)", inbox, err, drainStrings(coord.errs.ch))
	}
	var rep protocol.StepReply
	if err := coord.send("pc-kitchen", protocol.VerbStep, protocol.StepRequest{Token: tok, Step: protocol.Step{Op: protocol.OpScreenshot, Name: "s"}}, &rep); err != nil || rep.Outcome != protocol.OutcomeOK {
		t.Fatalf("step: %+v, %v", rep, err)
	}
	var st protocol.AgentStatus
	if err := coord.send("pc-kitchen", protocol.VerbControl, protocol.Control{Command: "status"}, &st); err != nil || st.AgentID != "pc-kitchen" {
		t.Fatalf("control status: %+v, %v", st, err)
	}
	if err := coord.send("pc-kitchen", protocol.VerbStep, protocol.StepRequest{Token: tok, Finish: true}, &rep); err != nil || !rep.Finished {
		t.Fatalf("finish: %+v, %v", rep, err)
	}

	// The library's default inbox: the server refuses the coordinator's
	// subscription to it, so no reply can reach it.
	def := startPageCoordinator(t, url, "")
	rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
	defer rcancel()
	if err := natsrpc.Request(rctx, def.nc, protocol.AgentSubject("pc-kitchen", protocol.VerbControl), protocol.Control{Command: "status"}, &st); err == nil {
		t.Fatal("a coordinator on the default inbox got a reply: the example permits it, update docs/protocol.md section 3")
	}
	select {
	case e := <-def.errs.ch:
		if !strings.Contains(e, `Subscription to "_INBOX.`) {
			t.Fatalf("permission error %q, want the default inbox subscription refused", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no permissions violation reported for the default inbox")
	}
}

func drainStrings(ch chan string) []string {
	var out []string
	for {
		select {
		case s := <-ch:
			out = append(out, s)
		default:
			return out
		}
	}
}
