package power

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/testkit/fakelogind"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// modes returns the modes of locks, in order.
func modes(locks []fakelogind.Lock) []string {
	var out []string
	for _, l := range locks {
		out = append(out, l.Mode)
	}
	return out
}

func waitHeld(t *testing.T, l *fakelogind.Logind, what string, want ...string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, what, func() bool {
		got := modes(l.Held())
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if got[i] != want[i] {
				return false
			}
		}
		return true
	})
}

// TestInhibitorLogind: against a fake logind on a private bus, Hold takes
// a block and a delay lock on sleep in this process's name and Hold(false)
// closes both; PrepareForSleep(true) runs Suspend within logind's delay
// and releases the locks after it, not before; PrepareForSleep(false) runs
// Resume and takes the locks again, since Hold still says on.
func TestInhibitorLogind(t *testing.T) {
	l := fakelogind.StartT(t, fakelogind.Options{DelayMax: 3 * time.Second})
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", l.Addr)

	var resumed atomic.Int32
	release := make(chan struct{})
	var suspendHeld atomic.Int32 // locks held while Suspend ran
	var budget atomic.Int64
	inh, err := Open(Options{
		Who: "edgeagent-test",
		Suspend: func(ctx context.Context) {
			if dl, ok := ctx.Deadline(); ok {
				budget.Store(int64(time.Until(dl)))
			}
			suspendHeld.Store(int32(len(l.Held())))
			<-release
		},
		Resume: func() { resumed.Add(1) },
		Log:    zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer inh.Close()

	if err := inh.Hold(true, "running job j1"); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, l, "a block and a delay lock", "block", "delay")
	for _, lk := range l.Held() {
		if lk.What != "sleep" || lk.Who != "edgeagent-test" || lk.Why != "running job j1" || lk.PID != uint32(os.Getpid()) {
			t.Errorf("lock %+v: want sleep, edgeagent-test, running job j1, pid %d", lk, os.Getpid())
		}
	}
	if !inh.Held() {
		t.Error("Held() = false while holding")
	}
	if err := inh.Hold(false, ""); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, l, "no lock after Hold(false)")
	if inh.Held() {
		t.Error("Held() = true after Hold(false)")
	}

	// The PC goes to sleep while a job runs.
	if err := inh.Hold(true, "running job j2"); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, l, "the locks of job j2", "block", "delay")
	if err := l.PrepareForSleep(true); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "Suspend to run", func() bool { return budget.Load() != 0 })
	if n := suspendHeld.Load(); n != 2 {
		t.Errorf("%d locks held while Suspend ran, want 2 (sleep waits for the hand-back)", n)
	}
	if b := time.Duration(budget.Load()); b > 3*time.Second {
		t.Errorf("Suspend's budget %v is longer than logind's delay 3s", b)
	}
	if len(l.Held()) != 2 {
		t.Errorf("locks released before Suspend returned: %+v", l.Locks())
	}
	close(release)
	waitHeld(t, l, "the locks released after Suspend")
	// Hold while asleep takes nothing.
	if err := inh.Hold(true, "running job j3"); err != nil {
		t.Fatal(err)
	}
	if got := l.Held(); len(got) != 0 {
		t.Errorf("locks taken while the PC sleeps: %+v", got)
	}
	if err := l.PrepareForSleep(false); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "Resume to run", func() bool { return resumed.Load() == 1 })
	waitHeld(t, l, "the locks taken again after waking", "block", "delay")
	if err := inh.Close(); err != nil {
		t.Error(err)
	}
	waitHeld(t, l, "no lock after Close")
}

// TestInhibitorBlockRefused: when logind refuses the block lock (polkit,
// for a service user), Hold reports it once and the delay lock is still
// taken.
func TestInhibitorBlockRefused(t *testing.T) {
	l := fakelogind.StartT(t, fakelogind.Options{RefuseBlock: true})
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", l.Addr)
	inh, err := Open(Options{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer inh.Close()
	if err := inh.Hold(true, "job"); err == nil {
		t.Error("Hold: no error for the refused block lock")
	}
	waitHeld(t, l, "the delay lock alone", "delay")
	if err := inh.Hold(false, ""); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, l, "no lock")
	if err := inh.Hold(true, "job"); err != nil {
		t.Errorf("Hold again: %v, want the refusal reported once", err)
	}
	waitHeld(t, l, "the delay lock alone again", "delay")
}

// TestInhibitorNoLogind: no system bus is an error.
func TestInhibitorNoLogind(t *testing.T) {
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/edgeagent-test-bus")
	if _, err := Open(Options{Log: zerolog.Nop()}); err == nil {
		t.Fatal("Open without a system bus: no error")
	}
}
