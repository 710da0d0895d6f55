package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakewda"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// iphoneLab is the lab with the real agent driving one fake iPhone
// (tagged ios) through its WebDriverAgent, with the recovery ladder
// probing idle phones every second.
type iphoneLab struct {
	*lab
	agent *e2e.Agent
	phone *fakewda.Phone
}

// newIPhoneLab starts the lab; opTimeout is the agent's phones.op_timeout
// (0: its default).
func newIPhoneLab(t *testing.T, o fakewda.Options, opTimeout time.Duration) *iphoneLab {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	phone, err := fakewda.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { phone.Close() })
	l := newLab(t, 3*time.Second)
	a := l.env.StartAgent(e2e.AgentOptions{Phones: []e2e.Phone{{Serial: phone.UDID(), WDAURL: phone.URL(), Tags: []string{"ios"}}}, OpTimeout: opTimeout, Extra: `phones:
  recovery:
    probe_timeout: 500ms
    probe_interval: 1s
    quarantine_after: 100
    window: 10m
`})
	il := &iphoneLab{lab: l, agent: a, phone: phone}
	il.waitState(t, "the iPhone ready at the coordinator", protocol.DeviceReady)
	return il
}

// device is the iPhone as the coordinator's store lists it.
func (l *iphoneLab) device() (protocol.Device, bool) {
	a, err := l.store.GetAgent(l.ctx, "pc-bin")
	if err != nil {
		return protocol.Device{}, false
	}
	for _, d := range a.Devices {
		if d.Serial == l.phone.UDID() {
			return d, true
		}
	}
	return protocol.Device{}, false
}

// waitState waits until the coordinator lists the iPhone in one of
// states, and returns it.
func (l *iphoneLab) waitState(t *testing.T, what string, states ...string) protocol.Device {
	t.Helper()
	var seen protocol.Device
	testenv.Eventually(t, e2e.WaitTimeout, what, func() bool {
		d, ok := l.device()
		seen = d
		for _, st := range states {
			if ok && d.State == st && (st == protocol.DeviceReady || d.Reason != "") {
				return true
			}
		}
		return false
	})
	return seen
}

// waiting returns why the coordinator keeps job id queued, as `edgecoord
// job list` says it.
func (l *iphoneLab) waiting(t *testing.T, id string) string {
	t.Helper()
	var jobs []struct{ ID, Waiting string }
	if err := json.Unmarshal([]byte(edgecoord(t, l.edgecoord(), "job", "list", "--json", "--status", "queued")), &jobs); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.ID == id {
			return j.Waiting
		}
	}
	return ""
}

// onIPhone is a job aimed at the iPhone.
func (l *iphoneLab) onIPhone(steps ...protocol.Step) jobstore.JobSpec {
	return jobstore.JobSpec{MaxAttempts: 1, Task: protocol.Task{Device: protocol.DeviceSelector{Serial: l.phone.UDID()}, Steps: steps}}
}

// runsOnIPhone submits a screenshot job aimed at the iPhone and checks
// that it succeeds there. The job has a second attempt: the lab's
// probe_timeout (500ms, for quick recoveries) can be missed by a sound
// phone on a loaded machine, which fails the pre-job probe of the first
// and hands the phone to the ladder again.
func (l *iphoneLab) runsOnIPhone(t *testing.T, what string) {
	t.Helper()
	spec := l.onIPhone(screenshot)
	spec.MaxAttempts = 2
	id := l.submitSpec(t, spec)
	if j := l.ended(t, id, e2e.WaitTimeout); j.Status != jobstore.StatusSucceeded || j.Device != l.phone.UDID() {
		t.Fatalf("%s: job %s on %q (%s), want SUCCEEDED on the iPhone", what, j.Status, j.Device, j.FailReason)
	}
}

