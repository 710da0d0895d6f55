package fakewda

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/edgeagent/edgeagent/capture"
)

// Options configures a fake iPhone. Zero values take defaults.
type Options struct {
	UDID       string // default "00008110-000A1B2C3D4E5F60"
	Model      string // default "iPhone 15" (device/info "model"/"name")
	IOSVersion string // default "17.5.1"
	Scale      int    // default 3
	// WidthPt and HeightPt are the screen size in points, default 393 x 852.
	WidthPt, HeightPt int
	// Catalogue is what the shop app lists (as capture.SimOptions.Catalogue).
	Catalogue []capture.SimProduct
	// Passcode: the phone has a passcode, so /wda/unlock cannot unlock it.
	Passcode bool
	// Battery is the battery level, 0..1; 0 (or out of range) takes the
	// default 0.8. SetBattery sets any level and the charging state.
	Battery float64
}

// Defaults of Options.
const (
	DefaultUDID       = "00008110-000A1B2C3D4E5F60"
	DefaultModel      = "iPhone 15"
	DefaultIOSVersion = "17.5.1"
	DefaultScale      = 3
	DefaultWidthPt    = 393
	DefaultHeightPt   = 852
	DefaultBattery    = 0.8
)

// Battery states of /wda/batteryInfo (UIDeviceBatteryState).
const (
	BatteryUnplugged = 1
	BatteryCharging  = 2
	BatteryFull      = 3
)

// Phone is a fake iPhone running WebDriverAgent.
type Phone struct {
	opts   Options
	addr   string
	screen *capture.Simulated

	handlers sync.WaitGroup // requests being served

	mu       sync.Mutex
	closed   bool
	gen      *generation // nil while dropped
	session  string      // the active session ("" for none)
	sessions int         // sessions created
	locked   bool
	hang     chan struct{} // non-nil while hanging; closed on release
	pending  int           // requests held by Hang
	typed    string
	requests []string
	received []Request
	level    float64
	state    int
	running  map[string]bool // apps launched and not terminated
	launches map[string]launchArgs
}

// launchArgs are the arguments and environment an app was last launched
// with through /wda/apps/launch.
type launchArgs struct {
	Args []string          `json:"args"`
	Env  map[string]string `json:"env"`
}

// generation is one run of the HTTP server, from Start or Restore to Drop.
type generation struct {
	srv    *http.Server
	gone   chan struct{} // closed by Drop
	served chan struct{} // closed when Serve returned
}

// Start starts a fake iPhone listening on 127.0.0.1 on a free port.
func Start(opts Options) (*Phone, error) {
	if opts.UDID == "" {
		opts.UDID = DefaultUDID
	}
	if opts.Model == "" {
		opts.Model = DefaultModel
	}
	if opts.IOSVersion == "" {
		opts.IOSVersion = DefaultIOSVersion
	}
	if opts.Scale <= 0 {
		opts.Scale = DefaultScale
	}
	if opts.WidthPt <= 0 {
		opts.WidthPt = DefaultWidthPt
	}
	if opts.HeightPt <= 0 {
		opts.HeightPt = DefaultHeightPt
	}
	if opts.Battery <= 0 || opts.Battery > 1 {
		opts.Battery = DefaultBattery
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakewda: listen: %w", err)
	}
	p := &Phone{
		opts: opts,
		addr: ln.Addr().String(),
		// The screen is in pixels: points times the scale. iOS types any
		// text, so the simulated phone has the input method for text
		// beyond ASCII.
		screen: capture.NewSimulated(capture.SimOptions{
			Serial: opts.UDID, Model: opts.Model,
			Width: opts.WidthPt * opts.Scale, Height: opts.HeightPt * opts.Scale,
			IME: true, Catalogue: opts.Catalogue,
		}),
		level:    opts.Battery,
		state:    BatteryUnplugged,
		running:  map[string]bool{},
		launches: map[string]launchArgs{},
	}
	p.serve(ln)
	return p, nil
}

// serve starts a generation of the HTTP server on ln. p.mu is held or p
// is not shared yet.
func (p *Phone) serve(ln net.Listener) {
	g := &generation{gone: make(chan struct{}), served: make(chan struct{})}
	g.srv = &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.handle(g, w, r) }),
		ReadHeaderTimeout: 10 * time.Second,
	}
	p.gen = g
	go func() {
		defer close(g.served)
		_ = g.srv.Serve(ln)
	}()
}

