package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestNetworkPhoneConnectedAgain: a network phone (adb connect) named in
// phones.connect is connected by the agent itself. Unreachable for longer
// than the adb server keeps trying, it is dropped by the server for good;
// the agent keeps it listed offline with the reason (at the coordinator
// and in edgeagent status), says so in its log, connects it again with
// backoff, and once the phone answers again the job waiting for it runs,
// with nobody running adb connect.
func TestNetworkPhoneConnectedAgain(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	adb := testenv.StartADB(t)
	phone, err := fakeadbd.Start(fakeadbd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { phone.Close() })
	serial := phone.Serial()
	l := newLab(t, 3*time.Second)
	p := l.env.StartAgent(e2e.AgentOptions{ADB: adb, Phones: []e2e.Phone{{Serial: serial, Tags: []string{"wifi"}}},
		Extra: "phones:\n  connect: [\"" + phone.Addr() + "\"]\n"})
	statusAddr := p.StatusAddr
	device := func() (protocol.Device, bool) {
		a, err := l.store.GetAgent(l.ctx, "pc-bin")
		if err != nil {
			return protocol.Device{}, false
		}
		i := slices.IndexFunc(a.Devices, func(d protocol.Device) bool { return d.Serial == serial })
		if i < 0 {
			return protocol.Device{}, false
		}
		return a.Devices[i], true
	}
	ready := func() bool { d, ok := device(); return ok && d.Ready() }
	testenv.Eventually(t, 60*time.Second, "the phone connected by the agent and ready at the coordinator", ready)
	runJob := func(what string) {
		t.Helper()
		id := l.submitSpec(t, jobstore.JobSpec{MaxAttempts: 1, Task: protocol.Task{
			Device: protocol.DeviceSelector{Serial: serial}, Steps: []protocol.Step{screenshot},
		}})
		if j := l.ended(t, id, 60*time.Second); j.Status != jobstore.StatusSucceeded {
			t.Fatalf("job %s: %s (%s), want SUCCEEDED", what, j.Status, j.FailReason)
		}
	}
	runJob("on the phone the agent connected")

	// The phone leaves the network. The adb server would try it for about
	// a minute and then drop it; the test drops it at once as the server
	// then does (adb disconnect), which the agent sees the same way: the
	// phone is no longer listed.
	phone.LeaveNetwork()
	if out, err := adb.Run("disconnect", serial); err != nil {
		t.Fatalf("adb disconnect %s: %v: %s", serial, err, out)
	}
	testenv.Eventually(t, 150*time.Second, "the adb server to drop the unreachable phone", func() bool {
		out, err := adb.Run("devices")
		return err == nil && !strings.Contains(out, serial)
	})
	// A job for it waits meanwhile.
	waiting := l.submitSpec(t, jobstore.JobSpec{MaxAttempts: 1, Task: protocol.Task{
		Device: protocol.DeviceSelector{Serial: serial}, Steps: []protocol.Step{screenshot},
	}})
	const why = "network phone not listed by the adb server; the agent connects it again (adb connect " + "%s"
	reason := strings.Replace(why, "%s", serial, 1)
	// The agent connects it again with backoff (1 s, 2 s, 4 s, …): three
	// failed connects, numbered, each with its wait.
	const failed = "network phone does not answer; connecting again"
	testenv.Eventually(t, 90*time.Second, "three failed connects in the agent's log and the phone's reason", func() bool {
		d, ok := device()
		return len(p.Entries(failed)) >= 3 &&
			ok && d.State == protocol.DeviceOffline && strings.HasPrefix(d.Reason, reason+"): ")
	})
	for i, e := range p.Entries(failed)[:3] {
		if e["serial"] != serial || e["attempt"] != float64(i+1) || e["retry_in"] == nil {
			t.Errorf("failed connect %d logged as %v", i+1, e)
		}
	}
	if e := p.Entries("network phone dropped by the adb server; the agent connects it again (adb connect) until it answers"); len(e) != 1 || e[0]["serial"] != serial {
		t.Errorf("log lines of the drop: %v, want one naming %s", e, serial)
	}
	if out, errOut, code := p.CLI(t, "status", "-addr", statusAddr); code != 0 || !strings.Contains(out, serial+" offline: "+reason) {
		t.Errorf("edgeagent status while the phone is away: exit %d\n%s%s", code, out, errOut)
	}
	if j, err := l.store.Get(l.ctx, waiting); err != nil || j.Status != jobstore.StatusQueued {
		t.Fatalf("job for the away phone: %+v, %v; want it QUEUED", j.Status, err)
	}

	// Back on the network: the agent connects it again and the job runs.
	if err := phone.ReturnToNetwork(); err != nil {
		t.Fatal(err)
	}
	if j := l.ended(t, waiting, 120*time.Second); j.Status != jobstore.StatusSucceeded || j.Device != serial {
		t.Fatalf("job for the phone that came back: %s on %s (%s), want SUCCEEDED", j.Status, j.Device, j.FailReason)
	}
	// Connected again by the connect loop, or by the recovery ladder's
	// reconnect when an idle probe found it first: either way the log says
	// the phone is listed again after the failed connects.
	if len(p.Entries("network phone connected (adb connect)")) < 1 {
		t.Errorf("the agent did not log connecting the phone at start")
	}
	again := p.Entries("network phone listed by the adb server again")
	if n := len(again); n != 1 || again[0]["serial"] != serial || again[0]["failed_connects"] == nil || again[0]["failed_connects"].(float64) < 3 {
		t.Errorf("log lines of the phone listed again: %v, want one naming %s after at least 3 failed connects", again, serial)
	}
	if d, _ := device(); d.Reason != "" {
		t.Errorf("phone ready again with reason %q", d.Reason)
	}
	p.MustCleanShutdown(t)
}
