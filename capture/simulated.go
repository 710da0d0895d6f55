package capture

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"image"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

// SimOpRecordAbort is the History entry of an aborted recording. The other
// History ops are the protocol step ops: protocol.OpScreenshot, OpUIDump,
// OpTap, OpSwipe, OpText, OpKey, OpLaunch, OpRecordStart and OpRecordStop.
const SimOpRecordAbort = "record_abort"

// SimLauncher is the package in the foreground of a fresh Simulated phone and
// after KEYCODE_HOME.
const SimLauncher = "com.android.launcher3"

// SimOptions configures a Simulated phone. Zero values take defaults.
type SimOptions struct {
	Serial string   // default "sim-0"
	Model  string   // default "SimPhone"
	Tags   []string // selector tags
	Width  int      // screen width in pixels, default 720
	Height int      // screen height in pixels, default 1280
	// Latency is added to every operation (before it takes effect); SetLatency
	// overrides it per operation.
	Latency time.Duration
	// RecordingSize is the size of the media payload of every recording, in
	// bytes; default 64 KiB. Large values stream without being held in memory.
	RecordingSize int64
	// RecordLimit is the phone's screenrecord time limit: a recording not
	// stopped within it ends on its own, and is reported cut
	// (LimitedRecording); default DefaultRecordLimit.
	RecordLimit time.Duration
	// Packages are the apps installed on the phone (SimLauncher always
	// is). nil: every package is installed except those whose name starts
	// with SimMissingPrefix. Launching one that is not installed fails
	// with an *AppNotInstalledError.
	Packages []string
	// Locked starts the phone with its screen off and its keyguard shown
	// (a swipe lock, no PIN): wake turns the screen on, unlock dismisses
	// the keyguard.
	Locked bool
	// IME installs the input method that types text beyond ASCII
	// (IMEPackage): without it, such text is refused as on a phone
	// reached over adb (a *NoIMEError).
	IME bool
	// Catalogue is what the shop app (SimShop) lists instead of its
	// numbered items: a row per product, its name above its price, as a
	// shop's list shows them. A vertical swipe scrolls the list.
	Catalogue []SimProduct
	// AppVersions are the versions of installed apps (the key is the
	// package); an app not listed has SimAppVersion.
	AppVersions map[string]protocol.AppVersion
}

// SimShop is the package of the simulated phone's shop app.
const SimShop = "com.example.shop"

// SimProduct is one product of SimOptions.Catalogue: its name and the price
// text the shop shows (any string: "¥1,280", "税込 1,408円 (税抜 1,280円)").
type SimProduct struct {
	Name  string
	Price string
}

// SimBrowser is the package a Simulated phone opens http and https URLs
// in; other URLs (deep links) open in the foreground app.
const SimBrowser = "com.android.chrome"

// SimMissingPrefix starts the package names a Simulated phone without a
// package list (SimOptions.Packages nil) has not installed.
const SimMissingPrefix = "com.missing."

// SimCall is one operation in a Simulated phone's history. Only the fields of
// its Op are set; Err is nil when the operation took effect.
type SimCall struct {
	Op       string
	X, Y     int
	X2, Y2   int
	Duration time.Duration
	Text     string
	Key      string
	Package  string
	URL      string
	// Orientation is the orientation of a rotate.
	Orientation string
	Err         error
	// EffectKey is the idempotency key of the effect step the operation
	// belongs to ("" for other steps); see WithEffectKey.
	EffectKey string
}

