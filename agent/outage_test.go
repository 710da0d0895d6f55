package agent_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakewda"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// restartNATS starts a NATS server on port, where an earlier one listened.
func restartNATS(t *testing.T, port int) *server.Server {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true}
	var s *server.Server
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err = server.NewServer(opts)
		if err == nil {
			go s.Start()
			if s.ReadyForConnections(5 * time.Second) {
				break
			}
			s.Shutdown()
		}
		if time.Now().After(deadline) {
			t.Fatalf("restart nats server on port %d: %v", opts.Port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// TestNATSOutageSelfFences: the NATS server goes away
// while the agent runs a job on its phone (a simulated Android phone, or an
// iPhone behind the fake WebDriverAgent). The agent cannot renew, stops the
// job by its own deadline, and does nothing more for it: no call for it
// reaches the coordinator or crosses NATS, and on an iPhone nothing reaches
// its WebDriverAgent after the stop. When a NATS server is back on the same
// address, the agent reconnects, says hello again and takes and finishes
// new work (on its second phone).
func TestNATSOutageSelfFences(t *testing.T) {
	t.Run("android", func(t *testing.T) { natsOutageSelfFences(t, nil) })
	t.Run("iphone", func(t *testing.T) { natsOutageSelfFences(t, startIPhone(t, "00008110-00000000000000A1")) })
}

func natsOutageSelfFences(t *testing.T, iphone *fakewda.Phone) {
	leakCheck(t)
	sys := newSystem(t, 1500*time.Millisecond)
	var logs logBuffer
	a, _ := sys.startAgentWith("pc-a", agentSetup{log: &logs, margin: 300 * time.Millisecond, slots: 2, iphone: iphone,
		extra: []capture.SimOptions{{Serial: "sim-pc-a-2", Width: 160, Height: 320}}})
	first := "sim-pc-a"
	if iphone != nil {
		first = iphone.UDID()
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	})
	w := sys.watch("pc-a")
	long, err := sys.store.Submit(sys.ctx, jobstore.JobSpec{Task: protocol.Task{Device: protocol.DeviceSelector{Serial: first}, Steps: []protocol.Step{
		{Op: protocol.OpScreenshot, Name: "before"},
		{Op: protocol.OpWait, DurationMS: 60_000},
		{Op: protocol.OpScreenshot, Name: "after"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the first artifact of the job", func() bool {
		arts, _ := sys.store.Artifacts(sys.ctx, long.ID, 1)
		return len(arts) == 1
	})

	port := sys.ns.Addr().(*net.TCPAddr).Port
	sys.ns.Shutdown()
	sys.ns.WaitForShutdown()
	down := time.Now()
	stop := waitStop(t, a, long.ID, 20*time.Second)
	t.Logf("job stopped %v after NATS went down (cause %q, cut short %q)", stop.At.Sub(down), stop.Cause, stop.CutShort)
	if !errors.Is(stop.Err, fencing.ErrLeaseExpired) || stop.Token.Generation != 1 {
		t.Fatalf("stop %+v: want generation 1 stopped by its lease deadline", stop)
	}
	if a.Ready() {
		t.Error("agent reports ready while NATS is down")
	}
	evs, err := sys.store.WriteEvents(sys.ctx, long.ID)
	if err != nil {
		t.Fatal(err)
	}
	before := len(evs)

	// NATS is back on the same address.
	sys.ns = restartNATS(t, port)
	testenv.Eventually(t, 20*time.Second, "the agent to say hello again", func() bool {
		return a.Ready() && a.Status().Connection.LastHello.After(down)
	})

	fresh, err := sys.store.Submit(sys.ctx, jobstore.JobSpec{Task: protocol.Task{Device: protocol.DeviceSelector{Serial: "sim-pc-a-2"},
		Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "fresh"}}}})
	if err != nil {
		t.Fatal(err)
	}
	done := sys.waitJob(fresh.ID, func(j jobstore.Job) bool { return j.Status == jobstore.StatusSucceeded }, "new work after the outage")
	if done.CompletedBy != a.Owner() {
		t.Fatalf("new job completed by %q, want %q", done.CompletedBy, a.Owner())
	}
	// Nothing of the stopped generation after its stop: no call reached the
	// coordinator's store, none crossed NATS.
	evs, err = sys.store.WriteEvents(sys.ctx, long.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs[before:] {
		agentVerb := e.Verb == "renew" || e.Verb == "artifact" || e.Verb == "result" || e.Verb == "fail"
		if agentVerb && e.Owner == a.Owner() && e.Generation == 1 {
			t.Errorf("write %s of generation 1 reached the store after the stop: %+v", e.Verb, e)
		}
	}
	n := 0
	for _, m := range w.forJob(long.ID) {
		if m.tok == stop.Token {
			n++
		}
	}
	if n > stop.Calls {
		t.Errorf("NATS carried %d requests of generation 1, the agent had sent %d when it stopped", n, stop.Calls)
	}
	if iphone != nil {
		// The iPhone took the job's first screenshot through WDA, and
		// nothing reached its WDA after the stop.
		var shots int
		for _, r := range iphone.Received() {
			if r.At.After(stop.At) {
				t.Errorf("%s %s reached the iPhone %v after the stop", r.Method, r.Path, r.At.Sub(stop.At))
			} else if strings.HasSuffix(r.Path, "/screenshot") {
				shots++
			}
		}
		if shots == 0 {
			t.Errorf("the iPhone took no screenshot: %v", iphone.Requests())
		}
	}
}
