// Package power keeps the PC awake while the agent runs jobs and tells the
// agent when the PC is about to sleep anyway and when it woke up
// (docs/operations.md, "Sleep").
//
// On Linux an Inhibitor takes systemd-logind inhibitor locks over D-Bus on
// the system bus: a "block" lock for sleep (the PC does not sleep while it
// is held, unless sleep is forced or the lock was refused) and a "delay"
// lock for sleep (when the PC sleeps anyway, logind sends PrepareForSleep
// and waits until the lock is closed, at most its InhibitDelayMaxSec, so
// the agent can hand its jobs back first). On Windows it sets
// SetThreadExecutionState(ES_CONTINUOUS|ES_SYSTEM_REQUIRED) on a thread of
// its own, and learns of sleep and wake from the power notifications of
// PowerRegisterSuspendResumeNotification. Elsewhere Open reports that the
// platform has none.
package power

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"
)

// ErrUnsupported is returned by Open on a platform without an inhibitor.
var ErrUnsupported = errors.New("no sleep inhibitor on this platform")

// Options configures an Inhibitor.
type Options struct {
	// Who names the holder in the OS's list of inhibitors; default
	// "edgeagent".
	Who string
	// Suspend is called when the PC is about to sleep. The sleep waits
	// for it (on Linux while the delay lock is held) until ctx is done:
	// logind's InhibitDelayMaxSec on Linux, a second on Windows. The
	// inhibitor's locks are released when it returns.
	Suspend func(ctx context.Context)
	// Resume is called when the PC woke up.
	Resume func()
	// Log receives the inhibitor's lines.
	Log zerolog.Logger
	// OnHeld, when set, is told whether the inhibitor is held now (for a
	// metric).
	OnHeld func(held bool)
}

func (o *Options) defaults() {
	if o.Who == "" {
		o.Who = "edgeagent"
	}
	if o.Suspend == nil {
		o.Suspend = func(context.Context) {}
	}
	if o.Resume == nil {
		o.Resume = func() {}
	}
	if o.OnHeld == nil {
		o.OnHeld = func(bool) {}
	}
}

// Inhibitor holds the OS's sleep inhibitor while Hold(true) is in force
// and passes on the OS's suspend and resume notices. Construct with Open;
// its methods are safe for concurrent use.
type Inhibitor struct {
	*impl
}

// Open connects to the OS's power management. Close it when done.
func Open(opts Options) (*Inhibitor, error) {
	opts.defaults()
	i, err := open(opts)
	if err != nil {
		return nil, err
	}
	return &Inhibitor{impl: i}, nil
}

// Hold takes the inhibitor (on) or gives it back (off); why says what the
// PC is kept awake for. Between a suspend notice and the matching resume
// the inhibitor is not taken again; it is after the resume when the last
// Hold said on. It returns the error of taking a lock the OS refused; the
// inhibitor keeps what it could take.
func (i *Inhibitor) Hold(on bool, why string) error { return i.hold(on, why) }

// Held reports whether the inhibitor is held now.
func (i *Inhibitor) Held() bool { return i.held() }

// Close gives the inhibitor back and stops listening for power notices.
func (i *Inhibitor) Close() error { return i.close() }

// suspendBudget is the part of the OS's grace time the Suspend callback
// gets: the rest is left for releasing the locks.
func suspendBudget(grace time.Duration) time.Duration {
	return grace - grace/10
}