// URL returns the base URL of its WebDriverAgent, http://127.0.0.1:PORT.
func (p *Phone) URL() string { return "http://" + p.addr }

// UDID returns the phone's UDID.
func (p *Phone) UDID() string { return p.opts.UDID }

// Close stops the phone: its listener and connections close, and the
// requests Hang holds return unanswered. It waits for every request being
// served to return.
func (p *Phone) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	g := p.gen
	p.gen = nil
	p.mu.Unlock()
	if g != nil {
		g.stop()
	}
	p.handlers.Wait()
	return nil
}

// stop closes the generation's listener and connections and wakes the
// requests it holds.
func (g *generation) stop() {
	close(g.gone)
	_ = g.srv.Close()
	<-g.served
}

// Screen returns the simulated screen behind the phone.
func (p *Phone) Screen() *capture.Simulated { return p.screen }

// SetLocked locks or unlocks the phone. A locked phone reports
// /wda/locked true, its screenshot and source show the lock screen, and
// W3C actions do not reach the app behind it.
func (p *Phone) SetLocked(locked bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.locked = locked
}

// Locked reports whether the phone is locked.
func (p *Phone) Locked() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.locked
}

// Hang makes every request hang (true): it is read and never answered
// until Hang(false), Drop or Close, or until its client gives up.
// Hang(false) answers the requests held.
func (p *Phone) Hang(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.hang == nil:
		p.hang = make(chan struct{})
	case !on && p.hang != nil:
		close(p.hang)
		p.hang = nil
	}
}

// Pending returns how many requests Hang holds now.
func (p *Phone) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending
}

// Drop takes WebDriverAgent away: the listener and every connection
// close, so connecting is refused, and requests Hang holds return
// unanswered.
func (p *Phone) Drop() {
	p.mu.Lock()
	g := p.gen
	p.gen = nil
	p.mu.Unlock()
	if g != nil {
		g.stop()
	}
}

// Restore brings WebDriverAgent back after Drop, listening on the same
// port, as after a restart: the sessions are gone, so old session ids
// answer "invalid session id". Restoring a phone that was not dropped does
// nothing.
func (p *Phone) Restore() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("fakewda: restore: the phone is closed")
	}
	if p.gen != nil {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("fakewda: restore: listen again on %s: %w", p.addr, err)
	}
	p.session = ""
	p.serve(ln)
	return nil
}

// Typed returns the text received through /wda/keys, concatenated.
func (p *Phone) Typed() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.typed
}

// Request is a request as it reached the phone.
type Request struct {
	Method, Path string
	// At is when it arrived, before Hang held it or it was answered.
	At time.Time
}

// Received returns every request that reached the phone, in the order
// they arrived, answered or not (those Hang held included): a test finds
// there whether anything reached WDA after a moment.
func (p *Phone) Received() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.received...)
}

// Requests returns "METHOD /path" of every request answered, in order.
func (p *Phone) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}

// SessionID returns the active session's id, "" when there is none.
func (p *Phone) SessionID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.session
}

// SetBattery sets the battery level (0..1) and state (BatteryUnplugged,
// BatteryCharging or BatteryFull) /wda/batteryInfo reports.
func (p *Phone) SetBattery(level float64, state int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.level, p.state = level, state
}

// handle serves one request of generation g: it waits while the phone
// hangs, then routes it, and records it once answered.
func (p *Phone) handle(g *generation, w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		panic(http.ErrAbortHandler)
	}
	p.handlers.Add(1)
	p.received = append(p.received, Request{Method: r.Method, Path: r.URL.Path, At: time.Now()})
	p.mu.Unlock()
	defer p.handlers.Done()
	if !p.waitHang(g, r) {
		// Unanswered: the client gave up, or WDA went away.
		panic(http.ErrAbortHandler)
	}
	p.route(w, r)
	p.mu.Lock()
	p.requests = append(p.requests, r.Method+" "+r.URL.Path)
	p.mu.Unlock()
}

// waitHang holds a request while the phone hangs. It reports false when
// the request is to go unanswered.
func (p *Phone) waitHang(g *generation, r *http.Request) bool {
	for {
		p.mu.Lock()
		h := p.hang
		if h == nil {
			p.mu.Unlock()
			return true
		}
		p.pending++
		p.mu.Unlock()
		var ok bool
		select {
		case <-h:
			ok = true
		case <-r.Context().Done():
		case <-g.gone:
		}
		p.mu.Lock()
		p.pending--
		p.mu.Unlock()
		if !ok {
			return false
		}
	}
}
