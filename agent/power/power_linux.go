package power

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
)

// logind's names on the system bus.
const (
	logindName      = "org.freedesktop.login1"
	logindPath      = dbus.ObjectPath("/org/freedesktop/login1")
	logindManager   = "org.freedesktop.login1.Manager"
	prepareForSleep = logindManager + ".PrepareForSleep"
)

// callTimeout bounds every call to logind.
const callTimeout = 5 * time.Second

// defaultDelay is logind's InhibitDelayMaxSec when the property cannot be
// read.
const defaultDelay = 5 * time.Second

// impl is the logind inhibitor: the system bus connection (its address from
// DBUS_SYSTEM_BUS_ADDRESS, else the standard socket), the lock fds and the
// PrepareForSleep listener.
type impl struct {
	opts  Options
	conn  *dbus.Conn
	mgr   dbus.BusObject
	delay time.Duration // logind's InhibitDelayMaxSec
	sigs  chan *dbus.Signal
	done  chan struct{}

	mu       sync.Mutex
	want     bool   // the last Hold said on
	why      string // and why
	sleeping bool   // between PrepareForSleep(true) and (false)
	block    *os.File
	delayFD  *os.File
	warned   bool // a refused block lock was logged
	closing  bool // Close was called
}

func open(opts Options) (*impl, error) {
	conn, err := dbus.ConnectSystemBus()
	if err != nil {
		return nil, fmt.Errorf("connect to the D-Bus system bus: %w", err)
	}
	i := &impl{opts: opts, conn: conn, mgr: conn.Object(logindName, logindPath), delay: defaultDelay,
		sigs: make(chan *dbus.Signal, 16), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var v dbus.Variant
	err = i.mgr.CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, logindManager, "InhibitDelayMaxUSec").Store(&v)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ask systemd-logind (%s) on the system bus: %w", logindName, err)
	}
	if us, ok := v.Value().(uint64); ok && us > 0 {
		i.delay = time.Duration(us) * time.Microsecond
	}
	if err := conn.AddMatchSignalContext(ctx, dbus.WithMatchObjectPath(logindPath), dbus.WithMatchInterface(logindManager),
		dbus.WithMatchMember("PrepareForSleep")); err != nil {
		conn.Close()
		return nil, fmt.Errorf("listen for logind's PrepareForSleep: %w", err)
	}
	conn.Signal(i.sigs)
	go i.listen()
	return i, nil
}

func (i *impl) listen() {
	defer close(i.done)
	defer func() {
		// The connection is gone (closed, or the bus went away): no
		// PrepareForSleep(false) will come, so do not stay asleep.
		i.mu.Lock()
		sleeping, closing := i.sleeping, i.closing
		i.sleeping = false
		i.mu.Unlock()
		if !closing {
			i.opts.Log.Warn().Msg("lost the D-Bus system bus: no sleep inhibitor until the agent restarts")
		}
		if sleeping {
			i.opts.Resume()
		}
	}()
	for sig := range i.sigs {
		if sig.Name != prepareForSleep || len(sig.Body) != 1 {
			continue
		}
		start, ok := sig.Body[0].(bool)
		if !ok {
			continue
		}
		if start {
			i.mu.Lock()
			i.sleeping = true
			i.mu.Unlock()
			i.opts.Log.Info().Dur("inhibit_delay_max", i.delay).Msg("the PC is about to sleep")
			ctx, cancel := context.WithTimeout(context.Background(), suspendBudget(i.delay))
			i.opts.Suspend(ctx)
			cancel()
			i.mu.Lock()
			i.releaseLocked()
			i.mu.Unlock()
			continue
		}
		i.mu.Lock()
		i.sleeping = false
		var err error
		if i.want {
			err = i.takeLocked()
		}
		i.mu.Unlock()
		if err != nil {
			i.opts.Log.Warn().Err(err).Msg("take the sleep inhibitor again after waking")
		}
		i.opts.Log.Info().Msg("the PC woke up")
		i.opts.Resume()
	}
}

func (i *impl) hold(on bool, why string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.want, i.why = on, why
	if !on {
		i.releaseLocked()
		return nil
	}
	if i.sleeping {
		return nil
	}
	return i.takeLocked()
}

// takeLocked takes the block and the delay lock that are not held yet.
func (i *impl) takeLocked() error {
	var errs []error
	if i.block == nil {
		f, err := i.inhibit("block")
		switch {
		case err == nil:
			i.block = f
		case !i.warned:
			// Refused by polkit, for instance, for a service user:
			// the delay lock still lets the agent hand its jobs back.
			i.warned = true
			errs = append(errs, err)
		}
	}
	if i.delayFD == nil {
		f, err := i.inhibit("delay")
		if err != nil {
			errs = append(errs, err)
		} else {
			i.delayFD = f
		}
	}
	i.opts.OnHeld(i.block != nil || i.delayFD != nil)
	return errors.Join(errs...)
}

// inhibit takes one logind lock on sleep and returns its fd.
func (i *impl) inhibit(mode string) (*os.File, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var fd dbus.UnixFD
	if err := i.mgr.CallWithContext(ctx, logindManager+".Inhibit", 0, "sleep", i.opts.Who, i.why, mode).Store(&fd); err != nil {
		return nil, fmt.Errorf("take a %s inhibitor lock on sleep from systemd-logind: %w", mode, err)
	}
	if fd < 0 {
		return nil, fmt.Errorf("take a %s inhibitor lock on sleep from systemd-logind: no file descriptor in the reply", mode)
	}
	return os.NewFile(uintptr(fd), "logind-inhibitor-"+mode), nil
}

// releaseLocked closes the lock fds: logind drops the locks.
func (i *impl) releaseLocked() {
	was := i.block != nil || i.delayFD != nil
	for _, f := range []**os.File{&i.block, &i.delayFD} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
	if was {
		i.opts.OnHeld(false)
	}
}

func (i *impl) held() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.block != nil || i.delayFD != nil
}

func (i *impl) close() error {
	i.mu.Lock()
	i.want, i.closing = false, true
	i.releaseLocked()
	i.mu.Unlock()
	err := i.conn.Close() // closes the signal channel: the listener ends
	<-i.done
	return err
}