// Simulated is a deterministic in-memory phone. The same sequence of
// operations always yields the same screenshots, UI dumps and recordings.
// Operations honour their context before and during the injected latency and
// never take effect once it is done.
type Simulated struct {
	serial   string
	model    string
	tags     []string
	w, h     int
	recSize  int64
	recLimit time.Duration

	mu        sync.Mutex
	latency   time.Duration
	opLatency map[string]time.Duration
	failures  map[string][]error
	unplugged bool
	history   []SimCall
	packages  map[string]bool // nil: all but SimMissingPrefix
	ime       bool

	awake       bool
	locked      bool
	orientation string
	url         string // last URL opened
	cleared     map[string]int

	frame     int64 // screenshots taken
	app       string
	typed     string
	selected  int // list row tapped last in the foreground app, -1 for none
	catalogue []SimProduct
	scroll    int // the catalogue's first row on screen
	versions  map[string]protocol.AppVersion
	tap       *image.Point
	swipe     *[2]image.Point
	rec       *simRecording
	recs      int // recordings started
	bat       simBattery
	logs      []simLogLine // the phone's log (simlog.go)
}

var _ Device = (*Simulated)(nil)

// NewSimulated returns a simulated phone, plugged in, with the launcher in
// the foreground.
func NewSimulated(opts SimOptions) *Simulated {
	s := &Simulated{
		serial:      opts.Serial,
		model:       opts.Model,
		tags:        append([]string(nil), opts.Tags...),
		w:           opts.Width,
		h:           opts.Height,
		recSize:     opts.RecordingSize,
		recLimit:    opts.RecordLimit,
		latency:     opts.Latency,
		opLatency:   map[string]time.Duration{},
		failures:    map[string][]error{},
		app:         SimLauncher,
		selected:    -1,
		catalogue:   append([]SimProduct(nil), opts.Catalogue...),
		versions:    maps.Clone(opts.AppVersions),
		ime:         opts.IME,
		awake:       !opts.Locked,
		locked:      opts.Locked,
		cleared:     map[string]int{},
		orientation: protocol.OrientationAuto,
	}
	if opts.Packages != nil {
		s.packages = map[string]bool{SimLauncher: true}
		for _, p := range opts.Packages {
			s.packages[p] = true
		}
	}
	if s.serial == "" {
		s.serial = "sim-0"
	}
	if s.model == "" {
		s.model = "SimPhone"
	}
	if s.w <= 0 {
		s.w = 720
	}
	if s.h <= 0 {
		s.h = 1280
	}
	if s.recSize <= 0 {
		s.recSize = 64 << 10
	}
	if s.recLimit <= 0 {
		s.recLimit = DefaultRecordLimit
	}
	return s
}

// Serial returns the phone's serial.
func (s *Simulated) Serial() string { return s.serial }

// Info describes the phone; State is "offline" once unplugged.
func (s *Simulated) Info() protocol.Device {
	s.mu.Lock()
	defer s.mu.Unlock()
	state := protocol.DeviceReady
	if s.unplugged {
		state = protocol.DeviceOffline
	}
	return protocol.Device{Serial: s.serial, State: state, Model: s.model, Tags: append([]string(nil), s.tags...)}
}

// SetLatency sets the latency of one operation (a History op name),
// overriding SimOptions.Latency for it.
func (s *Simulated) SetLatency(op string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opLatency[op] = d
}

// FailNext makes the next call of op (a History op name) fail with err,
// after its latency and without effect. Calls queue: FailNext twice fails the
// next two calls.
func (s *Simulated) FailNext(op string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[op] = append(s.failures[op], err)
}

// Unplug disconnects the phone: a recording in progress is lost and every
// later call fails with an error naming the serial and wrapping ErrUnplugged.
func (s *Simulated) Unplug() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unplugged = true
	if s.rec != nil {
		s.rec.done = true
		s.rec.limit.Stop()
		s.rec = nil
	}
}

// Plug reconnects an unplugged phone. Its screen state is kept.
func (s *Simulated) Plug() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unplugged = false
}

// History returns every operation attempted so far, oldest first.
func (s *Simulated) History() []SimCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SimCall(nil), s.history...)
}

// RecordingActive reports whether a screen recording is running.
func (s *Simulated) RecordingActive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec != nil
}

// Foreground returns the package of the app in the foreground.
func (s *Simulated) Foreground() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.app
}

// Typed returns the content of the focused text field.
func (s *Simulated) Typed() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.typed
}

