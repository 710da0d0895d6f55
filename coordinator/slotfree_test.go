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

// slotAgent is an agent played by the test over NATS: it takes every
// assign and sends what the test tells it to.
type slotAgent struct {
	t       *testing.T
	ctx     context.Context
	id      string
	nc      *nats.Conn
	assigns chan protocol.Assign
}

func newSlotAgent(t *testing.T, ctx context.Context, url, id string) *slotAgent {
	t.Helper()
	nc, err := nats.Connect(url, nats.CustomInboxPrefix(protocol.InboxPrefix(id)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	a := &slotAgent{t: t, ctx: ctx, id: id, nc: nc, assigns: make(chan protocol.Assign, 8)}
	if _, err := nc.Subscribe(protocol.AgentSubject(id, protocol.VerbAssign), func(m *nats.Msg) {
		var as protocol.Assign
		if err := json.Unmarshal(m.Data, &as); err != nil {
			t.Errorf("decode assign: %v", err)
			return
		}
		data, _ := json.Marshal(protocol.Ack{OK: true})
		_ = m.Respond(data)
		a.assigns <- as
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return a
}

func (a *slotAgent) send(verb string, req, resp any) {
	a.t.Helper()
	if err := natsrpc.Request(a.ctx, a.nc, protocol.CoordSubject(a.id, verb), req, resp); err != nil {
		a.t.Fatalf("%s: %v", verb, err)
	}
}

// assigned waits for the assign of jobID. The wait is a guard against a
// hung test, not a measure.
func (a *slotAgent) assigned(jobID string) fencing.Token {
	a.t.Helper()
	select {
	case as := <-a.assigns:
		if as.Token.JobID != jobID {
			a.t.Fatalf("assign of %s, want %s", as.Token.JobID, jobID)
		}
		return as.Token
	case <-a.ctx.Done():
		a.t.Fatalf("no assign of %s", jobID)
		return fencing.Token{}
	}
}

// TestAcceptedOutcomeFreesTheSlot: an agent with one slot sends, while
// its job runs, a heartbeat saying it has no free slot. Once the
// coordinator accepts the job's result, or its failure report, the next
// queued job is granted to that agent at once: the agent freed the slot
// when it began that call. The agents' heartbeat is an hour, so no later
// heartbeat reports the free slot instead. The second job then runs to
// its result.
func TestAcceptedOutcomeFreesTheSlot(t *testing.T) {
	t.Parallel()
	for _, verb := range []string{protocol.VerbResult, protocol.VerbFail} {
		t.Run(verb, func(t *testing.T) {
			ns := testenv.NATS(t)
			store := openSQLite(t)
			opts := fastOptions(t, "c1")
			opts.HeartbeatEvery, opts.OfflineAfter = time.Hour, time.Hour
			startCoordinator(t, ns.ClientURL(), store, opts)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			const boot = "b1"
			a := newSlotAgent(t, ctx, ns.ClientURL(), "pc-s")

			a.send(protocol.VerbHello, protocol.Hello{BootID: boot, Devices: []protocol.Device{phone("S1")}, Slots: 1}, &protocol.HelloReply{})
			if _, err := store.Submit(ctx, jobstore.JobSpec{ID: "first", MaxAttempts: 1, Task: task(protocol.DeviceSelector{})}); err != nil {
				t.Fatal(err)
			}
			first := a.assigned("first")
			a.send(protocol.VerbRenew, protocol.Renew{Token: first}, &protocol.RenewReply{})
			a.send(protocol.VerbHeartbeat, protocol.Heartbeat{BootID: boot, Running: []fencing.Token{first}, Free: 0}, &protocol.Ack{})
			if _, err := store.Submit(ctx, jobstore.JobSpec{ID: "second", MaxAttempts: 1, Task: task(protocol.DeviceSelector{})}); err != nil {
				t.Fatal(err)
			}
			switch verb {
			case protocol.VerbResult:
				a.send(verb, protocol.Result{Token: first, Result: json.RawMessage(`{}`)}, &protocol.ResultReply{})
			case protocol.VerbFail:
				a.send(verb, protocol.Fail{Token: first, Reason: "step 1 failed", Class: protocol.FailClassJob}, &protocol.Ack{})
			}
			second := a.assigned("second")
			a.send(protocol.VerbRenew, protocol.Renew{Token: second}, &protocol.RenewReply{})
			a.send(protocol.VerbResult, protocol.Result{Token: second, Result: json.RawMessage(`{}`)}, &protocol.ResultReply{})
		})
	}
}

// TestHandBackForLeavingFreesNoSlot: a job an agent hands back because it
// is leaving (its PC going to sleep, shutting down, updating) is queued
// again at once, but a scheduling round after the hand-back grants it to
// nobody, even though no heartbeat told the coordinator the agent is
// draining (that report may be lost or stored late): the agent reported
// no free slot. Its next heartbeat with a free slot (it woke up) gets
// the job.
func TestHandBackForLeavingFreesNoSlot(t *testing.T) {
	t.Parallel()
	for _, cause := range []string{protocol.CauseAgentSleep, protocol.CauseAgentShutdown, protocol.CauseAgentUpdate} {
		t.Run(cause, func(t *testing.T) {
			ns := testenv.NATS(t)
			store := openSQLite(t)
			opts := fastOptions(t, "c1")
			opts.HeartbeatEvery, opts.OfflineAfter = time.Hour, time.Hour
			c := startCoordinator(t, ns.ClientURL(), store, opts)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			const boot = "b1"
			a := newSlotAgent(t, ctx, ns.ClientURL(), "pc-s")

			a.send(protocol.VerbHello, protocol.Hello{BootID: boot, Devices: []protocol.Device{phone("S1")}, Slots: 1}, &protocol.HelloReply{})
			if _, err := store.Submit(ctx, jobstore.JobSpec{ID: "job", MaxAttempts: 3, Task: task(protocol.DeviceSelector{})}); err != nil {
				t.Fatal(err)
			}
			first := a.assigned("job")
			a.send(protocol.VerbRenew, protocol.Renew{Token: first}, &protocol.RenewReply{})
			a.send(protocol.VerbFail, protocol.Fail{Token: first, Reason: "handed back", Requeue: true,
				Class: protocol.FailClassInfrastructure, Cause: cause}, &protocol.Ack{})
			// A round of its own, after the one the report kicked: SQLite
			// writes one at a time, so a grant of either round is stored
			// when it returns.
			c.srv.ScheduleOnce(ctx)
			j, err := store.Get(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			if j.Status != jobstore.StatusQueued {
				t.Fatalf("after the hand-back the job is %s (owner %q, g%d), want %s: granted to the agent that is leaving",
					j.Status, j.WorkerID, j.Generation, jobstore.StatusQueued)
			}
			a.send(protocol.VerbHeartbeat, protocol.Heartbeat{BootID: boot, Free: 1}, &protocol.Ack{})
			if again := a.assigned("job"); again.Generation <= first.Generation {
				t.Fatalf("granted again as g%d, want a generation after g%d", again.Generation, first.Generation)
			}
		})
	}
}
