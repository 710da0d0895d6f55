package power

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
)

// These tests run on Windows, and under Wine from Linux (wine_test.go).

// TestExecutionStateWindows: Hold(true) sets ES_CONTINUOUS |
// ES_SYSTEM_REQUIRED on the inhibitor's own thread, which keeps it until
// Hold(false) (the state Hold(false) replaces is that one). (Wine keeps one
// state for the whole process, so that the state is the thread's, not
// another's, is not shown under Wine.)
func TestExecutionStateWindows(t *testing.T) {
	inh, err := Open(Options{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer inh.Close()
	if err := inh.Hold(true, "job"); err != nil {
		t.Fatal(err)
	}
	if !inh.Held() {
		t.Fatal("Held() = false after Hold(true)")
	}
	if err := inh.Hold(false, ""); err != nil {
		t.Fatal(err)
	}
	if got, want := inh.prev, uint32(esContinuous|esSystemRequired); got&want != want {
		t.Errorf("execution state before Hold(false) = %#x, want ES_CONTINUOUS|ES_SYSTEM_REQUIRED (%#x)", got, want)
	}
	if inh.Held() {
		t.Error("Held() = true after Hold(false)")
	}
	if err := inh.Hold(true, "job"); err != nil {
		t.Fatal(err)
	}
	if got := inh.prev; got&esSystemRequired != 0 {
		t.Errorf("execution state before the second Hold(true) = %#x, want ES_SYSTEM_REQUIRED cleared", got)
	}
}

// TestPowerNoticesWindows: the registered power callback, called as
// Windows calls it, runs Suspend on PBT_APMSUSPEND with the execution
// state still held, releases it after, and on PBT_APMRESUMEAUTOMATIC runs
// Resume and holds it again, since Hold still says on.
func TestPowerNoticesWindows(t *testing.T) {
	var suspended, resumed atomic.Int32
	var heldInSuspend atomic.Bool
	var inh *Inhibitor
	inh, err := Open(Options{
		Log: zerolog.Nop(),
		Suspend: func(ctx context.Context) {
			suspended.Add(1)
			heldInSuspend.Store(inh.Held())
			if _, ok := ctx.Deadline(); !ok {
				t.Error("Suspend's context has no deadline")
			}
		},
		Resume: func() { resumed.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer inh.Close()
	if current.Load() != inh.impl {
		t.Fatal("PowerRegisterSuspendResumeNotification did not register the inhibitor")
	}
	if err := inh.Hold(true, "job"); err != nil {
		t.Fatal(err)
	}
	call := func(typ uintptr) {
		if r, _, _ := syscall.SyscallN(callback, 0, typ, 0); r != 0 {
			t.Errorf("callback(%#x) returned %d", typ, r)
		}
	}
	call(pbtAPMSuspend)
	if suspended.Load() != 1 || !heldInSuspend.Load() {
		t.Fatalf("suspend: Suspend ran %d times, held while it ran %v; want 1, true", suspended.Load(), heldInSuspend.Load())
	}
	if inh.Held() {
		t.Error("still held after the suspend notice")
	}
	if err := inh.Hold(true, "job"); err != nil || inh.Held() {
		t.Errorf("Hold(true) while asleep: %v, held %v; want nil, false", err, inh.Held())
	}
	call(pbtAPMResumeAutomatic)
	call(pbtAPMResumeSuspend) // the second resume notice of a wake by the user
	if resumed.Load() != 1 {
		t.Errorf("Resume ran %d times, want 1", resumed.Load())
	}
	if !inh.Held() {
		t.Error("not held again after waking")
	}
}
