package capture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/capture/adb"
	"github.com/edgeagent/edgeagent/protocol"
)

// Recoverable is a phone the agent's recovery ladder can work on
// (docs/capture.md, Recovery): probe it, reconnect its transport, reboot
// it. ADBDevice and WDADevice (an iPhone) are; simulated phones are not.
type Recoverable interface {
	Device
	// Probe runs a cheap command (echo ok; WDA's /status and session)
	// that must answer within timeout.
	Probe(ctx context.Context, timeout time.Duration) error
	// Reconnect kicks the phone's transport in the adb server and, for a
	// network phone, connects it again; it returns adb's answer. An
	// iPhone's re-creates its WDA session and says so.
	Reconnect(ctx context.Context) (string, error)
	// Reboot reboots the phone and waits until adb lists it again with
	// sys.boot_completed=1, or ctx ends; an iPhone's fails with
	// ErrCannotReboot.
	Reboot(ctx context.Context) error
}

var _ Recoverable = (*ADBDevice)(nil)

// ErrNotAnswering: the phone is listed by adb as "device" but did not
// answer a probe in time.
var ErrNotAnswering = errors.New("phone not answering")

// Probe runs `echo ok` on the phone and fails with ErrNotAnswering when it
// does not answer "ok" within timeout.
func (d *ADBDevice) Probe(ctx context.Context, timeout time.Duration) error {
	if st := d.phoneState(); !Listed(st) {
		return StateProblem(d.serial, st)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := d.shell(pctx, "echo ok")
	switch {
	case err != nil && ctx.Err() != nil:
		return ctxErr(ctx)
	case err != nil && pctx.Err() != nil:
		return fmt.Errorf("probe %s: %w: echo ok got no answer within %v", d.serial, ErrNotAnswering, timeout)
	case err != nil:
		return fmt.Errorf("probe %s: %w: %w", d.serial, ErrNotAnswering, err)
	case strings.TrimSpace(string(res.Stdout)) != "ok":
		return fmt.Errorf("probe %s: %w: echo ok answered %q", d.serial, ErrNotAnswering, clipText(strings.TrimSpace(string(res.Stdout)), 80))
	}
	return nil
}

// networkSerial reports whether serial is a network phone's host:port
// (added with `adb connect`).
func networkSerial(serial string) bool {
	host, port, err := net.SplitHostPort(serial)
	return err == nil && host != "" && port != ""
}

// Reconnect kicks the phone's transport (`adb -s SERIAL reconnect`); a
// network phone, which adb 29 then drops, is connected again (`adb
// connect SERIAL`).
func (d *ADBDevice) Reconnect(ctx context.Context) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, d.opts.CaptureTimeout)
	defer cancel()
	out, err := d.c.Reconnect(rctx, d.serial)
	if err != nil {
		return out, err
	}
	if !networkSerial(d.serial) {
		return out, nil
	}
	// adb drops the network transport: connect it again once it is gone.
	var cerr error
	for range 20 {
		var msg string
		msg, cerr = d.c.Connect(rctx, d.serial)
		if cerr == nil {
			return out + "; " + msg, nil
		}
		select {
		case <-rctx.Done():
			return out, fmt.Errorf("reconnect %s: %w", d.serial, cerr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return out, fmt.Errorf("reconnect %s: %w", d.serial, cerr)
}

// Reboot reboots the phone (`adb reboot`) and waits until adb lists it as
// "device" again and sys.boot_completed is 1, or ctx ends.
func (d *ADBDevice) Reboot(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, d.opts.CaptureTimeout)
	err := d.c.Reboot(rctx, d.serial)
	cancel()
	if err != nil {
		return err
	}
	network := networkSerial(d.serial)
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("reboot %s: wait for sys.boot_completed: %w", d.serial, ctxErr(ctx))
		case <-time.After(250 * time.Millisecond):
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ds, lerr := d.c.Devices(qctx)
		state := stateOf(ds, d.serial)
		if lerr == nil && state == stateGone && network {
			_, _ = d.c.Connect(qctx, d.serial)
		}
		if lerr == nil && state == protocol.DeviceReady {
			res, serr := d.c.ShellV1(qctx, d.serial, "getprop sys.boot_completed")
			if serr == nil && strings.TrimSpace(string(res.Stdout)) == "1" {
				cancel()
				return nil
			}
		}
		cancel()
	}
}

// stateOf returns the state adb lists the phone in now ("gone" when not
// listed).
func stateOf(ds []adb.DeviceEntry, serial string) string {
	for _, e := range ds {
		if e.Serial == serial {
			return e.State
		}
	}
	return stateGone
}
