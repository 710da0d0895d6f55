package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestPhoneWatchRests: a phone's facts are read at once and listed; a
// phone too hot rests (with the number and the limit in its reason), no
// selector matches it, it stays resting until it has cooled to the resume
// temperature, and the same for a low battery; each charge policy event
// runs the charge hook, a real script, whose output is logged as a short
// tail only.
func TestPhoneWatchRests(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "events")
	hook := filepath.Join(dir, "plug")
	script := "#!/bin/sh\necho \"$1 $2\" >> " + events + "\ni=0; while [ $i -lt 50 ]; do printf 'noise-%03d ' $i; i=$((i+1)); done\necho END-OF-HOOK\n"
	if err := os.WriteFile(hook, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	inv := capture.NewInventory()
	sim := capture.NewSimulated(capture.SimOptions{Serial: "sim-7"})
	if err := inv.Add(sim); err != nil {
		t.Fatal(err)
	}
	var logs testenv.LockedBuffer
	cfg := config.Phones{FactsInterval: config.Duration(20 * time.Millisecond), Rest: config.Rest{
		MaxTempC: 45, ResumeTempC: 40, MinBattery: 15, ResumeBattery: 30, ChargedBattery: 90,
		ChargeHook: []string{hook, "{serial}", "{event}"}, ChargeHookTimeout: config.Duration(10 * time.Second),
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		NewPhoneWatch(inv, cfg, zerolog.New(&logs)).Run(ctx)
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })

	dev := func() protocol.Device { return inv.Devices()[0] }
	// waitTemp waits until the listed facts show the battery at temp.
	waitFacts := func(level int, temp float64) protocol.Device {
		t.Helper()
		var d protocol.Device
		testenv.Eventually(t, 10*time.Second, "facts read", func() bool {
			d = dev()
			f := d.Facts
			return f != nil && f.BatteryLevel != nil && *f.BatteryLevel == level && f.BatteryTempC != nil && *f.BatteryTempC > temp-0.5 && *f.BatteryTempC <= temp
		})
		return d
	}
	sim.SetBattery(60, 30)
	if d := waitFacts(60, 30); d.State != protocol.DeviceReady || d.Facts.SDK == 0 || d.Facts.ScreenWidth != 720 {
		t.Fatalf("phone: %+v facts %s", d, d.Facts.Summary())
	}
	sim.SetBattery(60, 50)
	d := waitFacts(60, 50)
	if d.State != protocol.DeviceResting || !strings.Contains(d.Reason, "battery 50.0 °C over the 45 °C limit") {
		t.Fatalf("hot phone: %+v", d)
	}
	if _, _, err := inv.AcquireMatching(ctx, protocol.DeviceSelector{}); !errors.Is(err, capture.ErrNoDevice) {
		t.Fatalf("a resting phone was acquired: %v", err)
	}
	// Cooler but not yet at the resume temperature: still resting.
	sim.SetBattery(60, 42)
	if d := waitFacts(60, 42); d.State != protocol.DeviceResting {
		t.Fatalf("phone at 42 °C: %+v", d)
	}
	sim.SetBattery(60, 39)
	if d := waitFacts(60, 39); d.State != protocol.DeviceReady || d.Reason != "" {
		t.Fatalf("cooled phone: %+v", d)
	}
	sim.SetBattery(10, 30)
	if d := waitFacts(10, 30); d.State != protocol.DeviceResting || !strings.Contains(d.Reason, "battery 10% under the 15% limit (offered again at 30%)") {
		t.Fatalf("flat phone: %+v", d)
	}
	sim.SetBattery(20, 30)
	if d := waitFacts(20, 30); d.State != protocol.DeviceResting {
		t.Fatalf("phone at 20%%: %+v", d)
	}
	sim.SetBattery(95, 30)
	if d := waitFacts(95, 30); d.State != protocol.DeviceReady {
		t.Fatalf("charged phone: %+v", d)
	}
	want := "sim-7 hot\nsim-7 cooled\nsim-7 low_battery\nsim-7 charged\n"
	testenv.Eventually(t, 10*time.Second, "charge hook events", func() bool {
		b, _ := os.ReadFile(events)
		return string(b) == want
	})
	testenv.Eventually(t, 10*time.Second, "hook logged", func() bool { return strings.Count(logs.String(), "charge hook ran") == 4 })
	if l := logs.String(); !strings.Contains(l, "END-OF-HOOK") || strings.Contains(l, "noise-000") || !strings.Contains(l, "phone resting") {
		t.Errorf("log lacks the hook's tail or holds more than it:\n%s", l)
	}
}

// TestPhoneWatchHookTimeout: a hook that does not finish is killed after
// charge_hook_timeout, and the log says so.
func TestPhoneWatchHookTimeout(t *testing.T) {
	dir := t.TempDir()
	hook := filepath.Join(dir, "slow")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho started\nexec sleep 60\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	inv := capture.NewInventory()
	sim := capture.NewSimulated(capture.SimOptions{})
	sim.SetBattery(5, 30)
	if err := inv.Add(sim); err != nil {
		t.Fatal(err)
	}
	var logs testenv.LockedBuffer
	cfg := config.Phones{FactsInterval: config.Duration(time.Hour), Rest: config.Rest{
		MinBattery: 15, ResumeBattery: 30, ChargeHook: []string{hook}, ChargeHookTimeout: config.Duration(300 * time.Millisecond),
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		NewPhoneWatch(inv, cfg, zerolog.New(&logs)).Run(ctx)
		close(done)
	}()
	defer func() { cancel(); <-done }()
	testenv.Eventually(t, 20*time.Second, "timeout logged", func() bool {
		return strings.Contains(logs.String(), "charge hook timed out after 300ms (phones.rest.charge_hook_timeout)")
	})
	if !strings.Contains(logs.String(), `"output_tail":"started"`) {
		t.Errorf("log: %s", logs.String())
	}
}

// TestRestingPhoneNoDevice: a job aimed at a resting phone on the agent's
// own selection fails with the rest's reason.
func TestRestingPhoneNoDevice(t *testing.T) {
	inv := capture.NewInventory()
	if err := inv.Add(capture.NewSimulated(capture.SimOptions{Serial: "sim-9"})); err != nil {
		t.Fatal(err)
	}
	inv.SetResting("sim-9", "battery 47.5 °C over the 45 °C limit (offered again at 40 °C)")
	_, _, err := inv.AcquireMatching(t.Context(), protocol.DeviceSelector{Serial: "sim-9"})
	want := "phone sim-9 is resting: it is offered jobs again once it has cooled down or charged (see its reason) (battery 47.5 °C over the 45 °C limit (offered again at 40 °C))"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("acquire a resting phone: %v\nwant %q", err, want)
	}
	inv.SetResting("sim-9", "")
	_, release, err := inv.AcquireMatching(t.Context(), protocol.DeviceSelector{Serial: "sim-9"})
	if err != nil {
		t.Fatal(err)
	}
	release()
}
