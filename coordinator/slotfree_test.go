package coordinator_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestAcceptedOutcomeFreesTheSlot: an agent with one slot sends, while
// its job runs, a heartbeat saying it has no free slot. Once the
// coordinator accepts the job's result, or its failure report, the next
// queued job is granted to that agent at once: the agent freed the slot
// when it began that call. The agents' heartbeat is an hour, so no later
// heartbeat reports the free slot instead. The second job then runs to
// its result.
func TestAcceptedOutcomeFreesTheSlot(t *testing.T) {
	for _, verb := range []string{protocol.VerbResult, protocol.VerbFail} {
		t.Run(verb, func(t *testing.T) {
			ns := testenv.NATS(t)
			store := openSQLite(t)
			opts := fastOptions(t, "c1")
			opts.HeartbeatEvery, opts.OfflineAfter = time.Hour, time.Hour
			startCoordinator(t, ns.ClientURL(), store, opts)

			const id, boot = "pc-s", "b1"
			nc, err := nats.Connect(ns.ClientURL(), nats.CustomInboxPrefix(protocol.InboxPrefix(id)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			assigns := make(chan protocol.Assign, 8)
			if _, err := nc.Subscribe(protocol.AgentSubject(id, protocol.VerbAssign), func(m *nats.Msg) {
				var as protocol.Assign
				if err := json.Unmarshal(m.Data, &as); err != nil {
					t.Errorf("decode assign: %v", err)
					return
				}
				data, _ := json.Marshal(protocol.Ack{OK: true})
				_ = m.Respond(data)
				assigns <- as
			}); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			send := func(verb string, req, resp any) {
				t.Helper()
				if err := natsrpc.Request(ctx, nc, protocol.CoordSubject(id, verb), req, resp); err != nil {
					t.Fatalf("%s: %v", verb, err)
				}
			}
			// The wait is a guard against a hung test, not a measure.
			assigned := func(jobID string) fencing.Token {
				t.Helper()
				select {
				case as := <-assigns:
					if as.Token.JobID != jobID {
						t.Fatalf("assign of %s, want %s", as.Token.JobID, jobID)
					}
					return as.Token
				case <-ctx.Done():
					t.Fatalf("no assign of %s", jobID)
					return fencing.Token{}
				}
			}

			send(protocol.VerbHello, protocol.Hello{BootID: boot, Devices: []protocol.Device{phone("S1")}, Slots: 1}, &protocol.HelloReply{})
			if _, err := store.Submit(ctx, jobstore.JobSpec{ID: "first", MaxAttempts: 1, Task: task(protocol.DeviceSelector{})}); err != nil {
				t.Fatal(err)
			}
			first := assigned("first")
			send(protocol.VerbRenew, protocol.Renew{Token: first}, &protocol.RenewReply{})
			send(protocol.VerbHeartbeat, protocol.Heartbeat{BootID: boot, Running: []fencing.Token{first}, Free: 0}, &protocol.Ack{})
			if _, err := store.Submit(ctx, jobstore.JobSpec{ID: "second", MaxAttempts: 1, Task: task(protocol.DeviceSelector{})}); err != nil {
				t.Fatal(err)
			}
			switch verb {
			case protocol.VerbResult:
				send(verb, protocol.Result{Token: first, Result: json.RawMessage(`{}`)}, &protocol.ResultReply{})
			case protocol.VerbFail:
				send(verb, protocol.Fail{Token: first, Reason: "step 1 failed", Class: protocol.FailClassJob}, &protocol.Ack{})
			}
			second := assigned("second")
			send(protocol.VerbRenew, protocol.Renew{Token: second}, &protocol.RenewReply{})
			send(protocol.VerbResult, protocol.Result{Token: second, Result: json.RawMessage(`{}`)}, &protocol.ResultReply{})
		})
	}
}
