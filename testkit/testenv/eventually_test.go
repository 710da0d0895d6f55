package testenv

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	panic(r)
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	Eventually(t, time.Minute, "the third poll", func() bool { return n.Add(1) >= 3 })
	if got := n.Load(); got != 3 {
		t.Fatalf("polled %d times, want 3", got)
	}
}

func TestEventuallyFailsNamingWhatItWaitedFor(t *testing.T) {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil && p != any(r) {
				panic(p)
			}
		}()
		Eventually(r, 10*time.Millisecond, "never", func() bool { return false })
	}()
	if !strings.Contains(r.failed, "waiting for %s") {
		t.Fatalf("Eventually did not fail the test (recorded %q)", r.failed)
	}
}
