package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// rawAgent is an agent's NATS connection, with its own reply inbox, that
// sends the agent verbs by hand.
type rawAgent struct {
	id   string
	boot string
	nc   *nats.Conn
}

func connectRawAgent(t *testing.T, env *e2e.Env, id string) *rawAgent {
	t.Helper()
	nc, err := nats.Connect(env.NATSURL(), nats.Name("edgeagent "+id), nats.CustomInboxPrefix(protocol.InboxPrefix(id)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return &rawAgent{id: id, boot: "boot-" + id, nc: nc}
}

// request sends verb with body and returns the reply's error code (0 for a
// success) or the transport error.
func (a *rawAgent) request(verb string, body any, timeout time.Duration) (int, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	m, err := a.nc.Request(protocol.CoordSubject(a.id, verb), data, timeout)
	if err != nil {
		return 0, err
	}
	if c := m.Header.Get(micro.ErrorCodeHeader); c != "" {
		code, _ := strconv.Atoi(c)
		return code, nil
	}
	return 0, nil
}

func (a *rawAgent) hello(t *testing.T) {
	t.Helper()
	var code int
	testenv.Eventually(t, 10*time.Second, a.id+" hello accepted", func() bool {
		c, err := a.request(protocol.VerbHello, protocol.Hello{BootID: a.boot, Version: "test", Slots: 1, Devices: []protocol.Device{}}, 2*time.Second)
		code = c
		return err == nil && c == 0
	})
	if code != 0 {
		t.Fatalf("%s hello: code %d", a.id, code)
	}
}

// refusedCount reads agent_requests_refused_total{agent, reason} from the
// coordinator's /metrics (0 when the series is absent).
func refusedCount(t *testing.T, c *e2e.Coordinator, agent, reason string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + c.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	want := fmt.Sprintf(`agent_requests_refused_total{agent=%q,reason=%q} `, agent, reason)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), want); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("/metrics: %q: %v", sc.Text(), err)
			}
			return f
		}
	}
	return 0
}

