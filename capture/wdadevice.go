package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture/adb"
	"github.com/edgeagent/edgeagent/capture/wda"
	"github.com/edgeagent/edgeagent/protocol"
)

// IOSKeyboard is what PhoneFacts.IME names on an iPhone: WebDriverAgent
// types any Unicode text itself, with no input method to install.
const IOSKeyboard = "WebDriverAgent"

// WDAOptions configures one iPhone reached through WebDriverAgent.
type WDAOptions struct {
	// UDID is the iPhone's UDID, its serial in the inventory.
	UDID string
	// URL is its WebDriverAgent's base URL, e.g. http://127.0.0.1:8100
	// (a forwarder such as iproxy on this PC) or http://PHONE-IP:8100.
	URL string
	// Tags are the phone's selector tags.
	Tags []string
	// OpTimeout bounds tap, swipe (plus its duration), text, key, launch
	// and the other short calls; default DefaultOpTimeout.
	OpTimeout time.Duration
	// CaptureTimeout bounds a screenshot, a UI dump and reading facts;
	// default DefaultCaptureTimeout.
	CaptureTimeout time.Duration
	// Log receives state changes.
	Log zerolog.Logger
}

func (o WDAOptions) validate() error {
	if !udidRE.MatchString(o.UDID) {
		return fmt.Errorf("udid %q: want the iPhone's UDID (letters, digits and '-', as `idevice_id -l` or Xcode lists it)", clipText(o.UDID, 60))
	}
	if _, err := wda.ParseURL(o.URL); err != nil {
		return fmt.Errorf("wda_url of %s: %w", o.UDID, err)
	}
	return nil
}

func (o WDAOptions) withDefaults() WDAOptions {
	if o.OpTimeout <= 0 {
		o.OpTimeout = DefaultOpTimeout
	}
	if o.CaptureTimeout <= 0 {
		o.CaptureTimeout = DefaultCaptureTimeout
	}
	return o
}

// udidRE matches an iPhone's UDID: 40 hex digits (before the iPhone XS),
// or 8-16 hex digits (since).
var udidRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{7,63}$`)

// bundleIDRE matches an iOS bundle id: reverse DNS of letters, digits,
// hyphens and underscores.
var bundleIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+$`)

// WDADevice is an iPhone driven through WebDriverAgent (docs/capture.md,
// iPhones). Its Serial is its UDID. Coordinates are screen pixels, as for
// every Device: WDA speaks points, and the phone's scale (from
// /wda/screen, read once per WDA session) converts them. Its state is
// "device", "offline" (WDA does not answer) or "unauthorized" (WDA
// answers but the phone stays locked: it has a passcode); WatchIOS keeps
// it current. Every operation fails at once with a *PhoneStateError
// naming the fix while it is not in state "device".
type WDADevice struct {
	c       *wda.Client
	opts    WDAOptions
	probing chan struct{} // one probe of WDA at a time (beginProbe)

	mu       sync.Mutex
	state    string
	cause    string // why it is not in state device ("" when it is)
	model    string
	scale    int    // pixels per point
	scaleSID string // the WDA session scale was read in
	inflight int    // operations talking to WDA now
	onChange func() // called after the state changed (WatchIOS)
}

var (
	_ Device      = (*WDADevice)(nil)
	_ FactsReader = (*WDADevice)(nil)
)

// NewWDADevice returns the iPhone of opts in state "connecting", without
// I/O: WatchIOS (or Refresh) finds its state.
func NewWDADevice(opts WDAOptions) (*WDADevice, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("open iPhone: %w", err)
	}
	opts = opts.withDefaults()
	c, err := wda.New(opts.URL, wda.Options{Timeout: opts.OpTimeout, CaptureTimeout: opts.CaptureTimeout})
	if err != nil {
		return nil, fmt.Errorf("open iPhone %s: %w", opts.UDID, err)
	}
	opts.Tags = slices.Clone(opts.Tags)
	return &WDADevice{c: c, opts: opts, state: adb.StateConnecting, probing: make(chan struct{}, 1)}, nil
}

