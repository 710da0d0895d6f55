package capture_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakewda"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// fastIOS probes often, so that tests see state changes soon.
var fastIOS = capture.IOSOptions{Interval: 20 * time.Millisecond, ProbeTimeout: 2 * time.Second, BackoffMax: 100 * time.Millisecond}

func startFake(t *testing.T, o fakewda.Options) *fakewda.Phone {
	t.Helper()
	p, err := fakewda.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// The watch lists configured iPhones in the inventory with the state their
// WebDriverAgent tells, and follows them as WDA goes, hangs and comes
// back.
func TestWatchIOS(t *testing.T) {
	up := startFake(t, fakewda.Options{UDID: "00008110-00000000000000A1"})
	locked := startFake(t, fakewda.Options{UDID: "00008110-00000000000000B2", Passcode: true})
	locked.SetLocked(true)
	gone := startFake(t, fakewda.Options{UDID: "00008110-00000000000000C3"})
	gone.Drop()

	inv := capture.NewInventory()
	stop, err := capture.WatchIOS(context.Background(), inv, []capture.IOSPhone{
		{UDID: up.UDID(), WDAURL: up.URL(), Tags: []string{"jp"}},
		{UDID: locked.UDID(), WDAURL: locked.URL()},
		{UDID: gone.UDID(), WDAURL: gone.URL()},
	}, fastIOS)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	d := waitState(t, inv, up.UDID(), protocol.DeviceReady)
	if d.Platform != protocol.PlatformIOS || d.Model != fakewda.DefaultModel || len(d.Tags) != 1 {
		t.Fatalf("listed iPhone: %+v", d)
	}
	d = waitState(t, inv, locked.UDID(), protocol.DeviceUnauthorized)
	if !strings.Contains(d.Reason, "Auto-Lock") {
		t.Fatalf("locked iPhone's reason: %q", d.Reason)
	}
	d = waitState(t, inv, gone.UDID(), protocol.DeviceOffline)
	if !strings.Contains(d.Reason, "iproxy 8100 8100 -u "+gone.UDID()) || !strings.Contains(d.Reason, "not running") {
		t.Fatalf("offline iPhone's reason: %q", d.Reason)
	}

	// A job for iPhones gets the usable one; one aimed at the offline one
	// says why it cannot run, with the fix.
	ctx := context.Background()
	dev, release, err := inv.AcquireMatching(ctx, protocol.DeviceSelector{Platform: protocol.PlatformIOS})
	if err != nil || dev.Serial() != up.UDID() {
		t.Fatalf("acquire an iPhone: %v %v", dev, err)
	}
	release()
	_, _, err = inv.AcquireMatching(ctx, protocol.DeviceSelector{Serial: gone.UDID()})
	if !errors.Is(err, capture.ErrNoDevice) || !errors.Is(err, capture.ErrUnplugged) || !strings.Contains(err.Error(), "ios runwda") {
		t.Fatalf("acquire the offline iPhone: %v", err)
	}
	_, _, err = inv.AcquireMatching(ctx, protocol.DeviceSelector{Serial: locked.UDID()})
	if !errors.Is(err, capture.ErrUnauthorized) || !strings.Contains(err.Error(), "passcode") {
		t.Fatalf("acquire the locked iPhone: %v", err)
	}

	// WDA goes: offline with the fix; back: usable, in a new session.
	first := up.SessionID()
	if first == "" {
		t.Fatal("the usable iPhone has no WDA session")
	}
	up.Drop()
	waitState(t, inv, up.UDID(), protocol.DeviceOffline)
	if err := up.Restore(); err != nil {
		t.Fatal(err)
	}
	waitState(t, inv, up.UDID(), protocol.DeviceReady)
	if s := up.SessionID(); s == "" || s == first {
		t.Fatalf("after WDA came back the session is %q (was %q), want a new one", s, first)
	}
	dev, _ = inv.Get(up.UDID())
	if err := dev.Tap(ctx, 100, 100); err != nil {
		t.Fatalf("tap once WDA is back: %v", err)
	}

	// WDA hangs: offline once a probe gets no answer in time, usable again
	// once it answers.
	up.Hang(true)
	waitState(t, inv, up.UDID(), protocol.DeviceOffline)
	up.Hang(false)
	waitState(t, inv, up.UDID(), protocol.DeviceReady)

	// Locked without a passcode (Auto-Lock): the watch unlocks it.
	up.SetLocked(true)
	testenv.Eventually(t, 20*time.Second, "the watch to unlock the iPhone", func() bool { return !up.Locked() })
	waitState(t, inv, up.UDID(), protocol.DeviceReady)

	// Unlocked by hand: usable.
	locked.SetLocked(false)
	waitState(t, inv, locked.UDID(), protocol.DeviceReady)
	// WDA back for the phone that was gone.
	if err := gone.Restore(); err != nil {
		t.Fatal(err)
	}
	waitState(t, inv, gone.UDID(), protocol.DeviceReady)

	stop()
	if s := up.SessionID(); s != "" {
		t.Fatalf("stop left WDA session %q", s)
	}
	if len(inv.Devices()) != 3 {
		t.Fatalf("stop removed phones: %+v", inv.Devices())
	}
}

// An operation that finds WDA gone makes the phone offline at once: the
// inventory hears of it before the next probe.
func TestWatchIOSOperationFindsWDAGone(t *testing.T) {
	p := startFake(t, fakewda.Options{})
	inv := capture.NewInventory()
	slow := fastIOS
	slow.Interval = time.Hour
	stop, err := capture.WatchIOS(context.Background(), inv, []capture.IOSPhone{{UDID: p.UDID(), WDAURL: p.URL()}}, slow)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	waitState(t, inv, p.UDID(), protocol.DeviceReady)
	dev, _ := inv.Get(p.UDID())
	changed := inv.Changed()
	p.Drop()
	if _, err := dev.Screenshot(context.Background()); !errors.Is(err, capture.ErrUnplugged) {
		t.Fatalf("screenshot with WDA gone: %v", err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("the inventory did not hear that the iPhone went offline")
	}
	if st := inv.Devices()[0].State; st != protocol.DeviceOffline {
		t.Fatalf("state: %s", st)
	}
	// The watch probes it again (with backoff, not the hour's interval).
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	waitState(t, inv, p.UDID(), protocol.DeviceReady)
}

// A bad list adds nothing.
func TestWatchIOSRefusesBadPhones(t *testing.T) {
	inv := capture.NewInventory()
	if err := inv.Add(capture.NewSimulated(capture.SimOptions{Serial: "00008110-0000000000000000"})); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		phones []capture.IOSPhone
		want   string
	}{
		{[]capture.IOSPhone{{UDID: "00008110-00000000000000A1", WDAURL: "http://127.0.0.1:8100"}, {UDID: "00008110-00000000000000A1", WDAURL: "http://127.0.0.1:8101"}}, "twice"},
		{[]capture.IOSPhone{{UDID: "00008110-0000000000000000", WDAURL: "http://127.0.0.1:8100"}}, "in the inventory"},
		{[]capture.IOSPhone{{UDID: "00008110-00000000000000A1", WDAURL: "127.0.0.1:8100"}}, "wda_url"},
		{[]capture.IOSPhone{{UDID: "00008110-00000000000000A1", WDAURL: "ftp://127.0.0.1:8100"}}, "wda_url"},
		{[]capture.IOSPhone{{UDID: "x y", WDAURL: "http://127.0.0.1:8100"}}, "udid"},
	} {
		stop, err := capture.WatchIOS(context.Background(), inv, tc.phones, fastIOS)
		if err == nil {
			stop()
			t.Fatalf("WatchIOS(%+v) accepted", tc.phones)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("WatchIOS(%+v): %v, want it to name %q", tc.phones, err, tc.want)
		}
		if n := len(inv.Devices()); n != 1 {
			t.Fatalf("a refused list added %d phones", n-1)
		}
	}
}
