package fencing

import (
	"context"
	"sync"
	"time"
)

// Guard keeps the agent-side view of one lease. Its deadline is the send time
// of the last accepted renewal plus the TTL minus a safety margin, measured on
// the monotonic clock. When the deadline passes, or Stop is called (revoke,
// stale reply, cancel, shutdown), the job's context is cancelled with the
// cause, and the guard never extends again.
//
// The wall clock is checked too: a PC that was suspended does not advance
// Go's monotonic clock on every platform, so a jump of the wall clock past the
// deadline also counts as lease loss (see Check).
type Guard struct {
	token  Token
	margin time.Duration

	mu       sync.Mutex
	deadline time.Time // carries a monotonic reading
	wallDL   time.Time // same deadline on the wall clock (monotonic stripped)
	timer    *time.Timer
	cancel   context.CancelCauseFunc
	stopped  bool
	cause    error
	stopAt   time.Time
	now      func() time.Time
}

// NewGuard returns a guard for tok and the job context it cancels. sentAt is
// when the request that obtained the lease was sent; ttl is the lease TTL the
// coordinator granted.
func NewGuard(parent context.Context, tok Token, sentAt time.Time, ttl, margin time.Duration) (*Guard, context.Context) {
	ctx, cancel := context.WithCancelCause(parent)
	g := &Guard{token: tok, margin: margin, cancel: cancel, now: time.Now}
	g.mu.Lock()
	g.setDeadlineLocked(sentAt, ttl)
	g.mu.Unlock()
	context.AfterFunc(ctx, func() {
		// The parent was cancelled (shutdown) or Stop ran: make sure the
		// timer is released and the guard is final.
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.stopped {
			g.stopped = true
			g.cause = context.Cause(ctx)
			g.stopAt = g.now()
		}
		if g.timer != nil {
			g.timer.Stop()
		}
	})
	return g, ctx
}

func (g *Guard) setDeadlineLocked(sentAt time.Time, ttl time.Duration) {
	g.deadline = sentAt.Add(ttl - g.margin)
	g.wallDL = g.deadline.Round(0)
	d := time.Until(g.deadline)
	if g.timer == nil {
		g.timer = time.AfterFunc(d, g.expire)
	} else {
		g.timer.Reset(d)
	}
}

func (g *Guard) expire() {
	g.mu.Lock()
	dl := g.deadline
	g.mu.Unlock()
	if time.Now().Before(dl) {
		// A renewal moved the deadline after the timer fired.
		return
	}
	g.Stop(ErrLeaseExpired)
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
	now := g.now()
	if !now.Before(g.deadline) || !now.Round(0).Before(g.wallDL) {
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
	now := g.now()
	expired := !now.Before(g.deadline) || !now.Round(0).Before(g.wallDL)
	g.mu.Unlock()
	if expired {
		g.Stop(ErrLeaseExpired)
		return false
	}
	return true
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
	if g.timer != nil {
		g.timer.Stop()
	}
	g.mu.Unlock()
	g.cancel(cause)
}

// Deadline returns the current self-fence deadline.
func (g *Guard) Deadline() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.deadline
}

// Stopped reports whether the guard has stopped, why, and when.
func (g *Guard) Stopped() (bool, error, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopped, g.cause, g.stopAt
}
