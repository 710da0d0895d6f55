package adb

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// DefaultAddr is where the adb server listens unless ANDROID_ADB_SERVER_PORT
// says otherwise.
const DefaultAddr = "127.0.0.1:5037"

// maxHexPayload bounds a length-prefixed reply (four hex digits allow 64 KiB).
const maxHexPayload = 0xffff

// Options configures a Client. Zero values take defaults.
type Options struct {
	// Addr is the adb server's address. Default: 127.0.0.1 with the port of
	// ANDROID_ADB_SERVER_PORT when set, else 127.0.0.1:5037.
	Addr string
	// ADBPath is the adb binary run as `adb start-server` when no server
	// answers. Default: "adb" looked up in PATH. The binary is never run for
	// anything else.
	ADBPath string
	// NoStart disables starting the server.
	NoStart bool
	// DialTimeout bounds one connection to the server; default 5s.
	DialTimeout time.Duration
}

// Client talks to one adb server. It is safe for concurrent use; every
// request opens its own connection.
type Client struct {
	addr        string
	adbPath     string
	noStart     bool
	dialTimeout time.Duration

	startMu   sync.Mutex
	lastStart time.Time
	startErr  error
}

// New returns a client for the server at opts.Addr.
func New(opts Options) *Client {
	c := &Client{addr: opts.Addr, adbPath: opts.ADBPath, noStart: opts.NoStart, dialTimeout: opts.DialTimeout}
	if c.addr == "" {
		c.addr = DefaultAddr
		if p := os.Getenv("ANDROID_ADB_SERVER_PORT"); p != "" {
			if n, err := strconv.Atoi(p); err == nil && n > 0 && n < 65536 {
				c.addr = net.JoinHostPort("127.0.0.1", p)
			}
		}
	}
	if c.adbPath == "" {
		c.adbPath = "adb"
	}
	if c.dialTimeout <= 0 {
		c.dialTimeout = 5 * time.Second
	}
	return c
}

// Addr returns the server address the client uses.
func (c *Client) Addr() string { return c.addr }

// ErrServerGone: nothing answers at the adb server's address (connection
// refused), and starting a server there did not help or was not allowed.
// The phones behind it are out of reach until an adb server runs again.
var ErrServerGone = errors.New("adb server gone")

// ServerError is a FAIL reply of the adb server (or of a device service
// relayed by it), with the server's message.
type ServerError struct {
	Request string // the request that failed, without payload beyond the service name
	Msg     string
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("adb server refused %q: %s", e.Request, e.Msg)
}

// conn is one connection to the server whose I/O stops when a context ends.
type conn struct {
	net.Conn
	r    *bufio.Reader
	stop func() bool
	ctx  context.Context
}

func (c *conn) Read(p []byte) (int, error) { return c.r.Read(p) }

// Close closes the connection and detaches it from its context.
func (c *conn) Close() error {
	c.stop()
	return c.Conn.Close()
}

// wrap turns an I/O error into the context's error when the context ended
// (the deadline set by the context is what broke the I/O).
func (c *conn) wrap(err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctxErr(c.ctx); cerr != nil {
		return cerr
	}
	return err
}

func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// dial connects to the server, starting it once when nothing listens.
func (c *Client) dial(ctx context.Context) (*conn, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: c.dialTimeout}
	nc, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil && errors.Is(err, syscall.ECONNREFUSED) && !c.noStart {
		if serr := c.startServer(ctx); serr != nil {
			return nil, fmt.Errorf("connect to adb server at %s: %w: %w (and %w)", c.addr, ErrServerGone, err, serr)
		}
		nc, err = d.DialContext(ctx, "tcp", c.addr)
	}
	if err != nil {
		if cerr := ctxErr(ctx); cerr != nil {
			return nil, cerr
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("connect to adb server at %s: %w: %w", c.addr, ErrServerGone, err)
		}
		return nil, fmt.Errorf("connect to adb server at %s: %w", c.addr, err)
	}
	cn := &conn{Conn: nc, r: bufio.NewReaderSize(nc, 64<<10), ctx: ctx}
	cn.stop = context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	return cn, nil
}