// do runs one operation: it checks ctx and the plug, waits the latency
// (cancellable), checks both again, consumes an injected failure, and then
// applies the effect under the lock. The attempt is appended to the history
// with its outcome.
func (s *Simulated) do(ctx context.Context, c SimCall, apply func() error) error {
	err := s.attempt(ctx, c.Op, apply)
	if err != nil {
		err = fmt.Errorf("%s %s: %w", c.Op, s.serial, err)
	}
	c.Err = err
	c.EffectKey = EffectKey(ctx)
	s.mu.Lock()
	s.history = append(s.history, c)
	s.logCall(c)
	s.mu.Unlock()
	return err
}

func (s *Simulated) attempt(ctx context.Context, op string, apply func() error) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	if s.unplugged {
		s.mu.Unlock()
		return ErrUnplugged
	}
	d, ok := s.opLatency[op]
	if !ok {
		d = s.latency
	}
	s.mu.Unlock()
	if err := sleepCtx(ctx, d); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if s.unplugged {
		return ErrUnplugged
	}
	if q := s.failures[op]; len(q) > 0 {
		s.failures[op] = q[1:]
		return q[0]
	}
	if apply == nil {
		return nil
	}
	return apply()
}

func (s *Simulated) screenLocked() simScreen {
	sc := simScreen{w: s.w, h: s.h, frame: s.frame, app: s.app, typed: s.typed, selected: s.selected, recording: s.rec != nil}
	if s.app == SimShop {
		sc.catalogue, sc.scroll = s.catalogue, s.scroll
	}
	if s.tap != nil {
		p := *s.tap
		sc.tap = &p
	}
	if s.swipe != nil {
		l := *s.swipe
		sc.swipe = &l
	}
	return sc
}

// Screenshot renders the screen as a PNG: the launcher (a wallpaper, a grid
// of app icons with labels, a dock) or the foreground app (toolbar in the
// app's colour, a text field showing what was typed, a button, a list, a
// floating button), with a status bar whose clock follows the frame counter
// (raised by every screenshot), a navigation bar, a ripple at the last tap
// and the last swipe's path.
func (s *Simulated) Screenshot(ctx context.Context) ([]byte, error) {
	sc, err := s.shoot(ctx)
	if err != nil {
		return nil, err
	}
	b, err := sc.png()
	if err != nil {
		return nil, fmt.Errorf("encode screenshot of %s: %w", s.serial, err)
	}
	return b, nil
}

// ScreenImage is Screenshot without the PNG encoding: it returns the
// rendered screen (the same pixels Screenshot encodes) and counts as a
// screenshot in the history and the frame counter.
func (s *Simulated) ScreenImage(ctx context.Context) (image.Image, error) {
	sc, err := s.shoot(ctx)
	if err != nil {
		return nil, err
	}
	return sc.render(), nil
}

func (s *Simulated) shoot(ctx context.Context) (simScreen, error) {
	var sc simScreen
	err := s.do(ctx, SimCall{Op: protocol.OpScreenshot}, func() error {
		s.frame++
		sc = s.screenLocked()
		return nil
	})
	return sc, err
}

