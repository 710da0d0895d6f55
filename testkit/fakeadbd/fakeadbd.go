package fakeadbd

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"image"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
)

// Options configures a fake phone. Zero values take defaults.
type Options struct {
	Model      string // ro.product.model, default "Pixel 7"
	Product    string // ro.product.name, default "panther"
	DeviceName string // ro.product.device, default "panther"
	Width      int    // screen width, default 720
	Height     int    // screen height, default 1280
	Props      map[string]string

	// Unauthorized makes the phone answer CNXN with AUTH tokens and never
	// accept a signature or key: adb lists it as "unauthorized".
	Unauthorized bool
	// NoShellV2 leaves shell_v2 out of the features and refuses shell,v2
	// streams, like phones before Android 7.
	NoShellV2 bool

	// ScreencapFormat is the pixel format of raw screencap: 1 RGBA_8888
	// (default), 2 RGBX_8888, 4 RGB_565.
	ScreencapFormat int
	// LegacyHeader writes the 12-byte raw header of Android 8 and older.
	LegacyHeader bool
	// BrokenRaw makes raw screencap write a truncated header, so a client
	// must fall back to screencap -p.
	BrokenRaw bool
	// Noise scrambles the screen's colours with noise: a PNG of 480x800 or
	// more then exceeds 1 MiB.
	Noise bool
	// UIDumpFailures makes the first n uiautomator dumps fail with
	// "could not get idle state".
	UIDumpFailures int
	// NoTTY makes `uiautomator dump /dev/tty` fail as on phones where
	// /dev/tty cannot be opened; dumps to a file still work.
	NoTTY bool
	// RecordingSize is the size of each screenrecord file, default 256 KiB.
	RecordingSize int
	// InputDelay delays every input, monkey and am command.
	InputDelay time.Duration
	// MaxPayload is the largest WRTE payload the phone accepts and sends,
	// default 1 MiB.
	MaxPayload uint32
	// Catalogue is what the phone's shop app (capture.SimShop) lists: its
	// `uiautomator dump` shows each product's name above its price
	// (capture.SimOptions.Catalogue).
	Catalogue []capture.SimProduct
	// AppVersions are the versions `dumpsys package` shows
	// (capture.SimOptions.AppVersions).
	AppVersions map[string]protocol.AppVersion
	// Packages are the apps installed on the phone, as `pm` lists them and
	// monkey launches them (capture.SimOptions.Packages): nil, every
	// package except those starting with capture.SimMissingPrefix.
	Packages []string
	// IME installs the input method ADBKeyboard (capture.IMEPackage): `pm
	// path` finds it, `ime list -s` lists it once enabled, and while it is
	// the current input method an ADB_INPUT_B64 broadcast types its
	// decoded text (IMETexts).
	IME bool
	// Locked starts the phone with its screen off and a keyguard without
	// a PIN (capture.SimOptions.Locked).
	Locked bool
}

// InputEvent is one input command as the phone received it, after the
// shell removed quotes: Args[0] is the input subcommand (tap, swipe, text,
// keyevent, ...).
type InputEvent struct {
	Args []string
}

func (e InputEvent) String() string { return strings.Join(e.Args, " ") }

// Phone is a running fake phone.
type Phone struct {
	opts    Options
	addr    string // where it listens, also while away (LeaveNetwork)
	sim     *capture.Simulated
	closing chan struct{}
	wg      sync.WaitGroup

	mu        sync.Mutex
	ln        net.Listener // closed while away (LeaveNetwork)
	conns     map[net.Conn]bool
	unplugged bool
	// distrusted: Distrust was called; the phone answers as unauthorized.
	distrusted bool
	closed     bool
	inputs     []InputEvent
	commands   []string
	signals    []string
	files      map[string][]byte
	procs      map[int]*proc
	nextPID    int
	dumps      int
	shots      int64
	lastFrame  *image.RGBA
	services   []string
	// Input methods: enabled ones and the current one (ime, settings).
	imeEnabled map[string]bool
	imeCurrent string
	imeTexts   []string
	settings   map[string]string // "namespace key" → value
	fault      faults            // hang.go
}