// startServer runs `adb start-server` for the client's port, at most once
// per 10 seconds.
func (c *Client) startServer(ctx context.Context) error {
	c.startMu.Lock()
	defer c.startMu.Unlock()
	if !c.lastStart.IsZero() && time.Since(c.lastStart) < 10*time.Second {
		return c.startErr
	}
	c.lastStart = time.Now()
	_, port, err := net.SplitHostPort(c.addr)
	if err != nil {
		c.startErr = fmt.Errorf("start adb server: bad address %q: %w", c.addr, err)
		return c.startErr
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(sctx, c.adbPath, "start-server")
	cmd.Env = append(os.Environ(), "ANDROID_ADB_SERVER_PORT="+port)
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.startErr = fmt.Errorf("start adb server with %s start-server: %w: %s", c.adbPath, err, trimOut(out))
		return c.startErr
	}
	c.startErr = nil
	return nil
}

func trimOut(b []byte) string {
	const max = 300
	s := string(b)
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// send writes one length-prefixed request.
func (c *conn) send(req string) error {
	if len(req) > maxHexPayload {
		return fmt.Errorf("send request: %d bytes exceeds the 65535-byte limit", len(req))
	}
	b := make([]byte, 0, 4+len(req))
	b = fmt.Appendf(b, "%04x", len(req))
	b = append(b, req...)
	if _, err := c.Conn.Write(b); err != nil {
		return c.wrap(fmt.Errorf("send request %q: %w", serviceName(req), err))
	}
	return nil
}

// request sends req and reads the OKAY/FAIL status.
func (c *conn) request(req string) error {
	if err := c.send(req); err != nil {
		return err
	}
	if err := readStatus(c.r, serviceName(req)); err != nil {
		return c.wrap(err)
	}
	return nil
}

// serviceName shortens a request for error messages: the service without
// its arguments for shell and exec (commands may carry typed text).
func serviceName(req string) string {
	for _, p := range []string{"shell,v2,raw:", "shell:", "exec:"} {
		if len(req) > len(p) && req[:len(p)] == p {
			cmd := req[len(p):]
			for i, r := range cmd {
				if r == ' ' {
					cmd = cmd[:i]
					break
				}
			}
			return p + cmd
		}
	}
	return req
}

// readStatus reads OKAY, or FAIL and its message as a *ServerError.
func readStatus(r io.Reader, req string) error {
	var st [4]byte
	if _, err := io.ReadFull(r, st[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("read reply to %q: connection closed by the adb server", req)
		}
		return fmt.Errorf("read reply to %q: %w", req, err)
	}
	switch string(st[:]) {
	case "OKAY":
		return nil
	case "FAIL":
		msg, err := readHexString(r)
		if err != nil {
			return fmt.Errorf("read failure message for %q: %w", req, err)
		}
		return &ServerError{Request: req, Msg: msg}
	default:
		return fmt.Errorf("read reply to %q: want OKAY or FAIL, got %q", req, st[:])
	}
}

// readHexString reads four hex digits and that many bytes.
func readHexString(r io.Reader) (string, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return "", fmt.Errorf("read length prefix: %w", err)
	}
	n, err := ParseHexLength(h[:])
	if err != nil {
		return "", err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("read %d-byte payload: %w", n, err)
	}
	return string(b), nil
}

// ParseHexLength parses the four hex digits that prefix every length-framed
// message of the host protocol.
func ParseHexLength(h []byte) (int, error) {
	if len(h) != 4 {
		return 0, fmt.Errorf("parse length prefix: want 4 hex digits, got %d bytes", len(h))
	}
	n := 0
	for _, c := range h {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, fmt.Errorf("parse length prefix %q: not hex", h)
		}
		n = n<<4 | int(v)
	}
	return n, nil
}

// hostQuery sends a host request and reads one length-prefixed reply.
func (c *Client) hostQuery(ctx context.Context, req string) (string, error) {
	cn, err := c.dial(ctx)
	if err != nil {
		return "", err
	}
	defer cn.Close()
	if err := cn.request(req); err != nil {
		return "", err
	}
	s, err := readHexString(cn.r)
	if err != nil {
		return "", cn.wrap(fmt.Errorf("read reply to %q: %w", req, err))
	}
	return s, nil
}

// Version returns the adb server's protocol version (41 for adb 29).
func (c *Client) Version(ctx context.Context) (int, error) {
	s, err := c.hostQuery(ctx, "host:version")
	if err != nil {
		return 0, fmt.Errorf("query adb server version: %w", err)
	}
	n, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("query adb server version: reply %q is not hex", s)
	}
	return int(n), nil
}

