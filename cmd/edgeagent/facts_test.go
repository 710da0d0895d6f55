package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestPhoneFactsAndRest: the facts of a fake phone
// behind the real adb server, read by the real edgeagent binary, appear in
// the real edgecoord's `agent show`; the phone made too hot is listed
// resting with the temperature and the limit, a job aimed at it waits
// (its wait reason names the rest) and is not granted while it is hot, and
// runs on it once it has cooled.
func TestPhoneFactsAndRest(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	adb := testenv.StartADB(t)
	phones := startPhones(t, adb, fakeadbd.Options{Width: 1080, Height: 2400, IME: true}, "[lab]")
	phone := phones[0]
	phone.SetBattery(76, 31)
	l := newLab(t, 3*time.Second)
	ec := l.env.NewCoordinator(e2e.CoordinatorOptions{ID: "facts-test", Extra: "agents:\n  offline_after: 10s\n"})
	p := l.env.StartAgent(e2e.AgentOptions{ADB: adb, Phones: devices(phones),
		Extra: "phones:\n  facts_interval: 1s\n  rest:\n    max_temp_c: 45\n    resume_temp_c: 40\n    min_battery: 15\n    resume_battery: 30\n"})
	statusAddr := p.StatusAddr
	serial := phone.Serial()

	var show string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last edgecoord agent show:\n%s", show)
		}
	})
	testenv.Eventually(t, 60*time.Second, "the phone's facts in edgecoord agent show", func() bool {
		show, _, _ = ec.CLI(t, "agent", "show", "pc-bin")
		// The fake phone's battery cools towards the room and charges
		// while idle: its level and temperature are checked below.
		return strings.Contains(show, serial+" facts: Android 13 (SDK 33), 1080x2400 420dpi, battery 7") &&
			strings.Contains(show, " °C charging good, screen on unlocked, 49152 MB free, IME com.android.adbkeyboard")
	})
	t.Logf("agent show:\n%s", show)
	// edgeagent status shows the same facts.
	if out, errOut, code := p.CLI(t, "status", "-addr", statusAddr); code != 0 ||
		!strings.Contains(out, serial+" facts: Android 13 (SDK 33), 1080x2400 420dpi, battery 7") {
		t.Errorf("edgeagent status: exit %d\n%s%s", code, out, errOut)
	}

	phone.SetBattery(76, 50)
	testenv.Eventually(t, 60*time.Second, "the hot phone resting in edgecoord agent show", func() bool {
		show = edgecoord(t, ec, "agent", "show", "pc-bin")
		return strings.Contains(show, serial+" resting: battery 4") && strings.Contains(show, " °C over the 45 °C limit (offered again at 40 °C)")
	})
	if out, errOut, code := p.CLI(t, "status", "-addr", statusAddr); code != 0 ||
		!strings.Contains(out, serial+" resting: battery 4") {
		t.Errorf("edgeagent status of the hot phone: exit %d\n%s%s", code, out, errOut)
	}
	if v := scrapeMetric(t, statusAddr, "edgeagent_phones_resting", ""); v != 1 {
		t.Errorf("edgeagent_phones_resting = %v with the hot phone resting, want 1", v)
	}
	if v := scrapeMetric(t, statusAddr, "edgeagent_phone_rest_events_total", `event="hot"`); v != 1 {
		t.Errorf(`edgeagent_phone_rest_events_total{event="hot"} = %v, want 1`, v)
	}
	jobID := l.submitSpec(t, jobstore.JobSpec{Task: protocol.Task{
		Device: protocol.DeviceSelector{Serial: serial},
		Steps:  []protocol.Step{screenshot},
	}})
	testenv.Eventually(t, 30*time.Second, "the job's wait reason naming the rest", func() bool {
		out := edgecoord(t, ec, "job", "show", jobID)
		return strings.Contains(out, "phone "+serial+" is resting (battery 4") && strings.Contains(out, "°C over the 45 °C limit")
	})
	// Cooler, but not yet at resume_temp_c: still resting.
	phone.SetBattery(76, 43)
	testenv.Eventually(t, 30*time.Second, "the phone at 43 °C, still resting", func() bool {
		var v struct {
			Devices []protocol.Device `json:"devices"`
		}
		if err := json.Unmarshal([]byte(edgecoord(t, ec, "agent", "show", "--json", "pc-bin")), &v); err != nil {
			t.Fatal(err)
		}
		for _, d := range v.Devices {
			if d.Serial == serial && d.Facts != nil && d.Facts.BatteryTempC != nil && *d.Facts.BatteryTempC <= 43 {
				if d.State != protocol.DeviceResting {
					t.Fatalf("phone at %.1f °C (over resume_temp_c): %+v", *d.Facts.BatteryTempC, d)
				}
				return true
			}
		}
		return false
	})
	if j, err := l.store.Get(l.ctx, jobID); err != nil || j.Status != jobstore.StatusQueued || j.Generation != 0 {
		t.Fatalf("job while the phone rests: %+v, %v; want QUEUED, never granted", j, err)
	}
	phone.SetBattery(76, 35)
	final := l.ended(t, jobID, 60*time.Second)
	if final.Status != jobstore.StatusSucceeded || final.Device != serial {
		t.Fatalf("job after the phone cooled: %s on %q (%s)", final.Status, final.Device, final.FailReason)
	}
	show = edgecoord(t, ec, "agent", "show", "pc-bin")
	if strings.Contains(show, "resting") {
		t.Errorf("phone still resting after it cooled:\n%s", show)
	}
	if v := scrapeMetric(t, statusAddr, "edgeagent_phones_resting", ""); v != 0 {
		t.Errorf("edgeagent_phones_resting = %v after the phone cooled, want 0", v)
	}
	if v := scrapeMetric(t, statusAddr, "edgeagent_phone_rest_events_total", `event="cooled"`); v != 1 {
		t.Errorf(`edgeagent_phone_rest_events_total{event="cooled"} = %v, want 1`, v)
	}
	var rest bool
	for _, e := range p.Entries("phone resting: not offered jobs until it recovers") {
		rest = rest || e["serial"] == serial
	}
	if !rest {
		t.Error(`no "phone resting" log line`)
	}
	p.MustCleanShutdown(t)
}