// TestIPhoneWDADropped: the iPhone's WebDriverAgent goes away. The
// coordinator lists the phone offline with the iPhone's fix (start
// WebDriverAgent, check wda_url and the port forwarder; not the Android
// phone's USB cable), `edgecoord agent show` says so and a job aimed at
// it waits with that fix. Once WDA is back the phone is ready and the job
// runs on it.
func TestIPhoneWDADropped(t *testing.T) {
	t.Parallel()
	l := newIPhoneLab(t, fakewda.Options{}, 0)
	udid := l.phone.UDID()

	l.phone.Drop()
	d := l.waitState(t, "the iPhone offline at the coordinator", protocol.DeviceOffline)
	for _, want := range []string{"not running", "ios runwda --udid " + udid, "iproxy 8100 8100 -u " + udid, "wda_url"} {
		if !strings.Contains(d.Reason, want) {
			t.Errorf("the offline iPhone's reason lacks %q: %q", want, d.Reason)
		}
	}
	show := edgecoord(t, l.edgecoord(), "agent", "show", "pc-bin")
	if !strings.Contains(show, udid+"  offline: ") || !strings.Contains(show, "ios runwda --udid "+udid) {
		t.Errorf("edgecoord agent show does not list the iPhone offline with its fix:\n%s", show)
	}

	id := l.submitSpec(t, l.onIPhone(screenshot))
	var why string
	testenv.Eventually(t, e2e.WaitTimeout, "the job waiting for the offline iPhone", func() bool {
		why = l.waiting(t, id)
		return strings.Contains(why, "is offline")
	})
	if !strings.Contains(why, "start WebDriverAgent on the iPhone") || strings.Contains(why, "USB cable") {
		t.Errorf("the job waits %q, want the iPhone's fix only", why)
	}

	if err := l.phone.Restore(); err != nil {
		t.Fatal(err)
	}
	l.waitState(t, "the iPhone ready again once WDA is back", protocol.DeviceReady)
	if j := l.ended(t, id, e2e.WaitTimeout); j.Status != jobstore.StatusSucceeded || j.Device != udid {
		t.Fatalf("the waiting job %s on %q (%s), want SUCCEEDED on the iPhone", j.Status, j.Device, j.FailReason)
	}
	l.agent.MustCleanShutdown(t)
}

// TestIPhoneWDAHangsDuringJob: the iPhone's WebDriverAgent stops answering
// while a job with a deadline waits for an element on it. The job ends at
// its deadline (cause deadline), not at WDA's much longer capture
// timeout; the recovery ladder then finds the idle iPhone not answering
// its probe and tries to reconnect it (a new WDA session), the coordinator
// listing it recovering or offline with a reason. The reconnect gives up
// after the agent's phones.op_timeout (6s here, not the default 20s), as
// its log line says. Once WDA answers again the phone is ready and takes
// the next job: nothing of the agent stayed stuck on it.
func TestIPhoneWDAHangsDuringJob(t *testing.T) {
	t.Parallel()
	// The op timeout is longer than the job's deadline: a call WDA holds
	// from the hang on (a UI dump asks the foreground app within the op
	// timeout) fails after the deadline at the earliest, so it is the
	// deadline that ends the job.
	const deadline, opTimeout = 5 * time.Second, 6 * time.Second
	l := newIPhoneLab(t, fakewda.Options{}, opTimeout)
	udid := l.phone.UDID()

	spec := l.onIPhone(screenshot, protocol.Step{Op: protocol.OpWaitFor, Element: &protocol.Selector{ID: "never-there"}, TimeoutMS: protocol.MaxWaitForMS})
	spec.Task.TimeoutMS = deadline.Milliseconds()
	id := l.submitSpec(t, spec)
	logEvents(t, l.lab, id)
	testenv.Eventually(t, e2e.WaitTimeout, "the job's screenshot taken on the iPhone", func() bool {
		for _, r := range l.phone.Requests() {
			if strings.HasSuffix(r, "/screenshot") {
				return true
			}
		}
		return false
	})
	l.phone.Hang(true)
	released := false
	defer func() {
		if !released {
			l.phone.Hang(false)
		}
	}()

	final := l.ended(t, id, e2e.WaitTimeout)
	var end *jobstore.WriteEvent
	for _, e := range l.allEvents(t, id) {
		if e.Accepted && (e.Verb == jobstore.VerbTimeout || e.Verb == jobstore.VerbFail) {
			end = &e
			break
		}
	}
	if final.Status != jobstore.StatusTimedOut || end == nil || end.Cause != protocol.CauseDeadline {
		t.Fatalf("job ended %s (%s), end event %+v: want TIMED_OUT with cause deadline", final.Status, final.FailReason, end)
	}

	d := l.waitState(t, "the hung iPhone held from jobs at the coordinator", protocol.DeviceRecovering, protocol.DeviceOffline)
	t.Logf("the hung iPhone at the coordinator: %s: %s", d.State, d.Reason)
	var reconnects []map[string]any
	testenv.Eventually(t, e2e.WaitTimeout, "the ladder's failed probe and reconnect of the iPhone", func() bool {
		reconnects = rungLines(l.agent, udid, protocol.RungReconnect)
		return scrapeMetric(t, l.agent.StatusAddr, "edgeagent_phone_recovery_total", `result="failed",rung="probe"`) >= 1 &&
			len(reconnects) > 0
	})
	// The reconnect of the hung WDA gave up after phones.op_timeout, not
	// after the default 20s.
	first := reconnects[0]
	if msg, _ := first["error"].(string); first["result"] != "failed" || !strings.Contains(msg, "not answering: no answer within "+opTimeout.String()) {
		t.Errorf("the reconnect of the hung iPhone: %v, want it failed with no answer within phones.op_timeout %v", first, opTimeout)
	}

	l.phone.Hang(false)
	released = true
	d = l.waitState(t, "the iPhone ready again once WDA answers", protocol.DeviceReady)
	if d.Recovery == nil || d.Recovery.ProbeFailures == 0 || d.Recovery.Reconnects == 0 {
		t.Errorf("the iPhone's recovery record at the coordinator: %+v, want probe failures and a reconnect", d.Recovery)
	}
	l.runsOnIPhone(t, "the next job once WDA answers again")
	l.agent.MustCleanShutdown(t)
}