// TestFloodingAgentCostsOnlyItself floods edgecoord with one agent's
// heartbeats, each naming its own reply inbox, at a rate far above what
// the store can serve, while another agent sends its heartbeats one after the other: the
// well-behaved agent's heartbeats keep completing during the flood, and the
// flooder's requests past its budget are refused and counted under its own
// agent label only. The flood is bounded in count and time; it must not
// end before the well-behaved agent has had its heartbeats answered.
func TestFloodingAgentCostsOnlyItself(t *testing.T) {
	env := e2e.NewEnv(t)
	c := env.StartCoordinator(e2e.CoordinatorOptions{Extra: "agents:\n  request_rate: 100\n  request_burst: 100\n"})
	good := connectRawAgent(t, env, "pc-good")
	flood := connectRawAgent(t, env, "pc-flood")
	good.hello(t)
	flood.hello(t)

	// The flood, 20,000 heartbeats a second, is several times what the
	// store can record on this machine, and well within what the
	// coordinator can read and refuse.
	const (
		floodBatch = 200
		floodTick  = 10 * time.Millisecond
		floodWarm  = 100_000
		maxFlood   = 1_200_000
		floodFor   = 60 * time.Second
		wantBeats  = 20
		beatWithin = 2 * time.Second
	)
	body, err := json.Marshal(protocol.Heartbeat{BootID: flood.boot, Free: 1})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var (
		wg       sync.WaitGroup
		sent     atomic.Int64
		floodEnd atomic.Bool
	)
	wg.Go(func() {
		defer floodEnd.Store(true)
		subj := protocol.CoordSubject(flood.id, protocol.VerbHeartbeat)
		reply := protocol.InboxPrefix(flood.id) + ".flood"
		until := time.Now().Add(floodFor)
		tick := time.NewTicker(floodTick)
		defer tick.Stop()
		for sent.Load() < maxFlood && time.Now().Before(until) {
			for range floodBatch {
				if err := flood.nc.PublishMsg(&nats.Msg{Subject: subj, Reply: reply, Data: body}); err != nil {
					t.Errorf("flood: %v", err)
					return
				}
			}
			sent.Add(floodBatch)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	stopFlood := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopFlood()

	// The well-behaved agent starts once the flood has sent more than the
	// store could have recorded in its time.
	testenv.Eventually(t, 30*time.Second, "the flood under way", func() bool {
		return floodEnd.Load() || sent.Load() >= floodWarm
	})
	ok, failed := 0, 0
	for ok < wantBeats {
		if floodEnd.Load() {
			t.Fatalf("well-behaved agent starved: %d of %d heartbeats answered during a flood of %d messages (%d failed or refused)",
				ok, wantBeats, sent.Load(), failed)
		}
		code, err := good.request(protocol.VerbHeartbeat, protocol.Heartbeat{BootID: good.boot, Free: 1}, beatWithin)
		if err == nil && code == 0 {
			ok++
		} else {
			failed++
		}
	}
	if floodEnd.Load() {
		t.Fatalf("the flood ended (%d messages) before the well-behaved agent's heartbeats were checked", sent.Load())
	}
	t.Logf("%d heartbeats of the well-behaved agent answered (%d not) while %d flood messages were sent", ok, failed, sent.Load())
	if n := refusedCount(t, c, good.id, "rate"); n != 0 {
		t.Errorf("the well-behaved agent had %v requests refused", n)
	}
	if n := refusedCount(t, c, flood.id, "rate"); n == 0 {
		t.Errorf("no refusal of the flooder counted")
	}
	stopFlood()
	c.MustCleanShutdown(t)
}

// TestReplyOnlyToOwnInbox sends agent requests that name, as their reply
// subject, another agent's inbox and another agent's assign subject: the
// coordinator answers neither (the other agent receives nothing) and
// counts both, while a request naming the sender's own inbox is answered.
func TestReplyOnlyToOwnInbox(t *testing.T) {
	env := e2e.NewEnv(t)
	c := env.StartCoordinator(e2e.CoordinatorOptions{})
	evil := connectRawAgent(t, env, "pc-evil")
	victim := connectRawAgent(t, env, "pc-victim")
	evil.hello(t)

	got := make(chan *nats.Msg, 16)
	for _, subj := range []string{protocol.InboxPrefix(victim.id) + ".>", protocol.AgentSubject(victim.id, ">")} {
		sub, err := victim.nc.ChanSubscribe(subj, got)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := victim.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(protocol.Heartbeat{BootID: evil.boot, Free: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, reply := range []string{protocol.InboxPrefix(victim.id) + ".x", protocol.AgentSubject(victim.id, protocol.VerbAssign)} {
		if err := evil.nc.PublishMsg(&nats.Msg{Subject: protocol.CoordSubject(evil.id, protocol.VerbHeartbeat), Reply: reply, Data: body}); err != nil {
			t.Fatal(err)
		}
	}
	if code, err := evil.request(protocol.VerbHeartbeat, protocol.Heartbeat{BootID: evil.boot, Free: 1}, 5*time.Second); err != nil || code != 0 {
		t.Fatalf("heartbeat on the agent's own inbox: code %d, %v", code, err)
	}
	testenv.Eventually(t, 10*time.Second, "both misdirected requests refused, or one answered", func() bool {
		return len(got) > 0 || refusedCount(t, c, evil.id, "reply_subject") >= 2
	})
	select {
	case m := <-got:
		t.Fatalf("the coordinator answered on %s, a subject of another agent: %q %v", m.Subject, m.Data, m.Header)
	default:
	}
	if n := refusedCount(t, c, evil.id, "reply_subject"); n != 2 {
		t.Fatalf("refused misdirected replies counted %v, want 2", n)
	}
	c.MustCleanShutdown(t)
}
