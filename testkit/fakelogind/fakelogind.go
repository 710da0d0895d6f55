//go:build linux

// Package fakelogind is a stand-in for systemd-logind on a private D-Bus
// bus for tests: it starts Debian's dbus-daemon, owns the name
// org.freedesktop.login1 on it and serves the parts of
// org.freedesktop.login1.Manager the agent uses (docs/operations.md,
// "Sleep"): Inhibit, which hands out the write end of a pipe as logind
// hands out its FIFO, the property InhibitDelayMaxUSec, and the signal
// PrepareForSleep, sent when the test says. It records every lock taken:
// who took it (the caller's process id), for what, in which mode, and when
// it was released, which it sees as the pipe closing in every process.
package fakelogind

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

const (
	name    = "org.freedesktop.login1"
	path    = dbus.ObjectPath("/org/freedesktop/login1")
	manager = "org.freedesktop.login1.Manager"
)

// Lock is an inhibitor lock handed out.
type Lock struct {
	What, Who, Why, Mode string
	PID                  uint32 // the caller's process
	Released             bool   // every copy of the fd is closed
}

// Options configures a Logind.
type Options struct {
	// DBusDaemon is the dbus-daemon binary; default "dbus-daemon" from
	// PATH.
	DBusDaemon string
	// Dir holds the bus socket and config; required.
	Dir string
	// DelayMax is InhibitDelayMaxUSec; default 5s.
	DelayMax time.Duration
	// RefuseBlock refuses block locks (as polkit does for a service user
	// without a rule).
	RefuseBlock bool
}

// Logind is a running fake logind with its bus.
type Logind struct {
	// Addr is the bus address (DBUS_SYSTEM_BUS_ADDRESS for the agent).
	Addr string

	opts   Options
	daemon *exec.Cmd
	conn   *dbus.Conn

	mu      sync.Mutex
	locks   []*Lock
	changed chan struct{}
}

// Start starts dbus-daemon on a socket in opts.Dir and the fake logind on
// it.
func Start(opts Options) (_ *Logind, err error) {
	if opts.DBusDaemon == "" {
		opts.DBusDaemon = "dbus-daemon"
	}
	if opts.DelayMax <= 0 {
		opts.DelayMax = 5 * time.Second
	}
	sock := filepath.Join(opts.Dir, "system_bus_socket")
	conf := filepath.Join(opts.Dir, "bus.conf")
	if err := os.WriteFile(conf, []byte(busConfig(sock)), 0o600); err != nil {
		return nil, fmt.Errorf("write bus config: %w", err)
	}
	l := &Logind{opts: opts, changed: make(chan struct{})}
	l.daemon = exec.Command(opts.DBusDaemon, "--config-file="+conf, "--nofork", "--nopidfile", "--print-address=1")
	out, err := l.daemon.StdoutPipe()
	if err != nil {
		return nil, err
	}
	l.daemon.Stderr = os.Stderr
	// Killed with the test process, also when it panics.
	l.daemon.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := l.daemon.Start(); err != nil {
		return nil, fmt.Errorf("start dbus-daemon: %w", err)
	}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("read the bus address from dbus-daemon: %w", err)
	}
	go io.Copy(io.Discard, out) //nolint:errcheck // keeps the pipe drained
	l.Addr = strings.TrimSpace(line)
	if l.conn, err = dbus.Connect(l.Addr, dbus.WithIncomingInterceptor(noReply)); err != nil {
		return nil, fmt.Errorf("connect to the private bus: %w", err)
	}
	if err := l.conn.Export(&managerObj{l}, path, manager); err != nil {
		return nil, err
	}
	if _, err := prop.Export(l.conn, path, prop.Map{manager: {
		"InhibitDelayMaxUSec": {Value: uint64(opts.DelayMax / time.Microsecond), Emit: prop.EmitFalse},
	}}); err != nil {
		return nil, fmt.Errorf("export properties: %w", err)
	}
	reply, err := l.conn.RequestName(name, dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		return nil, fmt.Errorf("own %s on the private bus: reply %v, %v", name, reply, err)
	}
	return l, nil
}

func busConfig(sock string) string {
	return `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=` + sock + `</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
`
}

// Close stops the fake and its bus.
func (l *Logind) Close() {
	if l.conn != nil {
		l.conn.Close()
	}
	if l.daemon != nil && l.daemon.Process != nil {
		_ = l.daemon.Process.Kill()
		_ = l.daemon.Wait()
	}
}

