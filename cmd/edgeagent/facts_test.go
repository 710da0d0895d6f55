package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// edgecoordCLI runs the real edgecoord binary's management commands on the
// lab's store.
type edgecoordCLI struct {
	bin, config string
}

func newEdgecoordCLI(t *testing.T, l *lab) edgecoordCLI {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "coordinator.yaml")
	text := fmt.Sprintf("coordinator_id: facts-test\nnats:\n  url: %s\nstore:\n  driver: postgres\n  dsn: %s\nagents:\n  offline_after: 10s\n", l.ns.ClientURL(), l.dsn)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return edgecoordCLI{bin: testenv.Binary(t, "edgecoord"), config: cfg}
}

func (c edgecoordCLI) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := c.try(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// try runs the command and returns its output, or an error with what it
// printed when it fails.
func (c edgecoordCLI) try(t *testing.T, args ...string) (string, error) {
	cmd := exec.CommandContext(t.Context(), c.bin, append(args, "-c", c.config)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("edgecoord %v: %w\n%s%s", args, err, out.String(), errOut.String())
	}
	return out.String(), nil
}

// TestPhoneFactsAndRest (issue 20, must show 1): the facts of a fake phone
// behind the real adb server, read by the real edgeagent binary, appear in
// the real edgecoord's `agent show`; the phone made too hot is listed
// resting with the temperature and the limit, a job aimed at it waits
// (its wait reason names the rest) and is not granted while it is hot, and
// runs on it once it has cooled.
func TestPhoneFactsAndRest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	adb := testenv.StartADB(t)
	phones := startPhones(t, adb, fakeadbd.Options{Width: 1080, Height: 2400, IME: true}, "[lab]")
	phone := phones[0]
	phone.SetBattery(76, 31)
	bin := buildAgent(t)
	l := newLab(t, 3*time.Second)
	ec := newEdgecoordCLI(t, l)
	cfg, statusAddr := l.agentConfig(t.TempDir(), 5*time.Second, adbDevices(adb, phones)+
		"phones:\n  facts_interval: 1s\n  rest:\n    max_temp_c: 45\n    resume_temp_c: 40\n    min_battery: 15\n    resume_battery: 30\n")
	p := startAgentBinary(t, bin, "run", "-c", cfg)
	serial := phone.Serial()

	var show string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last edgecoord agent show:\n%s", show)
		}
	})
	testenv.Eventually(t, 60*time.Second, "the phone's facts in edgecoord agent show", func() bool {
		show, _ = ec.try(t, "agent", "show", "pc-bin")
		// The fake phone's battery cools towards the room and charges
		// while idle: its level and temperature are checked below.
		return strings.Contains(show, serial+" facts: Android 13 (SDK 33), 1080x2400 420dpi, battery 7") &&
			strings.Contains(show, " °C charging good, screen on unlocked, 49152 MB free, IME com.android.adbkeyboard")
	})
	t.Logf("agent show:\n%s", show)
	// edgeagent status shows the same facts.
	if out, err := exec.CommandContext(t.Context(), bin, "status", "-addr", statusAddr).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), serial+" facts: Android 13 (SDK 33), 1080x2400 420dpi, battery 7") {
		t.Errorf("edgeagent status: %v\n%s", err, out)
	}

	phone.SetBattery(76, 50)
	testenv.Eventually(t, 60*time.Second, "the hot phone resting in edgecoord agent show", func() bool {
		show = ec.run(t, "agent", "show", "pc-bin")
		return strings.Contains(show, serial+" resting: battery 4") && strings.Contains(show, " °C over the 45 °C limit (offered again at 40 °C)")
	})
	if out, err := exec.CommandContext(t.Context(), bin, "status", "-addr", statusAddr).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), serial+" resting: battery 4") {
		t.Errorf("edgeagent status of the hot phone: %v\n%s", err, out)
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
		out := ec.run(t, "job", "show", jobID)
		return strings.Contains(out, "phone "+serial+" is resting (battery 4") && strings.Contains(out, "°C over the 45 °C limit")
	})
	// Cooler, but not yet at resume_temp_c: still resting.
	phone.SetBattery(76, 43)
	testenv.Eventually(t, 30*time.Second, "the phone at 43 °C, still resting", func() bool {
		var v struct {
			Devices []protocol.Device `json:"devices"`
		}
		if err := json.Unmarshal([]byte(ec.run(t, "agent", "show", "--json", "pc-bin")), &v); err != nil {
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
	show = ec.run(t, "agent", "show", "pc-bin")
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
	for _, e := range p.logEntries("phone resting: not offered jobs until it recovers") {
		rest = rest || e["serial"] == serial
	}
	if !rest {
		t.Error(`no "phone resting" log line`)
	}
	p.signal(t)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Errorf("edgeagent exited %d", code)
	}
}