// Start listens on a free loopback port outside 5555-5585 (the range the
// adb server scans for emulators) and serves the phone.
func Start(opts Options) (*Phone, error) {
	if opts.Model == "" {
		opts.Model = "Pixel 7"
	}
	if opts.Product == "" {
		opts.Product = "panther"
	}
	if opts.DeviceName == "" {
		opts.DeviceName = "panther"
	}
	if opts.ScreencapFormat == 0 {
		opts.ScreencapFormat = 1
	}
	if opts.RecordingSize <= 0 {
		opts.RecordingSize = 256 << 10
	}
	if opts.MaxPayload == 0 {
		opts.MaxPayload = 1 << 20
	}
	var ln net.Listener
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("listen for adb connections: %w", err)
		}
		if port := l.Addr().(*net.TCPAddr).Port; port >= 5555 && port <= 5585 {
			l.Close()
			continue
		}
		ln = l
		break
	}
	if ln == nil {
		return nil, errors.New("listen for adb connections: no free port outside 5555-5585")
	}
	p := &Phone{
		opts:    opts,
		ln:      ln,
		closing: make(chan struct{}),
		conns:   map[net.Conn]bool{},
		files:   map[string][]byte{},
		procs:   map[int]*proc{},
		nextPID: 4000,
		sim: capture.NewSimulated(capture.SimOptions{
			Serial: ln.Addr().String(), Model: opts.Model, Width: opts.Width, Height: opts.Height,
			Packages: opts.Packages, IME: opts.IME, Locked: opts.Locked, Catalogue: opts.Catalogue,
			AppVersions: opts.AppVersions,
		}),
		imeEnabled: map[string]bool{latinIME: true},
		imeCurrent: latinIME,
		settings:   map[string]string{"system accelerometer_rotation": "1", "system user_rotation": "0"},
	}
	p.addr = ln.Addr().String()
	p.wg.Go(func() { p.accept(ln) })
	return p, nil
}

// Addr is the address to give `adb connect`; adb uses it as the serial.
func (p *Phone) Addr() string { return p.addr }

// Serial is the serial adb lists the phone under once connected.
func (p *Phone) Serial() string { return p.Addr() }

// Unauthorized reports whether the phone was started in unauthorized mode.
func (p *Phone) Unauthorized() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.opts.Unauthorized || p.distrusted
}

// Distrust makes the phone stop trusting the PC, as a wireless phone that
// reconnects and asks again: it drops every connection and, from then on,
// answers like a phone started with Options.Unauthorized, so adb lists it
// as "unauthorized" once it has connected again.
func (p *Phone) Distrust() {
	p.mu.Lock()
	p.distrusted = true
	for c := range p.conns {
		c.Close()
	}
	procs := p.procsLocked()
	p.mu.Unlock()
	for _, pr := range procs {
		pr.signal("KILL")
	}
}

// Sim is the simulated phone behind the screen.
func (p *Phone) Sim() *capture.Simulated { return p.sim }

func (p *Phone) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.unplugged || p.closed {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = true
		p.acceptedLocked(c)
		p.mu.Unlock()
		p.wg.Go(func() {
			newSession(p, c).serve()
			p.mu.Lock()
			delete(p.conns, c)
			p.mu.Unlock()
		})
	}
}

// Unplug drops every connection and refuses new ones, as if the cable was
// pulled: adb sees the phone go offline and then away. Recordings running
// on the phone are killed.
func (p *Phone) Unplug() {
	p.mu.Lock()
	p.unplugged = true
	for c := range p.conns {
		c.Close()
	}
	procs := p.procsLocked()
	p.mu.Unlock()
	for _, pr := range procs {
		pr.signal("KILL")
	}
}

// Close stops the phone and waits for its goroutines.
func (p *Phone) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.closing)
	for c := range p.conns {
		c.Close()
	}
	procs := p.procsLocked()
	p.mu.Unlock()
	for _, pr := range procs {
		pr.signal("KILL")
	}
	p.mu.Lock()
	ln := p.ln
	p.mu.Unlock()
	err := ln.Close()
	p.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("close fake phone: %w", err)
	}
	return nil
}

func (p *Phone) procsLocked() []*proc {
	out := make([]*proc, 0, len(p.procs))
	for _, pr := range p.procs {
		out = append(out, pr)
	}
	return out
}

