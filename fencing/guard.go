package fencing

import (
	"context"
	"sync"
	"time"
)

// DefaultCheckInterval is the longest pause between two wall-clock checks of
// a Guard (see WithCheckInterval).
const DefaultCheckInterval = time.Second

// Guard keeps the agent-side view of one lease. Its deadline is the send time
// of the last accepted renewal plus the TTL minus a safety margin, measured on
// the monotonic clock. When the deadline passes, or Stop is called (revoke,
// stale reply, cancel, shutdown), the job's context is cancelled with the
// cause, and the guard never extends again.
//
// The wall clock is checked too: a PC that was suspended does not advance
// Go's monotonic clock on every platform, so a jump of the wall clock past the
// deadline also counts as lease loss. Besides every Check and Renewed call,
// the guard checks both clocks on its own at least every check interval, so
// a PC waking from a suspend that outlasted the lease stops the job within
// one interval of waking even when the job is idle.
type Guard struct {
	token    Token
	margin   time.Duration
	interval time.Duration

	mu       sync.Mutex
	deadline time.Time // carries a monotonic reading
	wallDL   time.Time // same deadline on the wall clock (monotonic stripped)
	timer    *time.Timer
	ticker   *time.Timer // periodic wall-clock check
	cancel   context.CancelCauseFunc
	stopped  bool
	cause    error
	stopAt   time.Time
	now      func() time.Time // monotonic-bearing clock
	wall     func() time.Time // wall clock
}

// GuardOption adjusts a Guard.
type GuardOption func(*Guard)

// WithWallClock replaces the wall clock the guard compares against its wall
// deadline (tests simulate a suspend with it). The default is time.Now with
// the monotonic reading stripped.
func WithWallClock(wall func() time.Time) GuardOption {
	return func(g *Guard) { g.wall = wall }
}

// WithCheckInterval sets the longest pause between two checks the guard
// makes on its own. The default is the shorter of DefaultCheckInterval and a
// quarter of TTL − margin. d ≤ 0 keeps the default.
func WithCheckInterval(d time.Duration) GuardOption {
	return func(g *Guard) {
		if d > 0 {
			g.interval = d
		}
	}
}

// NewGuard returns a guard for tok and the job context it cancels. sentAt is
// when the request that obtained the lease was sent; ttl is the lease TTL the
// coordinator granted.
func NewGuard(parent context.Context, tok Token, sentAt time.Time, ttl, margin time.Duration, opts ...GuardOption) (*Guard, context.Context) {
	ctx, cancel := context.WithCancelCause(parent)
	g := &Guard{
		token: tok, margin: margin, cancel: cancel, now: time.Now,
		wall:     func() time.Time { return time.Now().Round(0) },
		interval: min(DefaultCheckInterval, max((ttl-margin)/4, time.Millisecond)),
	}
	for _, o := range opts {
		o(g)
	}
	g.mu.Lock()
	g.setDeadlineLocked(sentAt, ttl)
	g.ticker = time.AfterFunc(g.interval, g.tick)
	g.mu.Unlock()
	context.AfterFunc(ctx, func() {
		// The parent was cancelled (shutdown) or Stop ran: make sure the
		// timers are released and the guard is final.
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.stopped {
			g.stopped = true
			g.cause = context.Cause(ctx)
			g.stopAt = g.now()
		}
		g.stopTimersLocked()
	})
	return g, ctx
}

func (g *Guard) stopTimersLocked() {
	if g.timer != nil {
		g.timer.Stop()
	}
	if g.ticker != nil {
		g.ticker.Stop()
	}
}

func (g *Guard) setDeadlineLocked(sentAt time.Time, ttl time.Duration) {
	g.deadline = sentAt.Add(ttl - g.margin)
	g.wallDL = g.deadline.Round(0)
	d := g.deadline.Sub(g.now())
	if g.timer == nil {
		g.timer = time.AfterFunc(d, g.expire)
	} else {
		g.timer.Reset(d)
	}
}

// expiredLocked reports whether the deadline has passed on either clock.
func (g *Guard) expiredLocked() bool {
	return !g.now().Before(g.deadline) || !g.wall().Before(g.wallDL)
}

func (g *Guard) expire() {
	g.mu.Lock()
	expired := g.expiredLocked()
	g.mu.Unlock()
	if expired {
		g.Stop(ErrLeaseExpired)
	}
	// Otherwise a renewal moved the deadline after the timer fired and
	// re-armed it.
}

// tick is the periodic check: a wall-clock jump (suspend, hibernation)
// stops the job even when nothing else calls Check.
func (g *Guard) tick() {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return
	}
	expired := g.expiredLocked()
	if !expired {
		g.ticker.Reset(g.interval)
	}
	g.mu.Unlock()
	if expired {
		g.Stop(ErrLeaseExpired)
	}
}

// Token returns the guarded token.
func (g *Guard) Token() Token { return g.token }

// Renewed extends the deadline after an accepted renewal whose request was
// sent at sentAt. It reports false, and changes nothing, when the guard has
// already stopped or the deadline has already passed (a late acceptance
// cannot revive a lease the agent has given up).
func (g *Guard) Renewed(sentAt time.Time, ttl time.Duration) bool {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return false
	}
	if g.expiredLocked() {
		g.mu.Unlock()
		g.Stop(ErrLeaseExpired)
		return false
	}
	nd := sentAt.Add(ttl - g.margin)
	if nd.After(g.deadline) {
		g.setDeadlineLocked(sentAt, ttl)
	}
	g.mu.Unlock()
	return true
}

// Check stops the guard if the deadline has passed on either clock and
// reports whether the lease is still held. Call it before every side effect.
func (g *Guard) Check() bool {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return false
	}
	expired := g.expiredLocked()
	g.mu.Unlock()
	if expired {
		g.Stop(ErrLeaseExpired)
		return false
	}
	return true
}

// Held reports whether the lease is held now: not stopped and the deadline
// not passed on either clock. Unlike Check it never stops the guard, so it
// may be called while holding a lock that Stop's callers take.
func (g *Guard) Held() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.stopped && !g.expiredLocked()
}

// Stop cancels the job context with cause. Only the first call has effect.
func (g *Guard) Stop(cause error) {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return
	}
	g.stopped = true
	g.cause = cause
	g.stopAt = g.now()
	g.stopTimersLocked()
	g.mu.Unlock()
	g.cancel(cause)
}

// Deadline returns the current self-fence deadline.
func (g *Guard) Deadline() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.deadline
}

// Left returns how long the lease is held from now on, by the earlier of the
// two clocks; 0 once it has passed or the guard has stopped.
func (g *Guard) Left() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return 0
	}
	return max(0, min(g.deadline.Sub(g.now()), g.wallDL.Sub(g.wall())))
}

// Stopped reports whether the guard has stopped, why, and when.
func (g *Guard) Stopped() (bool, error, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopped, g.cause, g.stopAt
}
