package agent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// recoveryEnv is a fake phone behind the real adb server, the inventory
// following that server, and the ladder over it.
func recoveryEnv(t *testing.T, opts config.Recovery) (*fakeadbd.Phone, *capture.Inventory, *Recovery, *prometheus.Registry) {
	t.Helper()
	adb := testenv.StartADB(t)
	phone, err := fakeadbd.Start(fakeadbd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { phone.Close() })
	adb.Connect(t, phone.Addr(), "device")
	inv, stop, err := capture.NewADBInventory(context.Background(), capture.ADBOptions{Address: adb.Addr, ADBPath: adb.Path, NoStart: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	reg := prometheus.NewRegistry()
	rec, err := NewRecovery(inv, opts, reg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { rec.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	testenv.Eventually(t, 20*time.Second, "the phone ready", func() bool {
		ds := inv.Devices()
		return len(ds) == 1 && ds[0].State == protocol.DeviceReady
	})
	return phone, inv, rec, reg
}

// rungCount returns edgeagent_phone_recovery_total{rung,result} in reg.
func rungCount(t *testing.T, reg *prometheus.Registry, rung, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "edgeagent_phone_recovery_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["rung"] == rung && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

func deviceOf(inv *capture.Inventory, serial string) protocol.Device {
	for _, d := range inv.Devices() {
		if d.Serial == serial {
			return d
		}
	}
	return protocol.Device{}
}

// TestRecoveryRebootRung: with reboot on, a phone that a reconnect does
// not cure is rebooted (rung 2), comes back answering and is offered
// again, never quarantined; its recovery record counts each rung.
func TestRecoveryRebootRung(t *testing.T) {
	phone, inv, _, reg := recoveryEnv(t, config.Recovery{
		ProbeTimeout: config.Duration(300 * time.Millisecond), ProbeInterval: config.Duration(time.Second),
		Reboot: true, BootTimeout: config.Duration(30 * time.Second), QuarantineAfter: 5, Window: config.Duration(time.Hour),
	})
	phone.Hang()
	testenv.Eventually(t, 60*time.Second, "the rebooted phone ready again", func() bool {
		d := deviceOf(inv, phone.Serial())
		return phone.Reboots() == 1 && d.State == protocol.DeviceReady && d.Recovery != nil && d.Recovery.Reboots == 1
	})
	d := deviceOf(inv, phone.Serial())
	if r := d.Recovery; r.ProbeFailures != 2 || r.Reconnects != 1 || r.Quarantines != 0 || r.Last != "answers again after reboot" {
		t.Errorf("recovery record %+v, want 2 failed probes, 1 reconnect, 1 reboot, answering after the reboot", *r)
	}
	for _, c := range []struct {
		rung, result string
		want         float64
	}{{"probe", "failed", 2}, {"reconnect", "ok", 1}, {"reboot", "ok", 1}, {"quarantine", "entered", 0}} {
		if got := rungCount(t, reg, c.rung, c.result); got != c.want {
			t.Errorf("edgeagent_phone_recovery_total{%s,%s} = %v, want %v", c.rung, c.result, got, c.want)
		}
	}
}

// TestRecoveryReconnectCures: a phone a reconnect cures answers again
// after rung 1 and is not rebooted even with reboot on; a probe before a
// job of a healthy phone passes.
func TestRecoveryReconnectCures(t *testing.T) {
	// The probe of the healthy phone must answer within the timeout on a
	// loaded machine too; the hung phone's probe waits it out either way.
	phone, inv, rec, reg := recoveryEnv(t, config.Recovery{
		ProbeTimeout: config.Duration(2 * time.Second), ProbeInterval: 0,
		Reboot: true, BootTimeout: config.Duration(30 * time.Second), QuarantineAfter: 3, Window: config.Duration(time.Hour),
	})
	dev, ok := inv.Get(phone.Serial())
	if !ok {
		t.Fatal("phone not in the inventory")
	}
	if err := rec.BeforeJob(t.Context(), dev); err != nil {
		t.Fatalf("probe of a healthy phone: %v", err)
	}
	phone.HangUntilReconnect()
	err := rec.BeforeJob(t.Context(), dev)
	if !errors.Is(err, capture.ErrNotAnswering) {
		t.Fatalf("probe of a hung phone: %v, want ErrNotAnswering", err)
	}
	if class, cause := classify(err); class != protocol.FailClassInfrastructure || cause != protocol.CausePhoneUnplugged {
		t.Errorf("classified %s/%s, want infrastructure/phone_unplugged", class, cause)
	}
	if st := deviceOf(inv, phone.Serial()).State; st != protocol.DeviceRecovering {
		t.Errorf("state %q right after the failed probe, want recovering", st)
	}
	testenv.Eventually(t, 30*time.Second, "the reconnected phone ready again", func() bool {
		d := deviceOf(inv, phone.Serial())
		return d.State == protocol.DeviceReady && d.Recovery != nil && d.Recovery.Last == "answers again after reconnect"
	})
	if phone.Reboots() != 0 {
		t.Errorf("phone rebooted %d times, want 0", phone.Reboots())
	}
	if got := rungCount(t, reg, "reconnect", "ok"); got != 1 {
		t.Errorf("reconnects %v, want 1", got)
	}
}

// TestHubWindowUnit: two phones leaving the inventory within the hub
// window are one hub event; one phone leaving is none; phones leaving with
// the adb server (ServerLost) are none.
func TestHubWindowUnit(t *testing.T) {
	inv := capture.NewInventory()
	for _, s := range []string{"A", "B", "C", "D"} {
		if err := inv.Add(capture.NewSimulated(capture.SimOptions{Serial: s})); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	rec, err := NewRecovery(inv, config.DefaultAgent().Phones.Recovery, reg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	hubs := make(chan []string, 4)
	rec.notify(func() {}, func(s []string) { hubs <- s })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { rec.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	// Run has looked once it sees a change; wait for its first look.
	testenv.Eventually(t, 10*time.Second, "the first look", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.last) == 4
	})
	inv.Remove("A")
	inv.Remove("B")
	select {
	case s := <-hubs:
		if len(s) != 2 || s[0] != "A" || s[1] != "B" {
			t.Errorf("hub event %v, want [A B]", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no hub event for two phones dropping together")
	}
	rec.ServerLost()
	inv.Remove("C")
	inv.Remove("D")
	testenv.Eventually(t, 10*time.Second, "the drops seen", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.last) == 0
	})
	rec.mu.Lock()
	pending := len(rec.drops)
	rec.mu.Unlock()
	if pending != 0 {
		t.Errorf("%d drops counted towards a hub event after the adb server was lost", pending)
	}
	select {
	case s := <-hubs:
		t.Errorf("hub event %v for phones that dropped with the adb server", s)
	default:
	}
}
