package agent_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestStateReportsGoOneAtATime: while a heartbeat of the session is
// unanswered, the heartbeat the agent sends before the PC sleeps (saying
// it is draining) waits for it. The coordinator handles requests
// concurrently and stores each heartbeat as it comes; were both in flight
// at once, the older one ("not draining") could be stored last and the
// coordinator would grant the job handed back for the sleep to this
// agent again. Once the first is answered the draining one follows.
func TestStateReportsGoOneAtATime(t *testing.T) {
	r := newRig(t, rigSetup{
		// Requests wait a minute for their answer: the first heartbeat is
		// not given up on while the test holds it.
		tweak: func(o *agent.Options) { o.RequestTimeout = time.Minute },
		hook: func(verb string, _ fencing.Token) (any, int, bool, bool) {
			switch verb {
			case protocol.VerbHello:
				// Heartbeats every hour: the one the test sees is the one
				// it asked for.
				return protocol.HelloReply{LeaseTTLMS: 3000, HeartbeatMS: 3_600_000, ServerTime: time.Now().UTC(), CoordinatorID: "fake"}, 0, false, true
			case protocol.VerbHeartbeat:
				return nil, 0, true, true // answered below
			}
			return nil, 0, false, false
		},
	})
	nc, err := nats.Connect(r.url, nats.Name("heartbeats"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	release := make(chan struct{})
	var once sync.Once
	releaseFirst := func() { once.Do(func() { close(release) }) }
	t.Cleanup(releaseFirst)
	var (
		mu    sync.Mutex
		beats []protocol.Heartbeat
	)
	got := func() []protocol.Heartbeat {
		mu.Lock()
		defer mu.Unlock()
		return append([]protocol.Heartbeat(nil), beats...)
	}
	ack, _ := json.Marshal(protocol.Ack{OK: true})
	if _, err := nc.Subscribe(protocol.CoordSubject("pc-a", protocol.VerbHeartbeat), func(m *nats.Msg) {
		var hb protocol.Heartbeat
		if err := json.Unmarshal(m.Data, &hb); err != nil {
			t.Errorf("decode heartbeat: %v", err)
			return
		}
		mu.Lock()
		beats = append(beats, hb)
		first := len(beats) == 1
		mu.Unlock()
		if !first {
			_ = m.Respond(ack)
			return
		}
		go func() {
			<-release
			_ = m.Respond(ack)
		}()
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	r.a.BeatNow()
	testenv.Eventually(t, 30*time.Second, "the session's heartbeat", func() bool { return len(got()) == 1 })
	slept := make(chan struct{})
	go func() {
		defer close(slept)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r.a.PrepareForSleep(ctx)
	}()
	const waiting = "waiting for the agent's previous state report to be answered"
	testenv.Eventually(t, 30*time.Second, "the sleep's heartbeat to be sent or to wait", func() bool {
		return len(got()) > 1 || len(r.logs.entries(waiting)) > 0
	})
	if b := got(); len(b) != 1 {
		t.Fatalf("the draining heartbeat (%+v) was sent while the session's heartbeat was unanswered", b[1])
	}
	releaseFirst()
	<-slept
	b := got()
	if len(b) != 2 || b[0].Draining || !b[1].Draining {
		t.Fatalf("heartbeats %+v, want the session's (not draining) and then the sleep's (draining)", b)
	}
}
