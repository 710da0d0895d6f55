package capture

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"
)

// Defaults of the backoff between connects of a network phone that does
// not answer (ADBOptions.ConnectBackoff, ConnectBackoffMax).
const (
	DefaultConnectBackoff    = time.Second
	DefaultConnectBackoffMax = 30 * time.Second
)

// connectTimeout bounds one `adb connect`.
const connectTimeout = 15 * time.Second

// netPhone is what the tracker knows of a network phone (host:port,
// `adb connect`) between its connects: an adb server drops a network phone
// it cannot reach for about a minute and never tries it again, so the
// agent connects it again itself (docs/capture.md, Network phones).
type netPhone struct {
	attempts int           // failed connects since it was last listed
	backoff  time.Duration // wait after the next failure
	next     time.Time     // no connect before this
	lastErr  string
}

// rememberNetwork adds serial to the network phones connected again when
// the adb server does not list them, if it is a network phone. Called with
// t.mu held (or before the tracker runs).
func (t *tracker) rememberNetwork(serial string) {
	if !networkSerial(serial) || t.network[serial] != nil {
		return
	}
	if len(t.opts.Serials) > 0 && !slices.Contains(t.opts.Serials, serial) && !slices.Contains(t.opts.Connect, serial) {
		return // not offered: left alone
	}
	t.network[serial] = &netPhone{backoff: t.opts.ConnectBackoff}
}

// listedAgain resets the backoff of a network phone the adb server lists
// again. Called with t.mu held.
func (t *tracker) listedAgain(serial string) {
	n := t.network[serial]
	if n == nil {
		return
	}
	if n.attempts > 0 {
		t.opts.Log.Info().Str("serial", serial).Int("failed_connects", n.attempts).Msg("network phone listed by the adb server again")
	}
	*n = netPhone{backoff: t.opts.ConnectBackoff}
}

// dropped keeps a network phone the adb server no longer lists in the
// inventory, in state offline with the reason, while the agent connects
// it again; a job aimed at it waits. Called with t.mu held.
func (t *tracker) dropped(serial string, tp *trackedPhone) {
	n := t.network[serial]
	if n == nil {
		return
	}
	tp.kept = true
	tp.d.setNetNote(n.note(serial, time.Now()))
	if err := t.inv.Add(tp.d); err != nil {
		t.opts.Log.Error().Err(err).Msg("keep dropped network phone in the inventory")
	}
	t.opts.Log.Warn().Str("serial", serial).Msg("network phone dropped by the adb server; the agent connects it again (adb connect) until it answers")
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// note is the phone's state reason while it is not listed.
func (n *netPhone) note(serial string, now time.Time) string {
	s := fmt.Sprintf("network phone not listed by the adb server; the agent connects it again (adb connect %s)", serial)
	if n.attempts > 0 {
		s += fmt.Sprintf(": %d failed, next in %s (%s)", n.attempts, n.next.Sub(now).Round(time.Second), n.lastErr)
	}
	return s
}

// connectLoop connects every network phone the adb server does not list,
// each with its own backoff, until ctx ends.
func (t *tracker) connectLoop(ctx context.Context) {
	tick := time.NewTicker(t.opts.ConnectBackoff / 2)
	defer tick.Stop()
	for {
		for _, serial := range t.due(time.Now()) {
			cctx, cancel := context.WithTimeout(ctx, connectTimeout)
			msg, err := t.c.Connect(cctx, serial)
			cancel()
			if ctx.Err() != nil {
				return
			}
			t.connected(serial, msg, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-t.wake:
		}
	}
}

// due returns the network phones not listed whose next connect is due.
func (t *tracker) due(now time.Time) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for serial, n := range t.network {
		if tp := t.devs[serial]; tp != nil && tp.listed != "" {
			continue
		}
		if now.Before(n.next) {
			continue
		}
		out = append(out, serial)
	}
	sort.Strings(out)
	return out
}

// connected records the outcome of one connect.
func (t *tracker) connected(serial, msg string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.network[serial]
	if n == nil {
		return
	}
	now := time.Now()
	if err != nil {
		n.attempts++
		n.lastErr = err.Error()
		n.next = now.Add(n.backoff)
		t.opts.Log.Warn().Err(err).Str("serial", serial).Int("attempt", n.attempts).Dur("retry_in", n.backoff).
			Msg("network phone does not answer; connecting again")
		n.backoff = min(n.backoff*2, t.opts.ConnectBackoffMax)
	} else {
		t.opts.Log.Info().Str("serial", serial).Str("adb", msg).Int("failed_connects", n.attempts).Msg("network phone connected (adb connect)")
		// The adb server lists it in a moment; until then, no new connect.
		n.next = now.Add(n.backoff)
	}
	if tp := t.devs[serial]; tp != nil && tp.kept {
		tp.d.setNetNote(n.note(serial, now))
		t.inv.notify()
	}
}
