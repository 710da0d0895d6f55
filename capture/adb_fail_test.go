package capture_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestADBUnauthorizedPhone: a phone that never accepts this PC's key is
// listed as unauthorized; a job aimed at it fails with a reason naming the
// phone and the fix, and the other phone still runs jobs.
func TestADBUnauthorizedPhone(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{Unauthorized: true, Model: "Galaxy S21"}, fakeadbd.Options{Model: "Pixel 7"})
	bad, good := l.phones[0], l.phones[1]
	inv := l.inventory(t, l.options())

	ctx := context.Background()
	_, _, err := inv.AcquireMatching(ctx, protocol.DeviceSelector{Serial: bad.Serial()})
	if err == nil {
		t.Fatal("acquired an unauthorized phone")
	}
	msg := err.Error()
	for _, want := range []string{"phone " + bad.Serial() + " is unauthorized", "accept the USB debugging prompt", "adb devices"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if !errors.Is(err, capture.ErrUnauthorized) || !errors.Is(err, capture.ErrNoDevice) {
		t.Errorf("errors.Is(ErrUnauthorized, ErrNoDevice) = %v, %v", errors.Is(err, capture.ErrUnauthorized), errors.Is(err, capture.ErrNoDevice))
	}
	// Opening it directly fails the same way.
	if _, err := capture.NewADBDevice(ctx, l.options(), bad.Serial()); !errors.Is(err, capture.ErrUnauthorized) {
		t.Errorf("NewADBDevice on an unauthorized phone: %v", err)
	}

	dev, release, err := inv.AcquireMatching(ctx, protocol.DeviceSelector{})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if dev.Serial() != good.Serial() {
		t.Fatalf("any-phone selector chose %s", dev.Serial())
	}
	r := capture.NewRunner(ctx, dev, capture.RunnerOptions{})
	defer r.Close()
	for _, s := range []protocol.Step{{Op: protocol.OpTap, X: 1, Y: 2}, {Op: protocol.OpScreenshot}} {
		if _, err := r.RunStep(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if len(bad.Inputs()) != 0 {
		t.Errorf("the unauthorized phone received %q", bad.Inputs())
	}
}

// TestADBUnpluggedMidJob: phone 1 is unplugged while a step runs on it. The
// step, and every later one, fails with a reason naming the phone and the
// fix; the inventory drops it; phone 2's job carries on.
func TestADBUnpluggedMidJob(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{InputDelay: time.Hour}, fakeadbd.Options{})
	p1, p2 := l.phones[0], l.phones[1]
	inv := l.inventory(t, l.options())
	ctx := context.Background()

	d1, rel1, err := inv.AcquireMatching(ctx, protocol.DeviceSelector{Serial: p1.Serial()})
	if err != nil {
		t.Fatal(err)
	}
	defer rel1()
	d2, rel2, err := inv.AcquireMatching(ctx, protocol.DeviceSelector{Serial: p2.Serial()})
	if err != nil {
		t.Fatal(err)
	}
	defer rel2()
	r1 := capture.NewRunner(ctx, d1, capture.RunnerOptions{OpLog: capture.NewOpLog(capture.OpLogOptions{})})
	defer r1.Close()
	r2 := capture.NewRunner(ctx, d2, capture.RunnerOptions{})
	defer r2.Close()

	// The tap reaches phone 1 and hangs there; then the cable is pulled.
	done := make(chan error, 1)
	go func() {
		_, err := r1.RunStep(ctx, protocol.Step{Op: protocol.OpTap, X: 10, Y: 20})
		done <- err
	}()
	testenv.Eventually(t, 10*time.Second, "the tap to reach phone 1", func() bool { return len(p1.Inputs()) == 1 })
	p1.Unplug()
	var stepErr error
	select {
	case stepErr = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the step on the unplugged phone did not return")
	}
	checkUnplugged := func(err error) {
		t.Helper()
		if err == nil {
			t.Fatal("step on an unplugged phone succeeded")
		}
		if !errors.Is(err, capture.ErrUnplugged) {
			t.Errorf("error %q does not wrap ErrUnplugged", err)
		}
		for _, want := range []string{"phone " + p1.Serial(), "adb devices"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
	}
	checkUnplugged(stepErr)
	t.Logf("step error: %v", stepErr)
	_, err = r1.RunStep(ctx, protocol.Step{Op: protocol.OpScreenshot})
	checkUnplugged(err)

	// Phone 2 keeps working while adb gives up on phone 1.
	for _, s := range []protocol.Step{
		{Op: protocol.OpTap, X: 5, Y: 6},
		{Op: protocol.OpScreenshot},
		{Op: protocol.OpUIDump},
	} {
		if _, err := r2.RunStep(ctx, s); err != nil {
			t.Fatalf("phone 2: %v", err)
		}
	}
	if got := inputs(p2); len(got) != 1 || got[0] != "tap 5 6" {
		t.Errorf("phone 2 inputs = %q", got)
	}
	// The inventory no longer offers phone 1.
	testenv.Eventually(t, 10*time.Second, "phone 1 to leave the usable phones", func() bool {
		_, err := inv.Select(protocol.DeviceSelector{Serial: p1.Serial()})
		return err != nil
	})
	if d, err := inv.Select(protocol.DeviceSelector{}); err != nil || d.Serial() != p2.Serial() {
		t.Errorf("select any = %v, %v; want phone 2", d, err)
	}
}

// TestADBStartsServer: with no adb server running, the inventory starts one
// with `adb start-server` and finds the phone.
func TestADBStartsServer(t *testing.T) {
	l := startADBLab(t)
	if out, err := l.srv.Run("kill-server"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Setenv("HOME", l.srv.Home) // the started server's keys stay in the test's home
	inv, stop, err := capture.NewADBInventory(context.Background(), l.options())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	p, err := fakeadbd.Start(fakeadbd.Options{Model: "Pixel 8"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l.srv.Connect(t, p.Addr(), "device")
	if d := waitState(t, inv, p.Serial(), "device"); d.Model != "Pixel 8" {
		t.Errorf("phone = %+v", d)
	}

	// A server that cannot be started is an error naming the address.
	_, _, err = capture.NewADBInventory(context.Background(), capture.ADBOptions{Address: "127.0.0.1:1", ADBPath: "/nonexistent/adb"})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("err = %v", err)
	}
}
