package coordinator_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestRevokedAgentRefused: once an agent is revoked in the store (as
// edgecoord agent revoke does, from another process), the coordinator
// answers its requests 403 and counts them with reason revoked, even when
// the NATS server still lets it in (static users); another agent is
// served as before.
func TestRevokedAgentRefused(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	store := openSQLite(t)
	c := startCoordinator(t, ns.ClientURL(), store, fastOptions(t, "c1"))
	hello := func(id string) error {
		nc, err := nats.Connect(ns.ClientURL(), nats.CustomInboxPrefix(protocol.InboxPrefix(id)))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		return natsrpc.Request(ctx, nc, protocol.CoordSubject(id, protocol.VerbHello), protocol.Hello{BootID: "b1", Version: "test", Slots: 1}, &protocol.HelloReply{})
	}
	if err := hello("pc-x"); err != nil {
		t.Fatalf("hello before the revoke: %v", err)
	}
	if _, err := store.(jobstore.EnrollStore).RevokeAgent(t.Context(), "pc-x"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the revoked agent's hello refused 403", func() bool {
		var pe *protocol.Error
		return errors.As(hello("pc-x"), &pe) && pe.Code == protocol.CodeForbidden
	})
	if err := hello("pc-y"); err != nil {
		t.Fatalf("another agent's hello: %v", err)
	}
	if body := metricsText(t, c); !strings.Contains(body, `agent_requests_refused_total{agent="pc-x",reason="revoked"} `) {
		t.Fatalf("/metrics counts no refusal of pc-x with reason revoked:\n%s", body)
	}
}