// UIDump returns a uiautomator-style hierarchy of the current screen.
func (s *Simulated) UIDump(ctx context.Context) ([]byte, error) {
	var sc simScreen
	err := s.do(ctx, SimCall{Op: protocol.OpUIDump}, func() error {
		sc = s.screenLocked()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sc.uiXML(), nil
}

// Tap taps at (x, y); the next screenshot shows its ripple. On the
// launcher, a tap on an app icon launches the app; in an app, a tap on a
// list row selects it.
func (s *Simulated) Tap(ctx context.Context, x, y int) error {
	return s.do(ctx, SimCall{Op: protocol.OpTap, X: x, Y: y}, func() error {
		s.tap = &image.Point{X: x, Y: y}
		t, ok := s.screenLocked().hit(*s.tap)
		switch {
		case !ok:
		case t.kind == "app":
			s.launchLocked(t.pkg)
		case t.kind == "row":
			s.selected = t.index
		}
		return nil
	})
}

func (s *Simulated) launchLocked(pkg string) {
	s.app = pkg
	s.scroll = 0
	s.typed = ""
	s.selected = -1
}

// Swipe records a swipe; it takes d (cancellable) in addition to the latency,
// like a real swipe.
func (s *Simulated) Swipe(ctx context.Context, x1, y1, x2, y2 int, d time.Duration) error {
	c := SimCall{Op: protocol.OpSwipe, X: x1, Y: y1, X2: x2, Y2: y2, Duration: d}
	if err := sleepCtx(ctx, d); err != nil {
		return s.do(ctx, c, nil)
	}
	return s.do(ctx, c, func() error {
		s.swipe = &[2]image.Point{{X: x1, Y: y1}, {X: x2, Y: y2}}
		if sc := s.screenLocked(); len(sc.catalogue) > 0 && abs(y2-y1) >= s.h/8 && abs(y2-y1) > abs(x2-x1) {
			// The list follows the finger: up shows the rows below.
			step := max(sc.visibleRows()-1, 1)
			if y2 > y1 {
				step = -step
			}
			s.scroll = min(max(s.scroll+step, 0), max(len(s.catalogue)-sc.visibleRows(), 0))
			s.selected = -1
		}
		return nil
	})
}

// Text appends str to the focused text field. Like a phone reached over
// adb, it refuses text that is not printable (protocol.CheckTypable), and
// text beyond ASCII unless it has the input method (SimOptions.IME).
func (s *Simulated) Text(ctx context.Context, str string) error {
	// Refuse what a phone reached over adb refuses (see InputTextCommand).
	if err := protocol.CheckTypable(str); err != nil {
		return fmt.Errorf("text on %s: %w: text: %w", s.serial, ErrInvalidStep, err)
	}
	if protocol.NeedsIME(str) {
		if has, _ := s.HasIME(); !has {
			return fmt.Errorf("text on %s: %w", s.serial, &NoIMEError{Serial: s.serial})
		}
	}
	return s.do(ctx, SimCall{Op: protocol.OpText, Text: str}, func() error {
		s.typed += str
		return nil
	})
}

// Key handles KEYCODE_HOME and KEYCODE_BACK (launcher to the foreground)
// and KEYCODE_DEL (delete the last typed character); other keys are only
// recorded.
func (s *Simulated) Key(ctx context.Context, key string) error {
	return s.do(ctx, SimCall{Op: protocol.OpKey, Key: key}, func() error {
		switch strings.TrimPrefix(strings.ToUpper(key), "KEYCODE_") {
		case "HOME", "3", "BACK", "4":
			s.launchLocked(SimLauncher)
			s.tap, s.swipe = nil, nil
		case "WAKEUP", "224":
			s.awake = true
		case "SLEEP", "223":
			s.awake = false
		case "DEL", "67":
			if r := []rune(s.typed); len(r) > 0 {
				s.typed = string(r[:len(r)-1])
			}
		}
		return nil
	})
}

// Launch brings pkg to the foreground with an empty text field.
func (s *Simulated) Launch(ctx context.Context, pkg string) error {
	return s.do(ctx, SimCall{Op: protocol.OpLaunch, Package: pkg}, func() error {
		if pkg == "" {
			return invalidStep("empty package name")
		}
		if !s.installedLocked(pkg) {
			return &AppNotInstalledError{Serial: s.serial, Package: pkg}
		}
		s.launchLocked(pkg)
		s.tap, s.swipe = nil, nil
		return nil
	})
}

// HasIME reports whether the phone has the input method that types text
// beyond ASCII (SimOptions.IME); it is always known.
func (s *Simulated) HasIME() (has, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ime, true
}

// SetIME installs (true) or removes the input method.
func (s *Simulated) SetIME(has bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ime = has
}

// Wake turns the screen on.
func (s *Simulated) Wake(ctx context.Context) error {
	return s.do(ctx, SimCall{Op: protocol.OpWake}, func() error {
		s.awake = true
		return nil
	})
}

// Unlock turns the screen on and dismisses the keyguard.
func (s *Simulated) Unlock(ctx context.Context) error {
	return s.do(ctx, SimCall{Op: protocol.OpUnlock}, func() error {
		s.awake, s.locked = true, false
		return nil
	})
}

// OpenURL opens an http or https URL in SimBrowser and a deep link in the
// foreground app; URL returns it.
func (s *Simulated) OpenURL(ctx context.Context, rawURL string) error {
	return s.do(ctx, SimCall{Op: protocol.OpOpenURL, URL: rawURL}, func() error {
		if err := protocol.ValidateURL(rawURL); err != nil {
			return invalidStep("%v", err)
		}
		s.url = rawURL
		scheme, _, _ := strings.Cut(rawURL, ":")
		if strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https") {
			s.launchLocked(SimBrowser)
			s.tap, s.swipe = nil, nil
		}
		return nil
	})
}

// ForceStop stops pkg: when it is in the foreground, the launcher comes
// back. Stopping an app that is not running (or not installed) does
// nothing, as on a phone.
func (s *Simulated) ForceStop(ctx context.Context, pkg string) error {
	return s.do(ctx, SimCall{Op: protocol.OpForceStop, Package: pkg}, func() error {
		if s.app == pkg && pkg != SimLauncher {
			s.launchLocked(SimLauncher)
		}
		return nil
	})
}

// ClearData clears pkg's data and stops it; an app that is not installed
// fails with an *AppNotInstalledError. Cleared counts the clears.
func (s *Simulated) ClearData(ctx context.Context, pkg string) error {
	return s.do(ctx, SimCall{Op: protocol.OpClearData, Package: pkg}, func() error {
		if !s.installedLocked(pkg) {
			return &AppNotInstalledError{Serial: s.serial, Package: pkg}
		}
		s.cleared[pkg]++
		if s.app == pkg && pkg != SimLauncher {
			s.launchLocked(SimLauncher)
		}
		return nil
	})
}

// Rotate sets the orientation (Orientation returns it).
func (s *Simulated) Rotate(ctx context.Context, orientation string) error {
	return s.do(ctx, SimCall{Op: protocol.OpRotate, Orientation: orientation}, func() error {
		if !slices.Contains(protocol.Orientations, orientation) {
			return invalidStep("orientation %q is not one of %s", orientation, strings.Join(protocol.Orientations, ", "))
		}
		s.orientation = orientation
		return nil
	})
}

// ScreenState reports whether the screen is on and whether the keyguard
// is shown.
func (s *Simulated) ScreenState() (awake, locked bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.awake, s.locked
}

// Orientation returns the orientation last set (protocol.OrientationAuto
// at first).
func (s *Simulated) Orientation() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.orientation
}