// Inputs returns every input command received, oldest first.
func (p *Phone) Inputs() []InputEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]InputEvent, len(p.inputs))
	for i, e := range p.inputs {
		out[i] = InputEvent{Args: append([]string(nil), e.Args...)}
	}
	return out
}

// Commands returns every shell or exec command line received.
func (p *Phone) Commands() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.commands...)
}

// Services returns every service opened (shell,v2,raw:..., exec:..., sync:).
func (p *Phone) Services() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.services...)
}

// Signals returns the signals delivered to processes, as "INT screenrecord".
func (p *Phone) Signals() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.signals...)
}

// File returns the content of a file on the phone.
func (p *Phone) File(path string) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.files[path]
	return bytes.Clone(b), ok
}

// Files lists the paths of the files on the phone.
func (p *Phone) Files() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for k := range p.files {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Processes lists the names of the processes running on the phone.
func (p *Phone) Processes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, pr := range p.procs {
		out = append(out, pr.name)
	}
	sort.Strings(out)
	return out
}

func (p *Phone) features() string {
	f := []string{"cmd", "stat_v2"}
	if !p.opts.NoShellV2 {
		f = append([]string{"shell_v2"}, f...)
	}
	return strings.Join(f, ",")
}

func (p *Phone) banner() string {
	return fmt.Sprintf("device::ro.product.name=%s;ro.product.model=%s;ro.product.device=%s;features=%s",
		p.opts.Product, p.opts.Model, p.opts.DeviceName, p.features())
}

// session is one transport connection from the adb server.
type session struct {
	p       *Phone
	c       net.Conn
	maxData uint32
	done    chan struct{}

	wmu          sync.Mutex
	skipChecksum atomic.Bool

	mu      sync.Mutex
	streams map[uint32]*stream
	nextID  uint32
}

func newSession(p *Phone, c net.Conn) *session {
	return &session{p: p, c: c, maxData: p.opts.MaxPayload, done: make(chan struct{}), streams: map[uint32]*stream{}, nextID: 1}
}

// send writes m; like adbd, it leaves the data checksum zero once both
// sides speak VersionSkipChecksum.
func (s *session) send(m Message) error {
	h := AppendHeader(make([]byte, 0, HeaderSize), m, !s.skipChecksum.Load())
	s.wmu.Lock()
	defer s.wmu.Unlock()
	bufs := net.Buffers{h, m.Data}
	_, err := bufs.WriteTo(s.c)
	return err
}

func (s *session) serve() {
	var wg sync.WaitGroup
	defer func() {
		close(s.done)
		s.c.Close()
		s.mu.Lock()
		for _, st := range s.streams {
			st.remoteClosed()
		}
		s.mu.Unlock()
		wg.Wait()
	}()
	online := false
	for {
		m, err := ReadMessage(s.c, max(s.p.opts.MaxPayload, 1<<20))
		if err != nil {
			return
		}
		switch m.Command {
		case CmdCNXN:
			if m.Arg1 > 0 && m.Arg1 < s.maxData {
				s.maxData = m.Arg1
			}
			s.skipChecksum.Store(m.Arg0 >= VersionSkipChecksum)
			if s.p.Unauthorized() {
				if s.sendToken() != nil {
					return
				}
				continue
			}
			if s.send(Message{Command: CmdCNXN, Arg0: VersionSkipChecksum, Arg1: s.p.opts.MaxPayload, Data: []byte(s.p.banner())}) != nil {
				return
			}
			online = true
		case CmdAUTH:
			// Unauthorized mode: reject every signature with a new token and
			// leave a public key unanswered (the user never accepts).
			if s.p.Unauthorized() && m.Arg0 == AuthSignature {
				if s.sendToken() != nil {
					return
				}
			}
		case CmdOPEN:
			if !online {
				return
			}
			if s.p.swallowOpen(s.c, strings.TrimRight(string(m.Data), "\x00")) {
				continue // hung: no reply at all (hang.go)
			}
			st := s.open(m.Arg0, strings.TrimRight(string(m.Data), "\x00"), &wg)
			if st == nil {
				if s.send(Message{Command: CmdCLSE, Arg0: 0, Arg1: m.Arg0}) != nil {
					return
				}
			}
		case CmdOKAY:
			if st := s.stream(m.Arg1); st != nil {
				st.okayed(m.Arg0)
			}
		case CmdWRTE:
			st := s.stream(m.Arg1)
			if st == nil {
				continue
			}
			st.in.write(m.Data)
			if s.send(Message{Command: CmdOKAY, Arg0: st.local, Arg1: st.remote}) != nil {
				return
			}
		case CmdCLSE:
			if st := s.stream(m.Arg1); st != nil {
				st.remoteClosed()
			}
		}
	}
}