// Devices lists the devices the server knows, with their states.
func (c *Client) Devices(ctx context.Context) ([]DeviceEntry, error) {
	s, err := c.hostQuery(ctx, "host:devices")
	if err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	ds, err := ParseDeviceList(s)
	if err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	return ds, nil
}

// DevicesLong lists the devices the server knows, with their states and
// models (host:devices-l, what `adb devices -l` shows).
func (c *Client) DevicesLong(ctx context.Context) ([]DeviceEntry, error) {
	s, err := c.hostQuery(ctx, "host:devices-l")
	if err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	ds, err := ParseDeviceListLong(s)
	if err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	return ds, nil
}

// TrackDevices calls fn with the full device list at once and after every
// change, until ctx ends (it then returns the context's error) or the
// connection to the server fails.
func (c *Client) TrackDevices(ctx context.Context, fn func([]DeviceEntry)) error {
	cn, err := c.dial(ctx)
	if err != nil {
		return fmt.Errorf("track devices: %w", err)
	}
	defer cn.Close()
	if err := cn.request("host:track-devices"); err != nil {
		return fmt.Errorf("track devices: %w", err)
	}
	for {
		s, err := readHexString(cn.r)
		if err != nil {
			return fmt.Errorf("track devices: %w", cn.wrap(err))
		}
		ds, err := ParseDeviceList(s)
		if err != nil {
			return fmt.Errorf("track devices: %w", err)
		}
		fn(ds)
	}
}

// Features returns the features the device announced (shell_v2, cmd, ...).
func (c *Client) Features(ctx context.Context, serial string) ([]string, error) {
	s, err := c.hostQuery(ctx, "host-serial:"+serial+":features")
	if err != nil {
		return nil, fmt.Errorf("query features of %s: %w", serial, err)
	}
	return splitFeatures(s), nil
}

func splitFeatures(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' || s[i] == '\n' {
			if f := s[start:i]; f != "" {
				out = append(out, f)
			}
			start = i + 1
		}
	}
	return out
}

// Stream is an open device service: the raw byte stream after OKAY. Closing
// it closes the service on the device side too. Its I/O fails once the
// context it was opened with ends.
type Stream struct {
	c *conn
}

// Read reads from the service.
func (s *Stream) Read(p []byte) (int, error) {
	n, err := s.c.Read(p)
	if err != nil && err != io.EOF {
		err = s.c.wrap(err)
	}
	return n, err
}

// Write writes to the service.
func (s *Stream) Write(p []byte) (int, error) {
	n, err := s.c.Conn.Write(p)
	return n, s.c.wrap(err)
}

// CloseWrite half-closes the connection to the server.
func (s *Stream) CloseWrite() error {
	if tc, ok := s.c.Conn.(*net.TCPConn); ok {
		return tc.CloseWrite()
	}
	return nil
}

// Close closes the service.
func (s *Stream) Close() error { return s.c.Close() }

// Open connects to the device with serial and opens service on it
// ("exec:screencap", "shell,v2,raw:ls", "sync:", ...).
func (c *Client) Open(ctx context.Context, serial, service string) (*Stream, error) {
	cn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	if err := cn.request("host:transport:" + serial); err != nil {
		cn.Close()
		return nil, err
	}
	if err := cn.request(service); err != nil {
		cn.Close()
		return nil, err
	}
	return &Stream{c: cn}, nil
}

// Exec runs cmd through the exec: service (no shell protocol, no PTY: the
// bytes are exactly what the command wrote to stdout) and returns at most
// limit bytes of its output; more is an error.
func (c *Client) Exec(ctx context.Context, serial, cmd string, limit int64) ([]byte, error) {
	s, err := c.Open(ctx, serial, "exec:"+cmd)
	if err != nil {
		return nil, fmt.Errorf("exec %s on %s: %w", serviceName("exec:"+cmd), serial, err)
	}
	defer s.Close()
	b, err := io.ReadAll(io.LimitReader(s, limit+1))
	if err != nil {
		return nil, fmt.Errorf("exec %s on %s: %w", serviceName("exec:"+cmd), serial, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("exec %s on %s: output exceeds %d bytes", serviceName("exec:"+cmd), serial, limit)
	}
	return b, nil
}