// OpenWDADevice returns the iPhone of opts after asking its WebDriverAgent
// for its state, model and scale (within the longer of opts.OpTimeout and
// DefaultIOSProbeTimeout); it fails with a *PhoneStateError when the
// phone is not usable.
func OpenWDADevice(ctx context.Context, opts WDAOptions) (*WDADevice, error) {
	d, err := NewWDADevice(opts)
	if err != nil {
		return nil, err
	}
	d.Refresh(ctx, max(d.opts.OpTimeout, DefaultIOSProbeTimeout))
	if err := d.stateProblem(); err != nil {
		d.Close()
		if cerr := ctxErr(ctx); cerr != nil {
			return nil, fmt.Errorf("open iPhone %s: %w", opts.UDID, cerr)
		}
		return nil, fmt.Errorf("open iPhone: %w", err)
	}
	return d, nil
}

// Close deletes the WDA session (best effort, a few seconds at most) and
// closes idle connections. The device stays usable: the next operation
// creates a session.
func (d *WDADevice) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = d.c.Close(ctx)
}

// Serial returns the UDID.
func (d *WDADevice) Serial() string { return d.opts.UDID }

// URL returns its WebDriverAgent's URL.
func (d *WDADevice) URL() string { return d.c.URL() }

// Info describes the phone; it does no I/O. Reason says, while it is not
// in state "device", what WebDriverAgent answered and what to do.
func (d *WDADevice) Info() protocol.Device {
	d.mu.Lock()
	defer d.mu.Unlock()
	info := protocol.Device{Serial: d.opts.UDID, State: d.state, Platform: protocol.PlatformIOS, Model: d.model, Tags: slices.Clone(d.opts.Tags)}
	if d.state != protocol.DeviceReady && d.cause != "" {
		info.Reason = clipText(d.cause+": "+IOSFix(d.opts.UDID, d.state), 700)
	}
	return info
}

// HasIME reports that an iPhone types any Unicode text (through
// WebDriverAgent's keys), so capture.TypesUnicode is true for it.
func (d *WDADevice) HasIME() (has, known bool) { return true, true }

func (d *WDADevice) phoneState() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state
}

// stateProblem is nil while the phone is usable, else a *PhoneStateError
// with the iPhone's fix and what WDA answered.
func (d *WDADevice) stateProblem() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.problemLocked(nil)
}

func (d *WDADevice) problemLocked(err error) error {
	if d.state == protocol.DeviceReady {
		return nil
	}
	if err == nil && d.cause != "" {
		err = errors.New(d.cause)
	}
	return &PhoneStateError{Serial: d.opts.UDID, State: d.state, Platform: protocol.PlatformIOS, Err: err}
}

// setState records the phone's state and why; it reports whether it
// changed, and then calls onChange.
func (d *WDADevice) setState(state, cause string) bool {
	d.mu.Lock()
	changed := d.state != state
	if changed {
		ev := d.opts.Log.Info()
		if state != protocol.DeviceReady {
			ev = d.opts.Log.Warn().Str("cause", cause)
		}
		ev.Str("serial", d.opts.UDID).Str("platform", protocol.PlatformIOS).Str("state", state).Str("was", d.state).Msg("iPhone state")
	}
	d.state, d.cause = state, cause
	if state == protocol.DeviceReady {
		d.cause = ""
	}
	f := d.onChange
	d.mu.Unlock()
	if changed && f != nil {
		f()
	}
	return changed
}

// inUse reports whether an operation talks to WDA now: WDA runs one
// command at a time, so a probe would wait behind it (and the
// operation's own timeout finds a WDA that hangs).
func (d *WDADevice) inUse() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inflight > 0
}

// unreachable reports whether err says WDA is not there or hangs.
func unreachable(err error) bool {
	return errors.Is(err, wda.ErrNotRunning) || errors.Is(err, wda.ErrNotAnswering)
}