// Locks returns the locks handed out so far, oldest first.
func (l *Logind) Locks() []Lock {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Lock, len(l.locks))
	for i, lk := range l.locks {
		out[i] = *lk
	}
	return out
}

// Held returns the locks not released, oldest first.
func (l *Logind) Held() []Lock {
	var out []Lock
	for _, lk := range l.Locks() {
		if !lk.Released {
			out = append(out, lk)
		}
	}
	return out
}

// PrepareForSleep sends the signal PrepareForSleep(start), as logind does
// before the PC sleeps (true) and after it woke (false).
func (l *Logind) PrepareForSleep(start bool) error {
	return l.conn.Emit(path, manager+".PrepareForSleep", start)
}

type managerObj struct{ l *Logind }

// Inhibit hands out the write end of a pipe; the lock is released when
// every copy of it is closed. The reply is sent here rather than by godbus
// (the connection's interceptor marks Inhibit calls as expecting none), so
// that our copy of the write end is closed as soon as the reply carrying
// it has been written.
func (m *managerObj) Inhibit(what, who, why, mode string, sender dbus.Sender, call dbus.Message) *dbus.Error {
	l := m.l
	if mode != "block" && mode != "delay" {
		return dbus.MakeFailedError(fmt.Errorf("invalid mode %q", mode))
	}
	if what != "sleep" {
		return dbus.MakeFailedError(fmt.Errorf("the fake inhibits only sleep, not %q", what))
	}
	if mode == "block" && l.opts.RefuseBlock {
		return dbus.NewError("org.freedesktop.DBus.Error.AccessDenied", []any{"Permission denied"})
	}
	var pid uint32
	if err := l.conn.BusObject().Call("org.freedesktop.DBus.GetConnectionUnixProcessID", 0, string(sender)).Store(&pid); err != nil {
		return dbus.MakeFailedError(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return dbus.MakeFailedError(err)
	}
	lk := &Lock{What: what, Who: who, Why: why, Mode: mode, PID: pid}
	fd := dbus.UnixFD(w.Fd())
	reply := &dbus.Message{Type: dbus.TypeMethodReply, Headers: map[dbus.HeaderField]dbus.Variant{
		dbus.FieldDestination: dbus.MakeVariant(string(sender)),
		dbus.FieldReplySerial: dbus.MakeVariant(call.Serial()),
		dbus.FieldSignature:   dbus.MakeVariant(dbus.SignatureOf(fd)),
	}, Body: []any{fd}}
	l.mu.Lock()
	l.locks = append(l.locks, lk)
	l.notifyLocked()
	l.mu.Unlock()
	c := l.conn.Send(reply, nil) // written when Send returns
	w.Close()
	if c.Err != nil {
		r.Close()
		return dbus.MakeFailedError(c.Err)
	}
	go func() {
		_, _ = io.Copy(io.Discard, r) // EOF: every copy of the write end is closed
		r.Close()
		l.mu.Lock()
		lk.Released = true
		l.notifyLocked()
		l.mu.Unlock()
	}()
	return nil
}

// noReply marks Inhibit calls as expecting no reply from godbus: Inhibit
// sends its own.
func noReply(msg *dbus.Message) {
	if msg.Type != dbus.TypeMethodCall {
		return
	}
	if member, _ := msg.Headers[dbus.FieldMember].Value().(string); member == "Inhibit" {
		msg.Flags |= dbus.FlagNoReplyExpected
	}
}

func (l *Logind) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Changed returns a channel closed at the next change of the locks.
func (l *Logind) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// StartT starts a fake logind for t, with its bus in a temporary directory,
// and closes it when t ends. Without dbus-daemon (Debian package
// dbus-daemon) the test is skipped, or fails under CI=true.
func StartT(t testing.TB, opts Options) *Logind {
	t.Helper()
	bin := opts.DBusDaemon
	if bin == "" {
		bin = "dbus-daemon"
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		testenv.Missing(t, "dbus-daemon (Debian package dbus-daemon)")
	}
	opts.DBusDaemon = p
	if opts.Dir == "" {
		// A short path: a unix socket path has at most 107 bytes.
		dir, err := os.MkdirTemp("", "logind")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		opts.Dir = dir
	}
	l, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}
