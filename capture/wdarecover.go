package capture

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeagent/edgeagent/capture/wda"
	"github.com/edgeagent/edgeagent/protocol"
)

// An iPhone is on the agent's recovery ladder too (docs/capture.md,
// Recovery and iPhones): its probe asks WebDriverAgent, its reconnect
// re-creates the WDA session, and it cannot be rebooted.
var _ Recoverable = (*WDADevice)(nil)

// ErrCannotReboot: the phone cannot be rebooted by the agent (an iPhone:
// WebDriverAgent has no reboot); the ladder's rung 2 fails at once.
var ErrCannotReboot = errors.New("an iPhone cannot be rebooted through WebDriverAgent: restart it by hand, then start WebDriverAgent on it again")

// beginProbe waits, until ctx ends, for the phone's other probes (the
// watcher's Refresh, the ladder's Probe and Reconnect) to finish: WDA
// runs one command at a time, so they take turns. While it runs the
// phone is in use, so the watcher does not queue a probe behind it.
func (d *WDADevice) beginProbe(ctx context.Context) bool {
	select {
	case d.probing <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	d.mu.Lock()
	d.inflight++
	d.mu.Unlock()
	return true
}

func (d *WDADevice) endProbe() {
	d.mu.Lock()
	d.inflight--
	d.mu.Unlock()
	<-d.probing
}

// Probe asks WebDriverAgent whether it is up (GET /status) and the
// session is alive (GET /session/:id, created when there is none), both
// within timeout. A phone not in state "device" fails with its
// *PhoneStateError (the watcher keeps that state); so does a WDA that
// refuses the connection, which makes the phone offline (it is not
// running: a new session cannot help). A WDA that does not answer in
// time, or answers not ready, fails with ErrNotAnswering.
func (d *WDADevice) Probe(ctx context.Context, timeout time.Duration) error {
	if err := d.stateProblem(); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%w: no answer within %v", wda.ErrNotAnswering, timeout))
	defer cancel()
	if !d.beginProbe(pctx) {
		if ctx.Err() != nil {
			return ctxErr(ctx)
		}
		return fmt.Errorf("probe %s: %w: another probe of its WebDriverAgent still runs after %v", d.opts.UDID, ErrNotAnswering, timeout)
	}
	defer d.endProbe()
	st, err := d.c.Status(pctx)
	if err == nil && !st.Ready {
		err = fmt.Errorf("WebDriverAgent at %s is not ready: %s", d.c.URL(), clipText(st.Message, 120))
	}
	if err == nil {
		_, err = d.c.CheckSession(pctx)
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctxErr(ctx)
	case pctx.Err() != nil:
		return fmt.Errorf("probe %s: %w: WebDriverAgent got no answer within %v", d.opts.UDID, ErrNotAnswering, timeout)
	case errors.Is(err, wda.ErrNotRunning):
		d.setState(protocol.DeviceOffline, causeOf(err))
		return d.stateProblem()
	}
	return fmt.Errorf("probe %s: %w: %w", d.opts.UDID, ErrNotAnswering, err)
}

// Reconnect drops the phone's WDA session (deleting it, best effort
// within 3 s or half the op timeout, whichever is shorter) and creates a
// new one, all within the op timeout; it says what it did, as adb's
// answer is returned for an Android phone. A WDA that does not answer
// within the op timeout fails it with wda.ErrNotAnswering, naming the
// timeout; one that refuses the connection makes the phone offline.
func (d *WDADevice) Reconnect(ctx context.Context) (string, error) {
	timeout := d.opts.OpTimeout
	rctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%w: no answer within %v", wda.ErrNotAnswering, timeout))
	defer cancel()
	if !d.beginProbe(rctx) {
		return "", fmt.Errorf("reconnect %s: another probe of its WebDriverAgent still runs: %w", d.opts.UDID, ctxErr(rctx))
	}
	defer d.endProbe()
	old := d.c.SessionID()
	dctx, dcancel := context.WithTimeout(rctx, min(3*time.Second, timeout/2))
	derr := d.c.Close(dctx) // forgets the session even when WDA does not answer
	dcancel()
	out := "no WebDriverAgent session to delete"
	switch {
	case old != "" && derr == nil:
		out = "deleted WebDriverAgent session " + old
	case old != "":
		out = "dropped WebDriverAgent session " + old + " (delete: " + clipText(derr.Error(), 120) + ")"
	}
	sid, err := d.c.Session(rctx)
	if err != nil {
		if ctx.Err() == nil && rctx.Err() != nil {
			err = context.Cause(rctx)
		}
		if errors.Is(err, wda.ErrNotRunning) {
			d.setState(protocol.DeviceOffline, causeOf(err))
		}
		return out, fmt.Errorf("reconnect %s: create a WebDriverAgent session: %w", d.opts.UDID, err)
	}
	return out + "; created session " + sid, nil
}

// Reboot fails with ErrCannotReboot: WebDriverAgent cannot reboot an
// iPhone.
func (d *WDADevice) Reboot(ctx context.Context) error {
	return fmt.Errorf("reboot %s: %w", d.opts.UDID, ErrCannotReboot)
}