// rungLines are the agent's log lines of the ladder's rung on serial.
func rungLines(p *e2e.Agent, serial, rung string) []map[string]any {
	var out []map[string]any
	for _, e := range p.Entries("phone recovery rung") {
		if e["serial"] == serial && e["rung"] == rung {
			out = append(out, e)
		}
	}
	return out
}

// TestIPhoneLockedWithPasscode: an iPhone with a passcode gets locked.
// WebDriverAgent cannot unlock it, so the coordinator lists it
// unauthorized with the iPhone's fix (unlock it, Auto-Lock Never; not the
// USB debugging prompt), and a job aimed at it waits with that fix. Once
// unlocked it is ready and the job runs on it.
func TestIPhoneLockedWithPasscode(t *testing.T) {
	t.Parallel()
	l := newIPhoneLab(t, fakewda.Options{Passcode: true}, 0)

	l.phone.SetLocked(true)
	d := l.waitState(t, "the locked iPhone unauthorized at the coordinator", protocol.DeviceUnauthorized)
	if !strings.Contains(d.Reason, "stays locked") || !strings.Contains(d.Reason, "Auto-Lock") {
		t.Errorf("the locked iPhone's reason: %q", d.Reason)
	}
	id := l.submitSpec(t, l.onIPhone(screenshot))
	var why string
	testenv.Eventually(t, e2e.WaitTimeout, "the job waiting for the locked iPhone", func() bool {
		why = l.waiting(t, id)
		return strings.Contains(why, "is unauthorized")
	})
	if !strings.Contains(why, "unlock it (it has a passcode") || strings.Contains(why, "USB debugging") {
		t.Errorf("the job waits %q, want the iPhone's unlock fix only", why)
	}

	l.phone.SetLocked(false)
	l.waitState(t, "the unlocked iPhone ready", protocol.DeviceReady)
	if j := l.ended(t, id, e2e.WaitTimeout); j.Status != jobstore.StatusSucceeded || j.Device != l.phone.UDID() {
		t.Fatalf("the waiting job %s on %q (%s), want SUCCEEDED on the iPhone", j.Status, j.Device, j.FailReason)
	}
	l.agent.MustCleanShutdown(t)
}