func (s *session) sendToken() error {
	tok := make([]byte, 20)
	_, _ = rand.Read(tok)
	return s.send(Message{Command: CmdAUTH, Arg0: AuthToken, Data: tok})
}

func (s *session) stream(local uint32) *stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[local]
}

// open starts the service named by an OPEN; nil when there is no such
// service.
func (s *session) open(remote uint32, service string, wg *sync.WaitGroup) *stream {
	h := s.p.handler(service)
	if h == nil {
		return nil
	}
	s.mu.Lock()
	st := &stream{s: s, local: s.nextID, remote: remote, okay: make(chan struct{}, 1), closed: make(chan struct{}), in: newInbuf()}
	s.nextID++
	s.streams[st.local] = st
	s.mu.Unlock()
	s.p.mu.Lock()
	s.p.services = append(s.p.services, service)
	s.p.mu.Unlock()
	if s.send(Message{Command: CmdOKAY, Arg0: st.local, Arg1: remote}) != nil {
		st.remoteClosed()
	}
	wg.Go(func() {
		h(st)
		st.finish()
	})
	return st
}

// stream is one open service.
type stream struct {
	s             *session
	local, remote uint32
	okay          chan struct{}
	in            *inbuf
	closeOnce     sync.Once
	closed        chan struct{} // closed by the host or the session ended
	finished      bool
}

func (st *stream) okayed(remote uint32) {
	if st.remote == 0 {
		st.remote = remote
	}
	select {
	case st.okay <- struct{}{}:
	default:
	}
}

func (st *stream) remoteClosed() {
	st.closeOnce.Do(func() {
		close(st.closed)
		st.in.close()
	})
}

// Write sends p in WRTE messages of at most maxData bytes, each waiting for
// the host's OKAY before the next.
func (st *stream) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), int(st.s.maxData))]
		select {
		case <-st.closed:
			return n, io.ErrClosedPipe
		default:
		}
		if err := st.s.send(Message{Command: CmdWRTE, Arg0: st.local, Arg1: st.remote, Data: chunk}); err != nil {
			return n, err
		}
		select {
		case <-st.okay:
		case <-st.closed:
			return n, io.ErrClosedPipe
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

func (st *stream) Read(p []byte) (int, error) { return st.in.read(p) }

// finish closes the stream from the phone's side.
func (st *stream) finish() {
	select {
	case <-st.closed:
	default:
		_ = st.s.send(Message{Command: CmdCLSE, Arg0: st.local, Arg1: st.remote})
	}
	st.remoteClosed()
	st.s.mu.Lock()
	delete(st.s.streams, st.local)
	st.s.mu.Unlock()
}

// inbuf holds the data the host wrote to a stream.
type inbuf struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    bytes.Buffer
	closed bool
}

func newInbuf() *inbuf {
	b := &inbuf{}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *inbuf) write(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.buf.Write(p)
	}
	b.cond.Broadcast()
}

func (b *inbuf) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.cond.Broadcast()
}

func (b *inbuf) read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.buf.Len() == 0 && !b.closed {
		b.cond.Wait()
	}
	if b.buf.Len() > 0 {
		return b.buf.Read(p)
	}
	return 0, io.EOF
}