// causeOf is the short cause of a state, from the error that revealed it.
func causeOf(err error) string {
	return clipText(err.Error(), 300)
}

// op runs f with the phone checked and a timeout. WDA gone or hanging
// makes the phone offline (a *PhoneStateError); the ctx's end returns its
// error wrapping its cause.
func (d *WDADevice) op(ctx context.Context, what string, timeout time.Duration, f func(ctx context.Context) error) error {
	if err := ctxErr(ctx); err != nil {
		return fmt.Errorf("%s on %s: %w", what, d.opts.UDID, err)
	}
	if err := d.stateProblem(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	d.mu.Lock()
	d.inflight++
	d.mu.Unlock()
	tctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%s on %s: %w: no answer within %v", what, d.opts.UDID, wda.ErrNotAnswering, timeout))
	err := f(tctx)
	timedOut := tctx.Err() != nil
	cancel()
	d.mu.Lock()
	d.inflight--
	d.mu.Unlock()
	if err == nil {
		return nil
	}
	if cerr := ctxErr(ctx); cerr != nil {
		return fmt.Errorf("%s on %s: %w", what, d.opts.UDID, cerr)
	}
	if timedOut {
		err = context.Cause(tctx)
	}
	var pse *PhoneStateError
	if errors.As(err, &pse) {
		return fmt.Errorf("%s: %w", what, err)
	}
	if unreachable(err) {
		d.setState(protocol.DeviceOffline, causeOf(err))
		d.mu.Lock()
		perr := d.problemLocked(err)
		d.mu.Unlock()
		return fmt.Errorf("%s: %w", what, perr)
	}
	return fmt.Errorf("%s on %s: %w", what, d.opts.UDID, err)
}

// scaleNow returns the phone's scale (pixels per point), read from
// /wda/screen once per WDA session.
func (d *WDADevice) scaleNow(ctx context.Context) (int, error) {
	sid, err := d.c.Session(ctx)
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	if d.scale > 0 && d.scaleSID == sid {
		s := d.scale
		d.mu.Unlock()
		return s, nil
	}
	d.mu.Unlock()
	scr, err := d.c.Screen(ctx)
	if err != nil {
		return 0, err
	}
	s, err := screenScale(scr)
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	d.scale, d.scaleSID = s, sid
	d.mu.Unlock()
	return s, nil
}

// screenScale checks WDA's scale: an integer from 1 to 4.
func screenScale(scr wda.Screen) (int, error) {
	s := scr.Scale
	if s < 1 || s > 4 || s != math.Trunc(s) {
		return 0, fmt.Errorf("WebDriverAgent GET /wda/screen: %w: scale %v (want 1, 2 or 3)", wda.ErrBadAnswer, s)
	}
	return int(s), nil
}

// points converts a pixel coordinate to WDA's points.
func points(px, scale int) float64 { return float64(px) / float64(scale) }

// Screenshot returns WDA's screenshot, a PNG in pixels, as it is.
func (d *WDADevice) Screenshot(ctx context.Context) ([]byte, error) {
	var out []byte
	err := d.op(ctx, "screenshot", d.opts.CaptureTimeout, func(ctx context.Context) error {
		b, err := d.c.Screenshot(ctx)
		out = b
		return err
	})
	return out, err
}

// UIDump returns WDA's source XML of the foreground app with the scale
// (edgeagent-scale) and the foreground app's bundle id
// (edgeagent-bundle-id, when WDA names one) inserted into the root's
// start tag (docs/capture.md, iPhones).
func (d *WDADevice) UIDump(ctx context.Context) ([]byte, error) {
	var out []byte
	err := d.op(ctx, "ui dump", d.opts.CaptureTimeout, func(ctx context.Context) error {
		scale, err := d.scaleNow(ctx)
		if err != nil {
			return err
		}
		src, err := d.c.Source(ctx)
		if err != nil {
			return err
		}
		var bundle string
		app, err := d.c.ActiveAppInfo(ctx)
		switch {
		case unreachable(err) || ctx.Err() != nil:
			return err
		case err == nil && bundleIDRE.MatchString(app.BundleID):
			bundle = app.BundleID
		}
		out, err = AnnotateSource(src, scale, bundle)
		return err
	})
	return out, err
}

// AnnotateSource inserts edgeagent-scale="scale" and, when bundle is not
// empty, edgeagent-bundle-id="bundle" into the start tag of the root
// element of WDA's source XML. The root is the first element after an
// optional byte order mark, XML declaration, processing instructions,
// comments and white space; a source without one, with a document type
// declaration, or whose root carries these attributes already is
// refused.
func AnnotateSource(src []byte, scale int, bundle string) ([]byte, error) {
	i := 0
	if bytes.HasPrefix(src, []byte("\xef\xbb\xbf")) {
		i = 3
	}
	for {
		for i < len(src) && isXMLSpace(src[i]) {
			i++
		}
		rest := src[i:]
		switch {
		case bytes.HasPrefix(rest, []byte("<?")):
			end := bytes.Index(rest, []byte("?>"))
			if end < 0 {
				return nil, errors.New("source: unterminated XML declaration")
			}
			i += end + 2
			continue
		case bytes.HasPrefix(rest, []byte("<!--")):
			end := bytes.Index(rest[4:], []byte("-->"))
			if end < 0 {
				return nil, errors.New("source: unterminated comment")
			}
			i += 4 + end + 3
			continue
		case bytes.HasPrefix(rest, []byte("<!")):
			return nil, errors.New("source: a document type declaration before the root element")
		case len(rest) >= 2 && rest[0] == '<' && isNameStart(rest[1]):
		default:
			return nil, fmt.Errorf("source: no root element (starts %q)", clipText(string(rest), 40))
		}
		break
	}
	// The start tag ends at the first '>' outside a quoted value.
	end, quote := -1, byte(0)
	for j := i + 1; j < len(src); j++ {
		c := src[j]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '<':
			return nil, errors.New("source: '<' inside the root's start tag")
		case c == '>':
			end = j
		}
		if end >= 0 {
			break
		}
	}
	if end < 0 {
		return nil, errors.New("source: the root's start tag does not end")
	}
	tag := src[i:end]
	if bytes.Contains(tag, []byte("edgeagent-")) {
		return nil, errors.New("source: the root's start tag carries edgeagent- attributes already")
	}
	at := end
	if src[end-1] == '/' {
		at = end - 1 // an empty root element: <Root .../>
	}
	attrs := ` edgeagent-scale="` + strconv.Itoa(scale) + `"`
	if bundle != "" {
		attrs += ` edgeagent-bundle-id="` + xmlAttrEscape(bundle) + `"`
	}
	out := make([]byte, 0, len(src)+len(attrs))
	out = append(out, src[:at]...)
	out = append(out, attrs...)
	out = append(out, src[at:]...)
	return out, nil
}

func isXMLSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func isNameStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= 0x80
}

var xmlAttrEscaper = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;", `"`, "&quot;", "'", "&apos;", "\t", "&#x9;", "\n", "&#xA;", "\r", "&#xD;")

func xmlAttrEscape(s string) string { return xmlAttrEscaper.Replace(s) }

// Tap taps at (x, y) pixels with a W3C touch action.
func (d *WDADevice) Tap(ctx context.Context, x, y int) error {
	return d.op(ctx, "tap", d.opts.OpTimeout, func(ctx context.Context) error {
		s, err := d.scaleNow(ctx)
		if err != nil {
			return err
		}
		return d.c.Tap(ctx, points(x, s), points(y, s))
	})
}

// Swipe drags from (x1, y1) to (x2, y2) pixels over dur with W3C touch
// actions; the same start and end hold the finger still for dur (a long
// press).
func (d *WDADevice) Swipe(ctx context.Context, x1, y1, x2, y2 int, dur time.Duration) error {
	return d.op(ctx, "swipe", d.opts.OpTimeout+dur, func(ctx context.Context) error {
		s, err := d.scaleNow(ctx)
		if err != nil {
			return err
		}
		return d.c.Swipe(ctx, points(x1, s), points(y1, s), points(x2, s), points(y2, s), dur)
	})
}

// Text types s into the focused field through WDA's keys: any Unicode
// text, Japanese included, with no input method to install.
func (d *WDADevice) Text(ctx context.Context, s string) error {
	if err := protocol.CheckTypable(s); err != nil {
		return fmt.Errorf("text on %s: %w: text: %w", d.opts.UDID, ErrInvalidStep, err)
	}
	if s == "" {
		return nil
	}
	n := utf8.RuneCountInString(s)
	if n > wda.MaxKeys {
		return fmt.Errorf("text on %s: %w: %d characters, over the %d an iPhone is sent at once", d.opts.UDID, ErrInvalidStep, n, wda.MaxKeys)
	}
	return d.op(ctx, "text", d.opts.OpTimeout+time.Duration(n)*wda.KeyTime, func(ctx context.Context) error {
		return d.c.Keys(ctx, s)
	})
}

// IOSButton returns the iPhone button of an Android key code name or
// number (protocol.IOSButton). Any other key is an ErrInvalidStep naming
// the keys an iPhone has.
func IOSButton(key string) (string, error) {
	if b, ok := protocol.IOSButton(key); ok {
		return b, nil
	}
	return "", fmt.Errorf("%w: key %q: %s", ErrInvalidStep, clipText(key, 40), protocol.IOSKeys)
}

// Key presses the iPhone button of an Android key code (IOSButton).
func (d *WDADevice) Key(ctx context.Context, key string) error {
	b, err := IOSButton(key)
	if err != nil {
		return fmt.Errorf("key on %s: %w", d.opts.UDID, err)
	}
	return d.op(ctx, "key", d.opts.OpTimeout, func(ctx context.Context) error {
		return d.c.PressButton(ctx, b)
	})
}

// Launch starts the app with bundle id pkg (or brings it to the front).
// An app that is not installed is an *AppNotInstalledError.
func (d *WDADevice) Launch(ctx context.Context, pkg string) error {
	if !bundleIDRE.MatchString(pkg) {
		return fmt.Errorf("launch on %s: %w: %q is not a bundle id", d.opts.UDID, ErrInvalidStep, clipText(pkg, 80))
	}
	return d.op(ctx, "launch "+pkg, d.opts.OpTimeout, func(ctx context.Context) error {
		err := d.c.Launch(ctx, pkg)
		var we *wda.Error
		if errors.As(err, &we) && (we.Code == wda.CodeInvalidArgument || strings.Contains(we.Message, "not installed")) {
			return &AppNotInstalledError{Serial: d.opts.UDID, Package: pkg, Platform: protocol.PlatformIOS}
		}
		return err
	})
}

// ForceStop terminates the app with bundle id pkg; one that is not
// running is left as it is.
func (d *WDADevice) ForceStop(ctx context.Context, pkg string) error {
	if !bundleIDRE.MatchString(pkg) {
		return fmt.Errorf("force_stop on %s: %w: %q is not a bundle id", d.opts.UDID, ErrInvalidStep, clipText(pkg, 80))
	}
	return d.op(ctx, "force_stop "+pkg, d.opts.OpTimeout, func(ctx context.Context) error {
		_, err := d.c.Terminate(ctx, pkg)
		return err
	})
}

// OpenURL opens rawURL in the app that handles it (Safari for a web page).
func (d *WDADevice) OpenURL(ctx context.Context, rawURL string) error {
	if err := protocol.ValidateURL(rawURL); err != nil {
		return fmt.Errorf("open_url on %s: %w: %w", d.opts.UDID, ErrInvalidStep, err)
	}
	return d.op(ctx, "open_url", d.opts.OpTimeout, func(ctx context.Context) error {
		return d.c.OpenURL(ctx, rawURL)
	})
}

// Wake wakes and unlocks the phone as Unlock does: WebDriverAgent has no
// call that only turns the screen on.
func (d *WDADevice) Wake(ctx context.Context) error { return d.unlock(ctx, "wake") }

// Unlock wakes the phone and unlocks a screen without passcode
// (/wda/unlock), then asks whether it is still locked: a phone with a
// passcode is, and becomes "unauthorized" (a *PhoneStateError with the
// fix: unlock it, set Auto-Lock to Never).
func (d *WDADevice) Unlock(ctx context.Context) error { return d.unlock(ctx, "unlock") }

func (d *WDADevice) unlock(ctx context.Context, what string) error {
	var still bool
	err := d.op(ctx, what, d.opts.OpTimeout, func(ctx context.Context) error {
		var err error
		still, err = d.unlockNow(ctx)
		return err
	})
	if err != nil || !still {
		return err
	}
	d.setState(protocol.DeviceUnauthorized, "still locked after WebDriverAgent's unlock")
	return fmt.Errorf("%s: %w", what, d.stateProblem())
}

// unlockNow unlocks the phone and reports whether it is still locked.
// WDA answers an error when the screen stays locked (a passcode): then
// /wda/locked says so.
func (d *WDADevice) unlockNow(ctx context.Context) (stillLocked bool, err error) {
	uerr := d.c.Unlock(ctx)
	var we *wda.Error
	if uerr != nil && !errors.As(uerr, &we) {
		return false, uerr
	}
	locked, err := d.c.Locked(ctx)
	if err != nil {
		return false, err
	}
	if !locked && uerr != nil {
		return false, uerr
	}
	return locked, nil
}

// iosOrientations maps rotate's orientations to WDA's.
var iosOrientations = map[string]string{
	protocol.OrientationPortrait:         wda.OrientationPortrait,
	protocol.OrientationLandscape:        wda.OrientationLandscape,
	protocol.OrientationReversePortrait:  wda.OrientationPortraitUpsideDown,
	protocol.OrientationReverseLandscape: wda.OrientationLandscapeRight,
	// WDA cannot give the orientation back to the accelerometer: auto
	// turns the phone upright, the orientation it starts in.
	protocol.OrientationAuto: wda.OrientationPortrait,
}

// Rotate turns the phone to orientation (POST /orientation): landscape is
// turned counter-clockwise (WDA's LANDSCAPE), reverse_landscape clockwise.
// WDA cannot give the orientation back to the accelerometer, so auto
// turns the phone to portrait. Apps that support only some orientations
// keep theirs.
func (d *WDADevice) Rotate(ctx context.Context, orientation string) error {
	o, ok := iosOrientations[orientation]
	if !ok {
		return fmt.Errorf("rotate on %s: %w: orientation %q is not one of %s", d.opts.UDID, ErrInvalidStep, clipText(orientation, 40), strings.Join(protocol.Orientations, ", "))
	}
	return d.op(ctx, "rotate", d.opts.OpTimeout, func(ctx context.Context) error {
		return d.c.SetOrientation(ctx, o)
	})
}

// ClearData is refused: WebDriverAgent cannot clear an iOS app's data
// (protocol.UnsupportedOn).
func (d *WDADevice) ClearData(ctx context.Context, pkg string) error {
	return fmt.Errorf("clear_data on iPhone %s: %w: WebDriverAgent cannot clear an iOS app's data (uninstall and install the app instead)", d.opts.UDID, ErrInvalidStep)
}

// StartRecording is refused: an iPhone's screen cannot be recorded
// without a Mac (protocol.UnsupportedOn).
func (d *WDADevice) StartRecording(ctx context.Context) (Recording, error) {
	return nil, fmt.Errorf("record_start on iPhone %s: %w: an iPhone's screen cannot be recorded without a Mac", d.opts.UDID, ErrInvalidStep)
}

// Facts reads the phone's facts from WebDriverAgent: iOS version
// (/status), screen size in pixels (/wda/screen, natural orientation),
// battery level and charging (/wda/batteryInfo), locked (/wda/locked),
// time zone and locale (/wda/device/info). WDA does not tell installed
// apps' versions: Apps stays empty. A fact that cannot be read stays
// unset and the error names its route; the facts read are returned with
// it. A phone that is not usable fails with a *PhoneStateError.
func (d *WDADevice) Facts(ctx context.Context) (protocol.PhoneFacts, error) {
	var f protocol.PhoneFacts
	var perr []error
	err := d.op(ctx, "read facts", d.opts.CaptureTimeout, func(ctx context.Context) error {
		fail := func(route string, err error) error {
			if err == nil {
				return nil
			}
			if unreachable(err) || ctx.Err() != nil {
				return err
			}
			perr = append(perr, fmt.Errorf("%s: %w", route, err))
			return nil
		}
		st, err := d.c.Status(ctx)
		if err != nil {
			if err := fail("/status", err); err != nil {
				return err
			}
		} else if v := st.OS.Version; iosVersionRE.MatchString(v) {
			f.IOSVersion = v
		} else {
			perr = append(perr, fmt.Errorf("/status: os.version %q not understood", clipText(v, 40)))
		}
		scr, err := d.c.Screen(ctx)
		if err == nil {
			err = screenFacts(scr, &f)
		}
		if err := fail("/wda/screen", err); err != nil {
			return err
		}
		bat, err := d.c.BatteryInfo(ctx)
		if err == nil {
			err = batteryFacts(bat, &f)
		}
		if err := fail("/wda/batteryInfo", err); err != nil {
			return err
		}
		locked, err := d.c.Locked(ctx)
		if err == nil {
			f.Locked = &locked
		} else if err := fail("/wda/locked", err); err != nil {
			return err
		}
		info, err := d.c.DeviceInfo(ctx)
		if err != nil {
			return fail("/wda/device/info", err)
		}
		d.mu.Lock()
		if m := cleanModel(info.Model); m != "" {
			d.model = m
		}
		d.mu.Unlock()
		var ierr error
		if f.TimeZone, ierr = parseProp(info.TimeZone, timeZoneRE); ierr != nil {
			perr = append(perr, fmt.Errorf("/wda/device/info: timeZone: %w", ierr))
		}
		loc := strings.ReplaceAll(info.CurrentLocale, "_", "-")
		if f.Locale, ierr = parseProp(loc, localeRE); ierr != nil {
			perr = append(perr, fmt.Errorf("/wda/device/info: currentLocale: %w", ierr))
		}
		return nil
	})
	if err != nil {
		return protocol.PhoneFacts{}, err
	}
	f.IME = IOSKeyboard
	f.ReadAtUnixMilli = time.Now().UnixMilli()
	if len(perr) > 0 {
		return f, fmt.Errorf("read facts of %s: %w", d.opts.UDID, errors.Join(perr...))
	}
	return f, nil
}

var iosVersionRE = regexp.MustCompile(`^[0-9]{1,3}(\.[0-9]{1,4}){0,3}$`)

// screenFacts sets the screen size in pixels, in natural (portrait)
// orientation.
func screenFacts(scr wda.Screen, f *protocol.PhoneFacts) error {
	s, err := screenScale(scr)
	if err != nil {
		return err
	}
	w, h := scr.ScreenSize.Width, scr.ScreenSize.Height
	if w <= 0 || h <= 0 || w > 10000 || h > 10000 {
		return fmt.Errorf("screen size %vx%v points not understood", w, h)
	}
	w, h = min(w, h), max(w, h)
	f.ScreenWidth, f.ScreenHeight = int(math.Round(w*float64(s))), int(math.Round(h*float64(s)))
	return nil
}

// batteryFacts sets the battery level (percent) and whether it charges:
// UIDevice's state 2 (charging) or 3 (full, on power); 1 is unplugged, 0
// not known.
func batteryFacts(b wda.BatteryInfo, f *protocol.PhoneFacts) error {
	var bad []string
	if b.Level >= 0 && b.Level <= 1 {
		pct := int(math.Round(b.Level * 100))
		f.BatteryLevel = &pct
	} else {
		bad = append(bad, fmt.Sprintf("level %v", b.Level))
	}
	switch b.State {
	case wda.BatteryCharging, wda.BatteryFull:
		t := true
		f.Charging = &t
	case wda.BatteryUnplugged:
		no := false
		f.Charging = &no
	case wda.BatteryUnknown:
	default:
		bad = append(bad, fmt.Sprintf("state %d", b.State))
	}
	if len(bad) > 0 {
		return fmt.Errorf("battery %s not understood", strings.Join(bad, ", "))
	}
	return nil
}

// cleanModel keeps a model name WDA gave if it is one line of printable
// text.
func cleanModel(m string) string {
	m = strings.TrimSpace(m)
	if m == "" || len(m) > 100 || strings.ContainsFunc(m, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return ""
	}
	return m
}

// Refresh asks WebDriverAgent for the phone's state within timeout and
// records it: offline when /status does not answer (or answers not
// ready), unauthorized when the screen stays locked after /wda/unlock,
// else device. A phone that becomes usable gets a new WDA session (WDA
// restarted, the old one is gone) and its model and scale are read
// again. It returns the state. It takes turns with the recovery
// ladder's Probe and Reconnect: while one of them runs past timeout, the
// state is left as it is.
func (d *WDADevice) Refresh(ctx context.Context, timeout time.Duration) string {
	pctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%w: no answer within %v", wda.ErrNotAnswering, timeout))
	defer cancel()
	if !d.beginProbe(pctx) {
		return d.phoneState()
	}
	state, cause := d.probe(pctx)
	d.endProbe()
	if ctx.Err() != nil {
		return d.phoneState() // stopping: the state is not known
	}
	c := ""
	if cause != nil {
		c = causeOf(cause)
	}
	d.setState(state, c)
	return state
}

// probe finds the phone's state; cause is why it is not usable.
func (d *WDADevice) probe(ctx context.Context) (state string, cause error) {
	st, err := d.c.Status(ctx)
	if err != nil {
		return protocol.DeviceOffline, err
	}
	if !st.Ready {
		return protocol.DeviceOffline, fmt.Errorf("WebDriverAgent at %s is not ready: %s", d.c.URL(), clipText(st.Message, 120))
	}
	locked, err := d.c.Locked(ctx)
	if err != nil {
		return protocol.DeviceOffline, err
	}
	if locked {
		// A phone without passcode is unlocked; one with a passcode
		// stays locked.
		if locked, err = d.unlockNow(ctx); err != nil {
			if errors.Is(err, wda.ErrNotRunning) {
				return protocol.DeviceOffline, err
			}
			// WDA answered that the screen is locked: an unlock that
			// fails or does not finish in time leaves it locked.
			return protocol.DeviceUnauthorized, fmt.Errorf("the screen is locked and WebDriverAgent's unlock failed: %w", err)
		}
		if locked {
			return protocol.DeviceUnauthorized, fmt.Errorf("the screen stays locked after WebDriverAgent's unlock at %s", d.c.URL())
		}
	}
	if d.phoneState() == protocol.DeviceReady {
		return protocol.DeviceReady, nil
	}
	// Usable again (or for the first time): WDA may have restarted, so
	// its session, the phone's scale and model are fetched afresh.
	d.c.ForgetSession()
	if _, err := d.c.Session(ctx); err != nil {
		return protocol.DeviceOffline, err
	}
	if _, err := d.scaleNow(ctx); err != nil {
		return protocol.DeviceOffline, err
	}
	info, err := d.c.DeviceInfo(ctx)
	if err != nil {
		if unreachable(err) {
			return protocol.DeviceOffline, err
		}
		d.opts.Log.Warn().Str("serial", d.opts.UDID).Err(err).Msg("read iPhone model; kept as it was")
	} else if m := cleanModel(info.Model); m != "" {
		d.mu.Lock()
		d.model = m
		d.mu.Unlock()
	}
	return protocol.DeviceReady, nil
}
