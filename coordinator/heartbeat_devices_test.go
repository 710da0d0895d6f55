package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestHeartbeatNoPhones: a heartbeat whose devices list is
// empty says the agent has no phones now, and the coordinator stores none;
// a heartbeat without the field leaves the stored phones as they are
// (docs/protocol.md section 5, heartbeat).
func TestHeartbeatNoPhones(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	store := openSQLite(t)
	startCoordinator(t, ns.ClientURL(), store, fastOptions(t, "c1"))
	nc, err := nats.Connect(ns.ClientURL(), nats.CustomInboxPrefix(protocol.InboxPrefix("pc-h")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	send := func(verb string, req, resp any) {
		t.Helper()
		if err := natsrpc.Request(ctx, nc, protocol.CoordSubject("pc-h", verb), req, resp); err != nil {
			t.Fatalf("%s: %v", verb, err)
		}
	}
	phones := func() int {
		t.Helper()
		a, err := store.GetAgent(ctx, "pc-h")
		if err != nil {
			t.Fatal(err)
		}
		return len(a.Devices)
	}
	send(protocol.VerbHello, protocol.Hello{BootID: "b1", Devices: []protocol.Device{phone("P1"), phone("P2")}, Slots: 1}, &protocol.HelloReply{})
	send(protocol.VerbHeartbeat, protocol.Heartbeat{BootID: "b1", Free: 1}, &protocol.Ack{})
	if n := phones(); n != 2 {
		t.Fatalf("after a heartbeat without devices: %d phones stored, want the 2 of the hello", n)
	}
	send(protocol.VerbHeartbeat, protocol.Heartbeat{BootID: "b1", Devices: []protocol.Device{}, Free: 1}, &protocol.Ack{})
	if n := phones(); n != 0 {
		t.Fatalf("after a heartbeat with \"devices\": []: %d phones stored, want none", n)
	}
}
