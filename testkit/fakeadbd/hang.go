package fakeadbd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// RebootTime is how long a fake phone is away while it reboots.
const RebootTime = 300 * time.Millisecond

// faults are the misbehaviours of a phone at home that tests switch on:
// a phone that stays listed but stops answering (Hang,
// HangUntilReconnect), one that keeps dropping off and coming back (Flap),
// and a USB hub that drops several phones at once (HubDrop).
type faults struct {
	// hung: every stream opened is left unanswered until Recover.
	hung bool
	// hungConns: streams opened on these connections are left unanswered;
	// a new connection (adb reconnect) answers again.
	hungConns map[net.Conn]bool
	// swallowed counts the streams left unanswered.
	swallowed int
	// connects counts the connections the phone accepted.
	connects int
	// reboots counts the reboots asked for (`adb reboot`).
	reboots int
}

// Hang makes the phone stop answering while adb keeps listing it as
// "device", like a phone whose adbd is wedged: every stream the adb server
// opens (shell, exec, sync) gets no reply at all, also after a reconnect,
// until Recover. Streams already open are not affected.
func (p *Phone) Hang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault.hung = true
}

// HangUntilReconnect is Hang for the connections open now only: once the
// adb server reconnects the transport (`adb reconnect`), the phone answers
// again, like a phone a reconnect cures.
func (p *Phone) HangUntilReconnect() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fault.hungConns == nil {
		p.fault.hungConns = map[net.Conn]bool{}
	}
	for c := range p.conns {
		p.fault.hungConns[c] = true
	}
}

// Recover ends Hang and HangUntilReconnect: streams opened from now on are
// answered. Streams left unanswered stay so (the adb server has given up
// on them).
func (p *Phone) Recover() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault.hung = false
	p.fault.hungConns = nil
}

// Hung reports whether the phone leaves new streams unanswered on some
// connection.
func (p *Phone) Hung() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault.hung || len(p.fault.hungConns) > 0
}

// Swallowed returns how many streams the phone left unanswered.
func (p *Phone) Swallowed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault.swallowed
}

// Connects returns how many transport connections the phone accepted: a
// reconnect by the adb server (`adb reconnect`, or after a drop) adds one.
func (p *Phone) Connects() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault.connects
}

// swallowOpen reports whether an OPEN of service on connection c is to be
// left unanswered, and counts it. A hung phone still takes a reboot: its
// framework is wedged, not adbd.
func (p *Phone) swallowOpen(c net.Conn, service string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if strings.HasPrefix(service, "reboot:") {
		return false
	}
	if p.fault.hung || p.fault.hungConns[c] {
		p.fault.swallowed++
		return true
	}
	return false
}

// accepted counts a transport connection and forgets closed ones.
func (p *Phone) acceptedLocked(c net.Conn) {
	p.fault.connects++
	for hc := range p.fault.hungConns {
		if !p.conns[hc] {
			delete(p.fault.hungConns, hc)
		}
	}
}

// Replug plugs an unplugged phone back in: it accepts connections again.
// The adb server sees it again once it reconnects (`adb connect`, or its
// own reconnect of a network phone it lost).
func (p *Phone) Replug() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unplugged = false
}

// LeaveNetwork takes a phone on wireless debugging off the network: its
// connections drop and its address refuses connections until
// ReturnToNetwork, so the adb server's own reconnects of it fail.
func (p *Phone) LeaveNetwork() {
	p.Unplug()
	p.mu.Lock()
	ln := p.ln
	p.mu.Unlock()
	ln.Close()
}

// ReturnToNetwork listens at the phone's address again and accepts
// connections: the phone is back, for whoever runs `adb connect`.
func (p *Phone) ReturnToNetwork() error {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("listen again at %s: %w", p.addr, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		ln.Close()
		return errors.New("return to network: phone closed")
	}
	p.ln = ln
	p.unplugged = false
	p.wg.Go(func() { p.accept(ln) })
	return nil
}

// Flap drops the phone's connections n times, every period, accepting
// connections again in between: the adb server sees it go offline and
// come back each time, like a phone on a loose cable. It returns when
// done or when ctx ends, with the phone plugged in.
func (p *Phone) Flap(ctx context.Context, n int, period time.Duration) {
	defer p.Replug()
	for range n {
		p.Unplug()
		if !sleepCtx(ctx, period/2) {
			return
		}
		p.Replug()
		if !sleepCtx(ctx, period-period/2) {
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// HubDrop unplugs every phone at once, as a USB hub that loses power:
// they all drop within microseconds (Replug each to bring it back).
func HubDrop(phones ...*Phone) {
	for _, p := range phones {
		p.Unplug()
	}
}

// Reboots returns how many reboots the phone was asked for.
func (p *Phone) Reboots() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault.reboots
}

// serveReboot serves `adb reboot`: the phone drops off adb, is away for
// RebootTime and comes back answering (a reboot cures Hang).
func (p *Phone) serveReboot(st *stream) {
	p.mu.Lock()
	p.fault.reboots++
	p.mu.Unlock()
	p.wg.Go(func() {
		// Let the reply reach the host before the connection drops.
		if !sleepCtx(context.Background(), 50*time.Millisecond) {
			return
		}
		p.Unplug()
		p.Recover()
		select {
		case <-time.After(RebootTime):
		case <-p.closing:
			return
		}
		p.Replug()
	})
}