// handler returns the function serving service, or nil.
func (p *Phone) handler(service string) func(*stream) {
	switch {
	case service == "sync:":
		return p.serveSync
	case strings.HasPrefix(service, "reboot:"):
		return p.serveReboot
	case strings.HasPrefix(service, "exec:"):
		cmd := strings.TrimPrefix(service, "exec:")
		return func(st *stream) { p.runScript(st, cmd, st, io.Discard) }
	case strings.HasPrefix(service, "shell"):
		args, cmd, ok := strings.Cut(strings.TrimPrefix(service, "shell"), ":")
		if !ok || (args != "" && args[0] != ',') {
			return nil
		}
		v2 := false
		for _, a := range strings.Split(args, ",") {
			if a == "v2" {
				v2 = true
			}
		}
		if v2 && p.opts.NoShellV2 {
			return nil
		}
		if !v2 {
			return func(st *stream) { p.runScript(st, cmd, st, st) }
		}
		return func(st *stream) {
			out := &packetWriter{st: st, id: 1}
			errw := &packetWriter{st: st, id: 2}
			code := p.runScript(st, cmd, out, errw)
			_, _ = st.Write([]byte{3, 1, 0, 0, 0, byte(code)})
		}
	}
	return nil
}

// packetWriter frames writes as shell v2 packets.
type packetWriter struct {
	st *stream
	id byte
}

func (w *packetWriter) Write(p []byte) (int, error) {
	const max = 256 << 10
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), max)]
		b := make([]byte, 0, 5+len(chunk))
		b = append(b, w.id, byte(len(chunk)), byte(len(chunk)>>8), byte(len(chunk)>>16), byte(len(chunk)>>24))
		b = append(b, chunk...)
		if _, err := w.st.Write(b); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// proc is a long-running command (screenrecord).
type proc struct {
	pid  int
	name string
	sig  chan string
}

func (pr *proc) signal(sig string) {
	select {
	case pr.sig <- sig:
	default:
	}
}

// shellEnv is the state of one shell invocation.
type shellEnv struct {
	st     *stream
	pid    int
	status int
	stdin  io.Reader // what the stage before wrote, in a pipeline; nil otherwise
	stdout io.Writer
	stderr io.Writer
}

// runScript runs a command line and returns the exit status of the last
// command.
func (p *Phone) runScript(st *stream, script string, stdout, stderr io.Writer) int {
	p.mu.Lock()
	p.commands = append(p.commands, script)
	p.nextPID++
	env := &shellEnv{st: st, pid: p.nextPID, stdout: stdout, stderr: stderr}
	p.mu.Unlock()
	cmds, and, err := splitScript(script)
	if err != nil {
		fmt.Fprintf(stderr, "/system/bin/sh: %v\n", err)
		return 2
	}
	for i, c := range cmds {
		if i > 0 && and[i-1] && env.status != 0 {
			continue
		}
		if stages := splitPipe(c); len(stages) > 1 {
			status, ok := p.pipeline(env, stages)
			if !ok {
				return 2
			}
			env.status = status
			continue
		}
		words, err := env.words(c)
		if err != nil {
			return 2
		}
		if len(words) == 0 {
			continue
		}
		exec := false
		if words[0] == "exec" && len(words) > 1 {
			words, exec = words[1:], true
		}
		env.status = p.command(env, words, exec)
		if exec {
			break
		}
	}
	return env.status
}

// words splits one simple command into its words as sh does, reporting a
// syntax error on the shell's error output.
func (env *shellEnv) words(c string) ([]string, error) {
	words, err := splitWords(c, func(name byte) string {
		if name == '$' {
			return strconv.Itoa(env.pid)
		}
		return strconv.Itoa(env.status)
	})
	if err != nil {
		fmt.Fprintf(env.stderr, "/system/bin/sh: %v\n", err)
	}
	return words, err
}

// pipeline runs the stages of a pipeline one after the other, each
// reading what the one before wrote, and returns the last one's exit
// status; ok is false on a syntax error. An empty stage is a syntax error,
// as in sh.
func (p *Phone) pipeline(env *shellEnv, stages []string) (status int, ok bool) {
	var in io.Reader = strings.NewReader("")
	for i, stage := range stages {
		words, err := env.words(stage)
		if err != nil {
			return 0, false
		}
		if len(words) == 0 {
			fmt.Fprintln(env.stderr, "/system/bin/sh: syntax error: unexpected '|'")
			return 0, false
		}
		var out bytes.Buffer
		st := *env
		st.stdin = in
		if i < len(stages)-1 {
			st.stdout = &out
		}
		status = p.command(&st, words, false)
		in = &out
	}
	return status, true
}

