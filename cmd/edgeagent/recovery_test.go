package main

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// scrapeMetric returns the value of the sample of name with labels (as
// written in /metrics, e.g. `result="failed",rung="probe"`, labels in name order; "" for none)
// on the agent's status endpoint, -1 when it is not served.
func scrapeMetric(t *testing.T, statusAddr, name, labels string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + statusAddr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	want := name
	if labels != "" {
		want += "{" + labels + "}"
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, want+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// TestHungPhoneRecoveryLadder: of two phones
// behind the real adb server matching a job's selector, the one the
// coordinator grants first stops answering while adb still lists it as
// "device". The agent's probe before the job finds it, the job's attempt
// on it ends infrastructure/phone_unplugged and the job runs on the other
// phone; the ladder reconnects the hung phone (rung 1), probes it again and
// quarantines it after three failed probes. /metrics, the log and
// `edgecoord agent show` show each rung; the quarantined phone gets no job
// and is offered again once it answers.
func TestHungPhoneRecoveryLadder(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	adb := testenv.StartADB(t)
	phones := startPhones(t, adb, fakeadbd.Options{}, "[lab, pair]", "[lab, pair]")
	// The coordinator grants free phones in serial order: the first is
	// the one the job is aimed at.
	hung, other := phones[0], phones[1]
	if other.Serial() < hung.Serial() {
		hung, other = other, hung
	}
	l := newLabWith(t, 3*time.Second, func(o *coordinator.Options, _ testenv.MinIOServer) {
		o.Retry = jobstore.RetryPolicy{Backoff: 200 * time.Millisecond, BackoffMax: 500 * time.Millisecond}
	})
	// probe_interval 0: probes before jobs only, so it is the job's probe
	// that finds the hung phone; the ladder then probes it on its own.
	p := l.env.StartAgent(e2e.AgentOptions{ADB: adb, Phones: devices(phones), Extra: `phones:
  recovery:
    probe_timeout: 500ms
    probe_interval: 0s
    quarantine_after: 3
    window: 10m
`})
	statusAddr := p.StatusAddr
	ready := func(serial string) bool {
		a, err := l.store.GetAgent(l.ctx, "pc-bin")
		if err != nil {
			return false
		}
		for _, d := range a.Devices {
			if d.Serial == serial {
				return d.Ready()
			}
		}
		return false
	}
	testenv.Eventually(t, 30*time.Second, "both phones ready at the coordinator", func() bool {
		return ready(hung.Serial()) && ready(other.Serial())
	})

	hung.Hang()
	jobID := l.submitSpec(t, jobstore.JobSpec{MaxAttempts: 4, Task: protocol.Task{
		Device: protocol.DeviceSelector{Tags: []string{"pair"}},
		Steps:  []protocol.Step{screenshot},
	}})
	logEvents(t, l, jobID)
	final := l.ended(t, jobID, 60*time.Second)
	if final.Status != jobstore.StatusSucceeded || final.Device != other.Serial() {
		t.Fatalf("job %s on %s (%s), want SUCCEEDED on %s", final.Status, final.Device, final.FailReason, other.Serial())
	}
	if len(final.AttemptEnds) == 0 {
		t.Fatalf("no attempt ended before the success: the job was not aimed at the hung phone %s", hung.Serial())
	}
	first := final.AttemptEnds[0]
	if first.Class != protocol.FailClassInfrastructure || first.Cause != protocol.CausePhoneUnplugged || !strings.Contains(first.Reason, "did not answer the probe") {
		t.Errorf("first attempt end %+v, want infrastructure/phone_unplugged saying the phone did not answer the probe", first)
	}
	if hung.Swallowed() == 0 {
		t.Error("the hung phone was never probed")
	}

	// The ladder: rung 1 reconnected the phone, the probes went on
	// failing, and the third failure quarantined it.
	var seen protocol.Device
	defer func() {
		if t.Failed() {
			t.Logf("the hung phone at the coordinator, last seen: %+v", seen)
		}
	}()
	testenv.Eventually(t, 60*time.Second, "the hung phone quarantined at the coordinator", func() bool {
		a, err := l.store.GetAgent(l.ctx, "pc-bin")
		if err != nil {
			return false
		}
		for _, d := range a.Devices {
			if d.Serial == hung.Serial() {
				seen = d
				return d.State == protocol.DeviceQuarantined
			}
		}
		return false
	})
	if hung.Connects() < 2 {
		t.Errorf("the hung phone was connected %d times, want a reconnect", hung.Connects())
	}
	for _, m := range []struct {
		labels string
		min    float64
	}{
		{`result="failed",rung="probe"`, 3},
		{`result="ok",rung="reconnect"`, 1},
		{`result="entered",rung="quarantine"`, 1},
	} {
		if v := scrapeMetric(t, statusAddr, "edgeagent_phone_recovery_total", m.labels); v < m.min {
			t.Errorf("edgeagent_phone_recovery_total{%s} = %v, want at least %v", m.labels, v, m.min)
		}
	}
	if v := scrapeMetric(t, statusAddr, "edgeagent_phones_quarantined", ""); v != 1 {
		t.Errorf("edgeagent_phones_quarantined = %v, want 1", v)
	}
	for _, msg := range []string{"phone did not answer the probe", "phone recovery rung", "phone quarantined: not offered jobs until it answers a probe again"} {
		found := false
		for _, e := range p.Entries(msg) {
			found = found || e["serial"] == hung.Serial()
		}
		if !found {
			t.Errorf("no %q log line for %s", msg, hung.Serial())
		}
	}
	show := edgecoord(t, l.edgecoord(), "agent", "show", "pc-bin")
	t.Logf("edgecoord agent show:\n%s", show)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(regexp.QuoteMeta(hung.Serial()) + `  quarantined: [3-9] failed probes within 10m0s \(quarantine_after 3\)`),
		regexp.MustCompile(`probe failures [3-9], reconnects [1-9], reboots 0, quarantines 1, hub drops 0`),
	} {
		if !want.MatchString(show) {
			t.Errorf("edgecoord agent show does not match %s", want)
		}
	}

	// A quarantined phone gets no job: the next one runs on the other.
	next := l.submitSpec(t, jobstore.JobSpec{MaxAttempts: 1, Task: protocol.Task{
		Device: protocol.DeviceSelector{Tags: []string{"pair"}}, Steps: []protocol.Step{screenshot},
	}})
	if j := l.ended(t, next, 60*time.Second); j.Status != jobstore.StatusSucceeded || j.Device != other.Serial() {
		t.Fatalf("next job %s on %s (%s), want SUCCEEDED on %s", j.Status, j.Device, j.FailReason, other.Serial())
	}

	// Replugged and answering, it is offered jobs again.
	hung.Recover()
	if out, err := adb.Run("disconnect", hung.Serial()); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	adb.Connect(t, hung.Addr(), "device")
	testenv.Eventually(t, 30*time.Second, "the replugged phone ready again at the coordinator", func() bool { return ready(hung.Serial()) })
	if v := scrapeMetric(t, statusAddr, "edgeagent_phone_recovery_total", `result="lifted",rung="quarantine"`); v != 1 {
		t.Errorf("edgeagent_phone_recovery_total{quarantine,lifted} = %v, want 1", v)
	}
	p.MustCleanShutdown(t)
}

// TestHubDropOneEvent: three phones behind the real adb server drop at
// once (a USB hub losing power): the agent reports one hub event, as one
// log line, one count of edgeagent_hub_drops_total, an entry in its last
// errors and, once the phones are back, a hub drop in each phone's
// recovery record at the coordinator (`edgecoord agent show`). A single
// flapping phone before it is no hub event.
func TestHubDropOneEvent(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	adb := testenv.StartADB(t)
	phones := startPhones(t, adb, fakeadbd.Options{}, "[hub]", "[hub]", "[hub]", "[loose]")
	l := newLab(t, 3*time.Second)
	p := l.env.StartAgent(e2e.AgentOptions{ADB: adb, Phones: devices(phones)})
	statusAddr := p.StatusAddr
	readyAll := func() bool {
		a, err := l.store.GetAgent(l.ctx, "pc-bin")
		return err == nil && len(protocol.ReadyDevices(a.Devices)) == len(phones)
	}
	testenv.Eventually(t, 30*time.Second, "every phone ready at the coordinator", readyAll)

	// A phone on a loose cable: offline and back, twice.
	loose := phones[3]
	loose.Flap(l.ctx, 2, 3*time.Second)
	adb.WaitState(t, loose.Serial(), "device")
	testenv.Eventually(t, 30*time.Second, "every phone ready after the flapping", readyAll)
	if v := scrapeMetric(t, statusAddr, "edgeagent_hub_drops_total", ""); v != 0 {
		t.Fatalf("edgeagent_hub_drops_total = %v after one phone flapped, want 0", v)
	}

	hub := []*fakeadbd.Phone{phones[0].Phone, phones[1].Phone, phones[2].Phone}
	fakeadbd.HubDrop(hub...)
	const msg = "hub drop: several phones dropped at once (USB hub or its power?)"
	testenv.Eventually(t, 30*time.Second, "a hub drop log line", func() bool { return len(p.Entries(msg)) > 0 })
	for _, ph := range hub {
		ph.Replug()
	}
	testenv.Eventually(t, 60*time.Second, "every phone ready after the hub is back", readyAll)
	if e := p.Entries(msg); len(e) != 1 || e[0]["phones"] != float64(3) {
		t.Errorf("hub drop log lines %v, want one naming 3 phones", e)
	}
	if v := scrapeMetric(t, statusAddr, "edgeagent_hub_drops_total", ""); v != 1 {
		t.Errorf("edgeagent_hub_drops_total = %v, want 1", v)
	}
	testenv.Eventually(t, 30*time.Second, "each hub phone's hub drop at the coordinator", func() bool {
		a, err := l.store.GetAgent(l.ctx, "pc-bin")
		if err != nil {
			return false
		}
		n := 0
		for _, d := range a.Devices {
			if d.Recovery != nil && d.Recovery.HubDrops == 1 {
				n++
			}
		}
		return n == 3
	})
	show := edgecoord(t, l.edgecoord(), "agent", "show", "pc-bin")
	if c := strings.Count(show, "hub drops 1"); c != 3 {
		t.Errorf("edgecoord agent show names %d phones with hub drops 1, want 3:\n%s", c, show)
	}
	if !strings.Contains(show, "last: hub drop: 3 phones dropped within 1s") {
		t.Errorf("edgecoord agent show does not name the hub drop:\n%s", show)
	}
	status := edgecoord(t, l.edgecoord(), "agent", "status", "pc-bin")
	if !strings.Contains(status, "hub drop: 3 phones dropped within 1s") {
		t.Errorf("edgecoord agent status does not list the hub drop among the last errors:\n%s", status)
	}
	p.MustCleanShutdown(t)
}
