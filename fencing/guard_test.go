package fencing

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var tok = Token{JobID: "j", Owner: "a/b", Generation: 1}

func TestGuardSelfFences(t *testing.T) {
	g, ctx := NewGuard(context.Background(), tok, time.Now(), 60*time.Millisecond, 10*time.Millisecond)
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("guard did not cancel the job context after its deadline")
	}
	if !errors.Is(context.Cause(ctx), ErrLeaseExpired) {
		t.Fatalf("cause = %v, want ErrLeaseExpired", context.Cause(ctx))
	}
	if g.Check() {
		t.Fatal("Check() = true after expiry")
	}
	if g.Renewed(time.Now(), time.Minute) {
		t.Fatal("a late renewal revived an expired lease")
	}
}

func TestGuardRenewalExtends(t *testing.T) {
	g, ctx := NewGuard(context.Background(), tok, time.Now(), 100*time.Millisecond, 10*time.Millisecond)
	defer g.Stop(context.Canceled)
	// Renew three times, each before the deadline; the job must survive
	// well past the first deadline.
	for range 3 {
		time.Sleep(50 * time.Millisecond)
		if !g.Renewed(time.Now(), 100*time.Millisecond) {
			t.Fatal("renewal refused while the lease was held")
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("job cancelled despite renewals: %v", context.Cause(ctx))
	}
	// A renewal whose request was sent earlier than the current deadline
	// basis never shortens it.
	dl := g.Deadline()
	g.Renewed(time.Now().Add(-time.Second), 100*time.Millisecond)
	if !g.Deadline().Equal(dl) {
		t.Fatal("an older renewal moved the deadline")
	}
}

func TestGuardStopCause(t *testing.T) {
	for _, cause := range []error{ErrStale, ErrRevoked} {
		g, ctx := NewGuard(context.Background(), tok, time.Now(), time.Hour, time.Second)
		g.Stop(cause)
		g.Stop(ErrLeaseExpired) // only the first stop counts
		if !errors.Is(context.Cause(ctx), cause) {
			t.Fatalf("cause = %v, want %v", context.Cause(ctx), cause)
		}
		stopped, c, at := g.Stopped()
		if !stopped || !errors.Is(c, cause) || at.IsZero() {
			t.Fatalf("Stopped() = %v %v %v", stopped, c, at)
		}
	}
}

func TestGuardWallClockJump(t *testing.T) {
	// A suspended PC: the monotonic reading has not moved, the wall clock
	// has jumped past the deadline.
	g, ctx := NewGuard(context.Background(), tok, time.Now(), time.Hour, time.Second)
	g.mu.Lock()
	g.now = func() time.Time { return time.Now().Round(0).Add(2 * time.Hour) }
	g.mu.Unlock()
	if g.Check() {
		t.Fatal("Check() = true after a wall-clock jump past the deadline")
	}
	if !errors.Is(context.Cause(ctx), ErrLeaseExpired) {
		t.Fatalf("cause = %v", context.Cause(ctx))
	}
}

func TestGuardParentCancel(t *testing.T) {
	parent, cancel := context.WithCancelCause(context.Background())
	g, ctx := NewGuard(parent, tok, time.Now(), time.Hour, time.Second)
	shutdown := errors.New("shutdown")
	cancel(shutdown)
	<-ctx.Done()
	time.Sleep(10 * time.Millisecond)
	stopped, c, _ := g.Stopped()
	if !stopped || !errors.Is(c, shutdown) {
		t.Fatalf("Stopped() = %v %v, want shutdown", stopped, c)
	}
}

// TestGuardNoticesSuspendOnItsOwn: nothing calls Check or Renewed, the wall
// clock jumps past the deadline (a PC waking from a suspend longer than the
// lease) and the guard's periodic check stops the job by itself.
func TestGuardNoticesSuspendOnItsOwn(t *testing.T) {
	var mu sync.Mutex
	var jump time.Duration
	wall := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return time.Now().Round(0).Add(jump)
	}
	g, ctx := NewGuard(context.Background(), tok, time.Now(), time.Hour, time.Second, WithWallClock(wall), WithCheckInterval(5*time.Millisecond))
	defer g.Stop(context.Canceled)
	select {
	case <-ctx.Done():
		t.Fatalf("stopped before the jump: %v", context.Cause(ctx))
	case <-time.After(30 * time.Millisecond):
	}
	if left := g.Left(); left <= 0 {
		t.Fatalf("Left() = %v before the jump", left)
	}
	mu.Lock()
	jump = 2 * time.Hour
	mu.Unlock()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the guard did not notice the wall-clock jump on its own")
	}
	if !errors.Is(context.Cause(ctx), ErrLeaseExpired) {
		t.Fatalf("cause = %v, want ErrLeaseExpired", context.Cause(ctx))
	}
	if g.Left() != 0 {
		t.Fatalf("Left() = %v after the stop", g.Left())
	}
}

// TestGuardRenewalAfterSuspendRefused: a renewal answered after a suspend
// that outlasted the deadline does not revive the lease.
func TestGuardRenewalAfterSuspendRefused(t *testing.T) {
	var jump atomic.Int64
	wall := func() time.Time { return time.Now().Round(0).Add(time.Duration(jump.Load())) }
	g, ctx := NewGuard(context.Background(), tok, time.Now(), time.Hour, time.Second, WithWallClock(wall), WithCheckInterval(time.Hour))
	jump.Store(int64(3 * time.Hour))
	if g.Renewed(time.Now(), time.Hour) {
		t.Fatal("renewal accepted after the wall clock passed the deadline")
	}
	if !errors.Is(context.Cause(ctx), ErrLeaseExpired) {
		t.Fatalf("cause = %v", context.Cause(ctx))
	}
}
