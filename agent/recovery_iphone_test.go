package agent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakewda"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestRecoveryIPhone: an iPhone is on the ladder. Its probe before a job
// passes while WebDriverAgent answers; once WDA hangs the idle probes fail,
// rung 1 tries a new WDA session, rung 2 (reboot on) fails at once since
// an iPhone cannot be rebooted through WDA, and the third failed probe
// quarantines it. When WDA answers again a probe lifts the quarantine.
func TestRecoveryIPhone(t *testing.T) {
	phone, err := fakewda.Start(fakewda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { phone.Close() })
	inv := capture.NewInventory()
	// The watcher probes once at the start, then only after an hour:
	// here the ladder alone looks after the phone.
	stopIOS, err := capture.WatchIOS(context.Background(), inv, []capture.IOSPhone{{UDID: phone.UDID(), WDAURL: phone.URL()}},
		capture.IOSOptions{Interval: time.Hour, ProbeTimeout: 5 * time.Second, OpTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopIOS)
	testenv.Eventually(t, 20*time.Second, "the iPhone ready", func() bool {
		return deviceOf(inv, phone.UDID()).State == protocol.DeviceReady
	})
	reg := prometheus.NewRegistry()
	rec, err := NewRecovery(inv, config.Recovery{
		ProbeTimeout: config.Duration(300 * time.Millisecond), ProbeInterval: config.Duration(200 * time.Millisecond),
		Reboot: true, BootTimeout: config.Duration(30 * time.Second), QuarantineAfter: 3, Window: config.Duration(time.Hour),
	}, reg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := inv.Get(phone.UDID())
	if err := rec.BeforeJob(t.Context(), dev); err != nil {
		t.Fatalf("probe before a job of an iPhone whose WDA answers: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { rec.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	phone.Hang(true)
	testenv.Eventually(t, 60*time.Second, "the hung iPhone quarantined", func() bool {
		return deviceOf(inv, phone.UDID()).State == protocol.DeviceQuarantined
	})
	d := deviceOf(inv, phone.UDID())
	if r := d.Recovery; r == nil || r.Reconnects < 1 || r.Reboots != 0 || r.Quarantines != 1 {
		t.Errorf("recovery record %+v, want a reconnect, no reboot, one quarantine", r)
	}
	for _, c := range []struct {
		rung, result string
		min          float64
	}{{"probe", "failed", 3}, {"reconnect", "failed", 1}, {"reboot", "failed", 1}, {"quarantine", "entered", 1}} {
		if got := rungCount(t, reg, c.rung, c.result); got < c.min {
			t.Errorf("edgeagent_phone_recovery_total{%s,%s} = %v, want at least %v", c.rung, c.result, got, c.min)
		}
	}
	if got := rungCount(t, reg, "reboot", "ok"); got != 0 {
		t.Errorf("an iPhone's reboot counted ok %v times", got)
	}

	phone.Hang(false)
	testenv.Eventually(t, 30*time.Second, "the iPhone offered again once WDA answers", func() bool {
		return deviceOf(inv, phone.UDID()).State == protocol.DeviceReady
	})
	if got := rungCount(t, reg, "quarantine", "lifted"); got != 1 {
		t.Errorf("quarantine lifted %v times, want 1", got)
	}
	if last := deviceOf(inv, phone.UDID()).Recovery.Last; !strings.Contains(last, "probe ok") {
		t.Errorf("last rung %q", last)
	}
}
