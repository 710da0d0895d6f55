package securitytest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// violations collects the permission violations the server reports to one
// connection.
type violations struct {
	mu   sync.Mutex
	errs []string
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if errors.Is(err, nats.ErrPermissionViolation) {
		v.mu.Lock()
		v.errs = append(v.errs, err.Error())
		v.mu.Unlock()
	}
}

func (v *violations) saw(substr string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range v.errs {
		if strings.Contains(e, substr) {
			return true
		}
	}
	return false
}

// TestAgentPermissionsBeyondOwnSubjects extends the coordinator's
// TestNATSPermissionsBindAgentIdentity (which shows that agent A cannot
// publish requests as B, cannot read B's inbox or B's commands, and gets 403
// for B's token on its own subject): with the permissions of
// examples/nats-server.conf, A also cannot pose as the coordinator towards
// B (send B an assign, a revoke or a control command), cannot forge replies
// into B's inbox, cannot read any agent's requests (with their tokens) nor
// take them from the coordinators' queue group, cannot read the
// coordinators' inbox, and gets no reply at all unless it uses its own
// inbox prefix. The same permissions let A and B do all of their own work.
func TestAgentPermissionsBeyondOwnSubjects(t *testing.T) {
	ns := natsFromExample(t, "coord-pw-x1", "kitchen-pw-x2", "garage-pw-x3")
	url := ns.ClientURL()
	store := openSQLite(t)
	runCoordinator(t, url, store, coordinator.Options{ID: "c1", Log: zerolog.Nop()}, nats.UserInfo("edgecoord", "coord-pw-x1"))
	agentIdentityCases(t, url,
		natsAgent{"pc-kitchen", nats.UserInfo("pc-kitchen", "kitchen-pw-x2")},
		natsAgent{"pc-garage", nats.UserInfo("pc-garage", "garage-pw-x3")})
}

// natsAgent is an agent id and the NATS option that authenticates as it.
type natsAgent struct {
	id   string
	auth nats.Option
}

