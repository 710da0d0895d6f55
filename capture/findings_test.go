package capture_test

import (
	"context"
	"errors"
	"github.com/edgeagent/edgeagent/testkit/testenv"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
)

// TestADBUnnamedRecordingTakesStartNumber: an unnamed record_start at step
// 6 stopped at step 8 is stored as recording-006.mp4, the number of the
// step that started it (docs/protocol.md section 5), and task validation
// counts the same name.
func TestADBUnnamedRecordingTakesStartNumber(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{RecordingSize: 4 << 10})
	inv := l.inventory(t, l.options())
	ctx := context.Background()
	dev, release, err := inv.AcquireMatching(ctx, protocol.DeviceSelector{Serial: l.phones[0].Serial()})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	r := capture.NewRunner(ctx, dev, capture.RunnerOptions{})
	defer r.Close()
	steps := []protocol.Step{
		{Op: protocol.OpTap, X: 1, Y: 1},
		{Op: protocol.OpTap, X: 2, Y: 2},
		{Op: protocol.OpTap, X: 3, Y: 3},
		{Op: protocol.OpTap, X: 4, Y: 4},
		{Op: protocol.OpTap, X: 5, Y: 5},
		{Op: protocol.OpRecordStart},
		{Op: protocol.OpWait, DurationMS: 10},
		{Op: protocol.OpRecordStop},
		// A screenshot named like the recording of the stop's number does
		// not collide.
		{Op: protocol.OpScreenshot, Name: "recording-008.mp4.png"},
	}
	task := protocol.Task{Steps: steps}
	if err := task.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	dup := protocol.Task{Steps: append(append([]protocol.Step(nil), steps...), protocol.Step{Op: protocol.OpUIDump, Name: "recording-006.mp4.xml"})}
	if err := dup.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	var names []string
	for _, s := range steps {
		out, err := r.RunStep(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range out.Artifacts {
			names = append(names, a.Name)
		}
	}
	if len(names) != 2 || names[0] != "recording-006.mp4" {
		t.Errorf("artifacts = %q, want recording-006.mp4 first (the record_start's number)", names)
	}
	// Validation names the same: a screenshot called recording-006.mp4
	// collides with it.
	clash := protocol.Task{Steps: append(append([]protocol.Step(nil), steps[:8]...), protocol.Step{Op: protocol.OpRecordStart, Name: "recording-006"}, protocol.Step{Op: protocol.OpRecordStop})}
	if err := clash.Validate(); err == nil {
		t.Error("validate: a second recording named recording-006 passed; the first unnamed one (started at step 6) produces recording-006.mp4")
	}
}

// TestADBPhoneStopsTrusting: a phone that stops trusting the PC between
// steps (a wireless phone that reconnects and asks again) fails the next
// step as unauthorized, with adb's own error, even though adb's
// device-tracking stream last said offline.
func TestADBPhoneStopsTrusting(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{})
	p := l.phones[0]
	inv := l.inventory(t, l.options())
	ctx := context.Background()
	dev, release, err := inv.AcquireMatching(ctx, protocol.DeviceSelector{Serial: p.Serial()})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	r := capture.NewRunner(ctx, dev, capture.RunnerOptions{})
	defer r.Close()
	if _, err := r.RunStep(ctx, protocol.Step{Op: protocol.OpTap, X: 1, Y: 1}); err != nil {
		t.Fatal(err)
	}
	p.Distrust()
	l.srv.WaitState(t, p.Serial(), "unauthorized")
	_, err = r.RunStep(ctx, protocol.Step{Op: protocol.OpTap, X: 2, Y: 2})
	if !errors.Is(err, capture.ErrUnauthorized) || !strings.Contains(err.Error(), "is unauthorized") {
		t.Fatalf("step on a phone that stopped trusting the PC: %v; want it unauthorized, with the fix", err)
	}
	if !strings.Contains(err.Error(), "adb server refused") {
		t.Errorf("error %q lacks adb's own error", err)
	}
	t.Logf("error: %v", err)
}

// TestWaitNoticesUnplug: a phone unplugged during a wait step fails that
// step during the wait, as unplugged, on a phone behind adb and on the
// simulated phone alike.
func TestWaitNoticesUnplug(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{})
	p := l.phones[0]
	inv := l.inventory(t, l.options())
	ctx := context.Background()
	dev, release, err := inv.AcquireMatching(ctx, protocol.DeviceSelector{Serial: p.Serial()})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	sim := capture.NewSimulated(capture.SimOptions{})
	for _, c := range []struct {
		name   string
		dev    capture.Device
		unplug func()
	}{{"adb", dev, p.Unplug}, {"simulated", sim, sim.Unplug}} {
		t.Run(c.name, func(t *testing.T) {
			jctx, cancel := context.WithCancel(ctx)
			defer cancel()
			r := capture.NewRunner(jctx, c.dev, capture.RunnerOptions{})
			defer r.Close()
			done := make(chan error, 1)
			started := make(chan struct{})
			go func() {
				close(started)
				_, err := r.RunStep(jctx, protocol.Step{Op: protocol.OpWait, DurationMS: 3_600_000})
				done <- err
			}()
			<-started
			c.unplug()
			var stepErr error
			testenv.Eventually(t, 30*time.Second, "the wait step to fail", func() bool {
				select {
				case stepErr = <-done:
					return true
				default:
					return false
				}
			})
			if !errors.Is(stepErr, capture.ErrUnplugged) || !strings.Contains(stepErr.Error(), c.dev.Serial()) {
				t.Errorf("wait on an unplugged phone: %v; want it unplugged, naming the phone", stepErr)
			}
			t.Logf("error: %v", stepErr)
		})
	}
}

// TestUnauthorizedPhoneReason: a job aimed at an unauthorized phone cannot
// start; what the agent reports of the phone is enough to say why, with
// the fix (protocol.DeviceSelector.NotReadyReason, the waiting reason of
// `edgecoord job list`), and acquiring it fails with the same state.
func TestUnauthorizedPhoneReason(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{Unauthorized: true})
	p := l.phones[0]
	inv := l.inventory(t, l.options())
	sel := protocol.DeviceSelector{Serial: p.Serial()}
	why := sel.NotReadyReason(inv.Devices())
	for _, want := range []string{"phone " + p.Serial() + " is unauthorized", "accept the USB debugging prompt", "ADB_VENDOR_KEYS"} {
		if !strings.Contains(why, want) {
			t.Errorf("reason %q lacks %q", why, want)
		}
	}
	_, _, err := inv.AcquireMatching(context.Background(), sel)
	if !errors.Is(err, capture.ErrUnauthorized) || !strings.Contains(err.Error(), "is unauthorized") || !strings.Contains(err.Error(), "ADB_VENDOR_KEYS") {
		t.Errorf("acquire the unauthorized phone: %v; want it unauthorized, with the fix", err)
	}
}
