package chaos

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
	"github.com/edgeagent/edgeagent/testkit/labs3"
	"github.com/edgeagent/edgeagent/testkit/testenv"
	"github.com/edgeagent/edgeagent/uploader"
)

// TestAssignRedeliveredAfterStop is the case the chaos schedules found with
// duplicated messages, made deterministic: a coordinator (here a few lines
// on raw NATS) assigns a token, answers its first renewal 409 so the agent
// stops it, then delivers the same assign a second time. The protocol says
// a second delivery of the same token changes nothing: the agent must not
// run the token again, so no renewal of it may follow its stop.
func TestAssignRedeliveredAfterStop(t *testing.T) {
	ns := testenv.NATS(t)
	s3, err := labs3.Start(labs3.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	up, err := uploader.NewS3(s3.UploaderOptions())
	if err != nil {
		t.Fatal(err)
	}
	coord, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Close()

	const agentID = "pc-dup"
	var (
		mu     sync.Mutex
		renews []fencing.Token
	)
	serve := func(verb string, h func(m *nats.Msg) any) {
		t.Helper()
		if _, err := coord.Subscribe(protocol.CoordSubject(agentID, verb), func(m *nats.Msg) {
			if rep := h(m); rep != nil {
				data, _ := json.Marshal(rep)
				_ = m.Respond(data)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	serve(protocol.VerbHello, func(m *nats.Msg) any {
		return protocol.HelloReply{LeaseTTLMS: 2000, HeartbeatMS: 1000, ServerTime: time.Now()}
	})
	serve(protocol.VerbHeartbeat, func(*nats.Msg) any { return protocol.Ack{OK: true} })
	serve(protocol.VerbRenew, func(m *nats.Msg) any {
		var r protocol.Renew
		_ = json.Unmarshal(m.Data, &r)
		mu.Lock()
		renews = append(renews, r.Token)
		mu.Unlock()
		msg := nats.NewMsg(m.Reply)
		msg.Header.Set(micro.ErrorHeader, "stale token")
		msg.Header.Set(micro.ErrorCodeHeader, strconv.Itoa(protocol.CodeStale))
		_ = m.RespondMsg(msg)
		return nil
	})
	if err := coord.Flush(); err != nil {
		t.Fatal(err)
	}

	nc, err := nats.Connect(ns.ClientURL(), nats.CustomInboxPrefix(protocol.InboxPrefix(agentID)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	inv := capture.NewInventory()
	if err := inv.Add(capture.NewSimulated(capture.SimOptions{Serial: "sim-dup"})); err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{
		AgentID: agentID, Conn: nc, Phones: agent.InventoryPhones(inv, "", capture.OpLogOptions{}), Store: up,
		SafetyMargin: 200 * time.Millisecond, RequestTimeout: time.Second, Log: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	testenv.Eventually(t, 10*time.Second, "the agent's hello", func() bool { return a.Ready() })

	tok := fencing.Token{JobID: "job-dup", Owner: a.Owner(), Generation: 1}
	assign := protocol.Assign{Token: tok, LeaseTTLMS: 2000, Task: protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot}}}}
	send := func() error {
		t.Helper()
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer rcancel()
		return natsrpc.Request(rctx, coord, protocol.AgentSubject(agentID, protocol.VerbAssign), assign, &protocol.Ack{})
	}
	if err := send(); err != nil {
		t.Fatalf("assign: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, "the stop after the 409", func() bool { return len(a.Stops()) > 0 })
	testenv.Eventually(t, 10*time.Second, "the job to end", func() bool { return len(a.Jobs()) == 0 })

	// The same assign, delivered again. Whatever the agent answers, it must
	// not run the token again.
	t.Logf("second delivery answered: %v", send())
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(renews) != 1 {
		t.Errorf("the agent renewed %s %d times; after its stop a second delivery of the assign must change nothing (renewals %v)", tok, len(renews), renews)
	}
	if n := len(a.Stops()); n != 1 {
		t.Errorf("the agent recorded %d stops of %s, want 1: it ran the token again", n, tok)
	}
}