// URL returns the last URL opened.
func (s *Simulated) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Cleared returns how often pkg's data was cleared.
func (s *Simulated) Cleared(pkg string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cleared[pkg]
}

// Installed reports whether pkg is installed on the phone (see
// SimOptions.Packages).
func (s *Simulated) Installed(pkg string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.installedLocked(pkg)
}

func (s *Simulated) installedLocked(pkg string) bool {
	if pkg == IMEPackage {
		return s.ime
	}
	if s.packages == nil {
		return pkg != "" && !strings.HasPrefix(pkg, SimMissingPrefix)
	}
	return s.packages[pkg]
}

// StartRecording starts a recording. One recording runs at a time.
func (s *Simulated) StartRecording(ctx context.Context) (Recording, error) {
	var r *simRecording
	err := s.do(ctx, SimCall{Op: protocol.OpRecordStart}, func() error {
		if s.rec != nil {
			return invalidStep("a recording is already running")
		}
		s.recs++
		r = &simRecording{s: s, seq: s.recs, startOps: len(s.history), endc: make(chan struct{})}
		r.limit = time.AfterFunc(s.recLimit, r.end)
		s.rec = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

type simRecording struct {
	s        *Simulated
	seq      int
	startOps int
	limit    *time.Timer   // ends the recording at the phone's time limit
	done     bool          // stopped, aborted or lost; guarded by s.mu
	ended    bool          // ended on its own at the time limit; guarded by s.mu
	endOps   int           // operations recorded until it ended
	endc     chan struct{} // closed when it ended at the time limit
}

var _ LimitedRecording = (*simRecording)(nil)

// end ends the recording at the phone's time limit, as screenrecord does:
// the file is complete and holds what happened until then; the phone may
// record again.
func (r *simRecording) end() {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.done || r.ended {
		return
	}
	r.ended = true
	close(r.endc)
	r.endOps = len(s.history) - r.startOps
	if s.rec == r {
		s.rec = nil
	}
}

// CutAtLimit implements LimitedRecording.
func (r *simRecording) CutAtLimit() (time.Duration, bool) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.s.recLimit, r.ended
}

// Stop ends the recording and streams a deterministic MP4 container (an
// ftyp box and an mdat box of SimOptions.RecordingSize bytes; not playable)
// into w, checking ctx between chunks.
func (r *simRecording) Stop(ctx context.Context, w io.Writer) (int64, error) {
	s := r.s
	var ops int
	err := s.do(ctx, SimCall{Op: protocol.OpRecordStop}, func() error {
		if r.done {
			return fmt.Errorf("recording is not running")
		}
		r.done = true
		r.limit.Stop()
		if r.ended {
			ops = r.endOps
			return nil
		}
		s.rec = nil
		ops = len(s.history) - r.startOps
		return nil
	})
	if err != nil {
		return 0, err
	}
	n, err := writeSimMP4(ctx, w, s.serial, r.seq, ops, s.recSize)
	if err != nil {
		return n, fmt.Errorf("stream recording of %s: %w", s.serial, err)
	}
	return n, nil
}

// Abort discards the recording. It has no effect once the recording ended.
func (r *simRecording) Abort() {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.done {
		return
	}
	r.done = true
	r.limit.Stop()
	if s.rec == r {
		s.rec = nil
	}
	s.history = append(s.history, SimCall{Op: SimOpRecordAbort})
}

// writeSimMP4 writes an ISO BMFF file: ftyp, then mdat holding a text header
// and deterministic filler, payload bytes in total.
func writeSimMP4(ctx context.Context, w io.Writer, serial string, seq, ops int, payload int64) (int64, error) {
	head := fmt.Sprintf("edgeagent simulated recording serial=%s seq=%d ops=%d\n", serial, seq, ops)
	if payload < int64(len(head)) {
		payload = int64(len(head))
	}
	var hdr bytes.Buffer
	// ftyp: major brand isom, minor version 0x200, compatible brands.
	hdr.Write([]byte{0, 0, 0, 32})
	hdr.WriteString("ftypisom")
	hdr.Write([]byte{0, 0, 2, 0})
	hdr.WriteString("isomiso2avc1mp41")
	if size := payload + 8; size <= 0xFFFFFFFF {
		_ = binary.Write(&hdr, binary.BigEndian, uint32(size))
		hdr.WriteString("mdat")
	} else {
		_ = binary.Write(&hdr, binary.BigEndian, uint32(1))
		hdr.WriteString("mdat")
		_ = binary.Write(&hdr, binary.BigEndian, uint64(payload+16))
	}
	hdr.WriteString(head)

	var n int64
	m, err := w.Write(hdr.Bytes())
	n += int64(m)
	if err != nil {
		return n, err
	}
	left := payload - int64(len(head))
	block := simFiller(serial, seq)
	for left > 0 {
		if err := ctxErr(ctx); err != nil {
			return n, err
		}
		chunk := block
		if int64(len(chunk)) > left {
			chunk = chunk[:left]
		}
		m, err := w.Write(chunk)
		n += int64(m)
		left -= int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// simFiller returns 32 KiB of xorshift noise seeded by serial and seq.
func simFiller(serial string, seq int) []byte {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", serial, seq)
	x := h.Sum64() | 1
	b := make([]byte, 32<<10)
	for i := 0; i < len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
	return b
}