// sleep waits d, or until the phone closes or the stream is closed.
func (p *Phone) sleep(st *stream, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.closing:
	case <-st.closed:
	}
	return false
}

func (p *Phone) command(env *shellEnv, args []string, exec bool) int {
	ctx := context.Background()
	out, errw := env.stdout, env.stderr
	switch args[0] {
	case "true":
		return 0
	case "false":
		return 1
	case "echo":
		fmt.Fprintln(out, strings.Join(args[1:], " "))
		return 0
	case "printf":
		if len(args) > 1 {
			fmt.Fprint(out, printf(args[1], args[2:]))
		}
		return 0
	case "getprop":
		return p.getprop(out, args[1:])
	case "screencap":
		return p.screencap(ctx, out, errw, args[1:])
	case "uiautomator":
		return p.uiautomator(ctx, out, errw, args[1:])
	case "input":
		return p.input(ctx, env, args[1:])
	case "monkey":
		return p.monkey(ctx, env, args[1:])
	case "pm":
		return p.pm(out, errw, args[1:])
	case "am":
		if !p.sleep(env.st, p.opts.InputDelay) {
			return 130
		}
		return p.am(ctx, out, errw, args[1:])
	case "wm":
		return p.wm(ctx, out, errw, args[1:])
	case "ime":
		return p.ime(out, errw, args[1:])
	case "settings":
		return p.settingsCmd(ctx, out, errw, args[1:])
	case "dumpsys":
		return p.dumpsys(out, errw, args[1:])
	case "df":
		return p.df(out, args[1:])
	case "grep":
		return grep(env, args[1:])
	case "screenrecord":
		pid := env.pid
		if !exec {
			p.mu.Lock()
			p.nextPID++
			pid = p.nextPID
			p.mu.Unlock()
		}
		return p.screenrecord(env, pid, args[1:])
	case "date":
		return p.date(out, errw, args[1:])
	case "logcat":
		return p.logcat(env, args[1:])
	case "kill":
		return p.kill(errw, args[1:])
	case "pkill":
		return p.pkill(args[1:])
	case "rm":
		return p.rm(errw, args[1:])
	case "sleep":
		secs, err := strconv.ParseFloat(safeArg(args, 1), 64)
		if err != nil {
			fmt.Fprintf(errw, "sleep: invalid number '%s'\n", safeArg(args, 1))
			return 1
		}
		if !p.sleep(env.st, time.Duration(secs*float64(time.Second))) {
			return 130
		}
		return 0
	}
	fmt.Fprintf(errw, "/system/bin/sh: %s: inaccessible or not found\n", args[0])
	return 127
}

func safeArg(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}

func (p *Phone) props() map[string]string {
	m := map[string]string{
		"ro.product.model":          p.opts.Model,
		"ro.product.name":           p.opts.Product,
		"ro.product.device":         p.opts.DeviceName,
		"ro.product.manufacturer":   "Google",
		"ro.build.version.sdk":      "33",
		"ro.build.version.release":  "13",
		"ro.serialno":               p.Serial(),
		"sys.boot_completed":        "1",
		"persist.sys.timezone":      "Europe/Berlin",
		"persist.sys.locale":        "ja-JP",
		"ro.build.characteristics":  "nosdcard",
		"ro.product.cpu.abi":        "arm64-v8a",
		"ro.sf.lcd_density":         "420",
		"ro.build.type":             "user",
		"ro.debuggable":             "0",
		"service.adb.root":          "0",
		"ro.adb.secure":             "1",
		"init.svc.adbd":             "running",
		"ro.build.fingerprint":      "google/panther/panther:13/TQ3A.230901.001/10750268:user/release-keys",
		"ro.build.display.id":       "TQ3A.230901.001",
		"ro.product.brand":          "google",
		"ro.hardware":               "panther",
		"ro.boot.hardware.platform": "gs201",
	}
	for k, v := range p.opts.Props {
		m[k] = v
	}
	return m
}

func (p *Phone) getprop(out io.Writer, args []string) int {
	m := p.props()
	if len(args) > 0 {
		fmt.Fprintln(out, m[args[0]])
		return 0
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(out, "[%s]: [%s]\n", k, m[k])
	}
	return 0
}