// agentIdentityCases are the cases of TestAgentPermissionsBeyondOwnSubjects
// for agents A and B on the NATS server at url, whichever way the server
// binds them to their subjects (the static users of
// examples/nats-server.conf, or users the coordinator issued), with a
// coordinator serving there.
func agentIdentityCases(t *testing.T, url string, agentA, agentB natsAgent) {
	t.Helper()
	aID, bID := agentA.id, agentB.id
	var aErrs violations
	a, err := nats.Connect(url, agentA.auth, nats.CustomInboxPrefix(protocol.InboxPrefix(aID)), nats.ErrorHandler(aErrs.handler))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := nats.Connect(url, agentB.auth, nats.CustomInboxPrefix(protocol.InboxPrefix(bID)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()

	// B listens where the coordinator talks to it and where its replies
	// arrive.
	atB := make(chan *nats.Msg, 64)
	for _, subj := range []string{"edge.v1.agent." + bID + ".>", "_INBOX." + bID + ".>"} {
		if _, err := b.ChanSubscribe(subj, atB); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}

	// Positive control: both agents do their own work under these
	// permissions.
	for _, c := range []struct {
		nc *nats.Conn
		id string
	}{{a, aID}, {b, bID}} {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := natsrpc.Request(rctx, c.nc, protocol.CoordSubject(c.id, protocol.VerbHello), protocol.Hello{BootID: "boot-" + c.id, Version: "test", Slots: 1}, &protocol.HelloReply{})
		cancel()
		if err != nil {
			t.Fatalf("%s's own hello: %v", c.id, err)
		}
	}
	drain(atB) // B's hello reply

	// 1. A poses as the coordinator towards B, forges a reply into B's
	// inbox (a fake 409 would stop B's job; a fake success would make B
	// believe a result was accepted) and sends a request as B.
	for _, subj := range []string{
		protocol.AgentSubject(bID, protocol.VerbAssign),
		protocol.AgentSubject(bID, protocol.VerbRevoke),
		protocol.AgentSubject(bID, protocol.VerbControl),
		"_INBOX." + bID + ".forged.1",
		// A sends a request as B.
		protocol.CoordSubject(bID, protocol.VerbResult),
	} {
		if err := a.Publish(subj, []byte(`{"token":{"job_id":"j","owner":"`+bID+`/x","generation":1}}`)); err != nil {
			t.Fatal(err)
		}
		_ = a.Flush()
		testenv.Eventually(t, 5*time.Second, "a publish violation for "+subj, func() bool { return aErrs.saw(`Publish to "` + subj + `"`) })
	}
	// A may not even send itself coordinator commands.
	if err := a.Publish(protocol.AgentSubject(aID, protocol.VerbRevoke), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	_ = a.Flush()
	testenv.Eventually(t, 5*time.Second, "a publish violation for A's own revoke subject", func() bool {
		return aErrs.saw(`Publish to "` + protocol.AgentSubject(aID, protocol.VerbRevoke) + `"`)
	})

	// 2. A tries to read requests of every agent, with their tokens, and to
	// take them from the coordinators' queue group, and to read the
	// coordinators' replies and the whole inbox space.
	got := make(chan *nats.Msg, 64)
	for _, sub := range []struct{ subj, queue string }{
		{"edge.v1.coord.>", ""},
		{"edge.v1.coord." + bID + ".*", ""},
		{"edge.v1.coord.*.result", coordinator.ServiceName},
		{"_INBOX_edgecoord.>", ""},
		{"_INBOX.>", ""},
		{">", ""},
	} {
		var err error
		if sub.queue != "" {
			_, err = a.ChanQueueSubscribe(sub.subj, sub.queue, got)
		} else {
			_, err = a.ChanSubscribe(sub.subj, got)
		}
		if err != nil {
			t.Fatal(err)
		}
		_ = a.Flush()
		testenv.Eventually(t, 5*time.Second, "a subscribe violation for "+sub.subj, func() bool { return aErrs.saw(`Subscription to "` + sub.subj + `"`) })
	}

	// B works while A listens: requests, replies and a command. None of it
	// reaches A, and none of A's forgeries reached B.
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = natsrpc.Request(rctx, b, protocol.CoordSubject(bID, protocol.VerbHeartbeat), protocol.Heartbeat{BootID: "boot-" + bID, Free: 1}, &protocol.Ack{})
	cancel()
	if err != nil {
		t.Fatalf("B's heartbeat: %v", err)
	}
	_ = a.Flush()
	time.Sleep(200 * time.Millisecond)
	select {
	case m := <-got:
		t.Fatalf("A read %s: %s", m.Subject, m.Data)
	default:
	}
	for {
		select {
		case m := <-atB:
			if !strings.HasPrefix(m.Subject, "_INBOX."+bID+".") || strings.Contains(m.Subject, "forged") {
				t.Fatalf("B received %s: %s", m.Subject, m.Data)
			}
			continue
		default:
		}
		break
	}

	// 3. Without its own inbox prefix A gets no reply: the server does not
	// let it subscribe to the default _INBOX.<random> space, so requests
	// are useless to a client that tries to share another's inbox space.
	var plainErrs violations
	plain, err := nats.Connect(url, agentA.auth, nats.ErrorHandler(plainErrs.handler))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	rctx, cancel = context.WithTimeout(ctx, time.Second)
	err = natsrpc.Request(rctx, plain, protocol.CoordSubject(aID, protocol.VerbHello), protocol.Hello{BootID: "boot-x", Probe: true}, &protocol.HelloReply{})
	cancel()
	if err == nil {
		t.Fatal("a request with the default inbox prefix was answered")
	}
	testenv.Eventually(t, 5*time.Second, "a subscribe violation for the default inbox", func() bool { return plainErrs.saw(`Subscription to "_INBOX.`) })
}

func drain(ch chan *nats.Msg) {
	for {
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
			return
		}
	}
}
