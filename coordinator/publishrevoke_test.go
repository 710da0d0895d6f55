package coordinator_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// A revoke has left for the NATS server when PublishRevoke returns: it is
// flushed from the caller's goroutine, not left in the connection's buffer
// for its flusher goroutine to send later; and each one arrives.
func TestPublishRevokeLeavesBeforeItReturns(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	agent, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	got, err := agent.SubscribeSync(protocol.AgentSubject("pc-a", protocol.VerbRevoke))
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Flush(); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		tok := fencing.Token{JobID: "job-1", Owner: "pc-a/boot-1", Generation: int64(i + 1)}
		if err := coordinator.PublishRevoke(nc, tok, "reassigned", 5*time.Second); err != nil {
			t.Fatalf("revoke %d: %v", i+1, err)
		}
		if b, err := nc.Buffered(); err != nil || b != 0 {
			t.Fatalf("after revoke %d returned the connection still buffered %d bytes (%v)", i+1, b, err)
		}
	}
	for i := range n {
		m, err := got.NextMsg(time.Minute)
		if err != nil {
			t.Fatalf("revoke %d not delivered: %v", i+1, err)
		}
		var r protocol.Revoke
		if err := json.Unmarshal(m.Data, &r); err != nil || r.Token.Generation != int64(i+1) || r.Reason != "reassigned" {
			t.Fatalf("revoke %d: %s (%v)", i+1, m.Data, err)
		}
	}
}

// While the connection to NATS is down, a revoke waits in the reconnect
// buffer and PublishRevoke returns at once instead of waiting out its flush
// timeout.
func TestPublishRevokeWhileDisconnectedDoesNotWait(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	disconnected := make(chan struct{}, 1)
	nc, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(time.Hour),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnected <- struct{}{} }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ns.Shutdown()
	<-disconnected
	done := make(chan error, 1)
	go func() {
		done <- coordinator.PublishRevoke(nc, fencing.Token{JobID: "job-1", Owner: "pc-a/boot-1", Generation: 1}, "reassigned", time.Hour)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("revoke while disconnected: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("PublishRevoke waited for a flush while the connection was down")
	}
	if n, err := nc.Buffered(); err != nil || n == 0 {
		t.Fatalf("revoke not kept for the reconnect: %d bytes buffered (%v)", n, err)
	}
}
