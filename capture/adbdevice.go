package capture

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"image/png"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeagent/edgeagent/capture/adb"
	"github.com/edgeagent/edgeagent/protocol"
)

// Default timeouts of ADBDevice operations. The agent sets the op timeout
// of its phones from its config (phones.op_timeout, whose default is
// DefaultOpTimeout).
const (
	DefaultOpTimeout      = 20 * time.Second // tap, swipe (plus its duration), text, key, launch
	DefaultCaptureTimeout = 60 * time.Second // screenshot, UI dump, starting and stopping a recording
	DefaultRecordLimit    = 180 * time.Second
)

// maxRawScreencap bounds raw screencap output (a 4K screen is 33 MiB).
const maxRawScreencap = 256 << 20

// pngPC encodes screenshots on the PC.
var pngPC = png.Encoder{CompressionLevel: png.BestSpeed}

// ADBDevice is a phone reached through the adb server. Its state follows
// the server's device list (NewADBInventory keeps it current); every
// operation fails at once with a *PhoneStateError while it is not in state
// "device".
type ADBDevice struct {
	c      *adb.Client
	serial string
	opts   ADBOptions

	mu       sync.Mutex
	state    string
	model    string
	tags     []string
	features []string
	probed   bool
	rawBad   bool // raw screencap failed to decode once: use screencap -p
	shots    shotStats
	ttyBad   bool // uiautomator cannot dump to /dev/tty: dump to a file
	ime      bool // the input method IMEPackage is installed
	imeKnown bool // ime was asked
	// netNote, for a network phone the adb server no longer lists, says
	// that the agent connects it again (netconnect.go); its Reason while
	// it is not in state "device".
	netNote string
}

var _ Device = (*ADBDevice)(nil)

// NewADBDevice returns the phone with serial as the adb server at
// opts.Address lists it, after asking it for its model and features.
func NewADBDevice(ctx context.Context, opts ADBOptions, serial string) (*ADBDevice, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("open phone %s: %w", serial, err)
	}
	opts = opts.withDefaults()
	c := adb.New(adb.Options{Addr: opts.Address, ADBPath: opts.ADBPath})
	ds, err := c.Devices(ctx)
	if err != nil {
		return nil, fmt.Errorf("open phone %s: %w", serial, err)
	}
	d := newADBDevice(c, serial, opts)
	d.state = stateGone
	for _, e := range ds {
		if e.Serial == serial {
			d.state = e.State
		}
	}
	if err := StateProblem(serial, d.state); err != nil {
		return nil, fmt.Errorf("open phone: %w", err)
	}
	if err := d.probe(ctx); err != nil {
		return nil, fmt.Errorf("open phone %s: %w", serial, err)
	}
	return d, nil
}

func newADBDevice(c *adb.Client, serial string, opts ADBOptions) *ADBDevice {
	return &ADBDevice{c: c, serial: serial, opts: opts, tags: slices.Clone(opts.Tags[serial])}
}

// Serial returns the adb serial.
func (d *ADBDevice) Serial() string { return d.serial }

// Info describes the phone; it does no I/O.
func (d *ADBDevice) Info() protocol.Device {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.state
	if st == stateGone {
		st = adb.StateOffline
	}
	info := protocol.Device{Serial: d.serial, State: st, Model: d.model, Tags: slices.Clone(d.tags)}
	if st != protocol.DeviceReady {
		info.Reason = d.netNote
	}
	return info
}

// setNetNote sets the reason shown while a dropped network phone is being
// connected again ("" when it is listed again).
func (d *ADBDevice) setNetNote(note string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.netNote = note
}

// probe asks the phone for its features and model.
func (d *ADBDevice) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.opts.CaptureTimeout)
	defer cancel()
	feats, err := d.c.Features(ctx, d.serial)
	if err != nil {
		return d.explain(ctx, err)
	}
	d.mu.Lock()
	d.features = feats
	d.mu.Unlock()
	res, err := d.shell(ctx, "getprop ro.product.model")
	if err != nil {
		return fmt.Errorf("read model: %w", err)
	}
	// Whether the phone can type text beyond ASCII: known before a job
	// that needs it is accepted (docs/capture.md, Text beyond ASCII).
	ime, ierr := d.installed(ctx, IMEPackage)
	if ierr != nil {
		d.opts.Log.Warn().Str("serial", d.serial).Err(ierr).Msg("ask whether the input method ADBKeyboard is installed")
	}
	d.mu.Lock()
	d.ime, d.imeKnown = ime, ierr == nil
	d.model = strings.TrimSpace(string(res.Stdout))
	d.probed = true
	// A phone that comes back may have been replaced or updated.
	d.rawBad, d.ttyBad, d.shots = false, false, shotStats{}
	d.mu.Unlock()
	return nil
}

// phoneState is the phone's last known state, "gone" once adb no longer
// lists it.
func (d *ADBDevice) phoneState() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state
}

func (d *ADBDevice) setState(state string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.state = state
}

func (d *ADBDevice) hasFeature(f string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Contains(d.features, f)
}

// usable fails with a *PhoneStateError unless the phone is in state device.
func (d *ADBDevice) usable() error {
	d.mu.Lock()
	st := d.state
	d.mu.Unlock()
	return StateProblem(d.serial, st)
}

// explain turns a failure into a *PhoneStateError when the phone is no
// longer usable (unplugged, unauthorized, offline), asking the server for
// its current state; other failures are returned as they are.
func (d *ADBDevice) explain(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		if ctx.Err() != nil {
			return ctxErr(ctx)
		}
		return err
	}
	var pse *PhoneStateError
	if errors.As(err, &pse) {
		return err
	}
	qctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ds, lerr := d.c.Devices(qctx)
	if lerr != nil {
		if errors.Is(lerr, adb.ErrServerGone) && !errors.Is(err, adb.ErrServerGone) {
			// The server died under the operation: say so, so that the
			// failure is not taken for the step's own.
			return fmt.Errorf("%w (%w)", err, lerr)
		}
		return err
	}
	state := stateGone
	for _, e := range ds {
		if e.Serial == d.serial {
			state = e.State
		}
	}
	if state == protocol.DeviceReady {
		return err
	}
	d.setState(state)
	return &PhoneStateError{Serial: d.serial, State: state, Err: err}
}

// stateNow is called when the phone's last known state (from the
// server's device-tracking stream) is not "device". The stream may be late
// or wrong: adb 29 does not report offline → unauthorized after a phone
// reconnects, and reports a dropped network phone seconds late. So the
// server is asked for the phone's state now: nil when it is usable after
// all, else a *PhoneStateError with that state and, as its cause, adb's own
// error for a command on the phone. known is returned when the server
// cannot be asked.
func (d *ADBDevice) stateNow(ctx context.Context, known error) error {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ds, err := d.c.Devices(qctx)
	if err != nil {
		return known
	}
	state := stateGone
	for _, e := range ds {
		if e.Serial == d.serial {
			state = e.State
		}
	}
	if state == protocol.DeviceReady {
		return nil
	}
	d.setState(state)
	// adb's own words for the state ("device unauthorized. This adb
	// server's $ADB_VENDOR_KEYS is not set…", "device offline", "device
	// '…' not found").
	_, aerr := d.shell(qctx, "true")
	if aerr == nil {
		return nil
	}
	return &PhoneStateError{Serial: d.serial, State: state, Err: aerr}
}

// op runs f with the phone checked and a timeout, and explains failures.
func (d *ADBDevice) op(ctx context.Context, what string, timeout time.Duration, f func(ctx context.Context) error) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if err := d.usable(); err != nil {
		if err = d.stateNow(ctx, err); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	tctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%s on %s: timed out after %v", what, d.serial, timeout))
	defer cancel()
	err := f(tctx)
	if err == nil {
		return nil
	}
	if cerr := ctxErr(ctx); cerr != nil {
		return fmt.Errorf("%s on %s: %w", what, d.serial, cerr)
	}
	if tctx.Err() != nil {
		return context.Cause(tctx)
	}
	err = d.explain(tctx, err)
	var pse *PhoneStateError
	if errors.As(err, &pse) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s on %s: %w", what, d.serial, err)
}

// shell runs cmd with shell protocol v2 when the phone has it, else v1.
func (d *ADBDevice) shell(ctx context.Context, cmd string) (adb.ShellResult, error) {
	if d.hasFeature("shell_v2") {
		return d.c.ShellV2(ctx, d.serial, cmd)
	}
	return d.c.ShellV1(ctx, d.serial, cmd)
}

// run runs cmd and fails on a nonzero exit status, quoting the command's
// name (not its arguments, which may be typed text) and its error output.
func (d *ADBDevice) run(ctx context.Context, cmd string) (adb.ShellResult, error) {
	res, err := d.shell(ctx, cmd)
	if err != nil {
		return res, err
	}
	if res.ExitCode != 0 {
		name, _, _ := strings.Cut(cmd, " ")
		msg := strings.TrimSpace(string(res.Stderr))
		if msg == "" {
			msg = strings.TrimSpace(string(res.Stdout))
		}
		return res, fmt.Errorf("%s exited with status %d: %s", name, res.ExitCode, clipText(msg, 200))
	}
	return res, nil
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Screenshot paths (ADBOptions.ScreenshotMode).
const (
	// ScreenshotAuto times both paths on the first shots of each phone and
	// then uses the faster, trying the other again every
	// screenshotReprobe shots: raw wins when the phone is slow to encode
	// PNG, -p when the link is slow to carry raw pixels.
	ScreenshotAuto = "auto"
	// ScreenshotRaw always uses raw screencap, PNG-encoded on the PC.
	ScreenshotRaw = "raw"
	// ScreenshotPNG always uses screencap -p, PNG-encoded on the phone.
	ScreenshotPNG = "png"
)

// screenshotReprobe is how often, in shots, auto mode times the path it
// does not use.
const screenshotReprobe = 50

// shotStats is auto mode's view of the two screenshot paths: the last few
// durations of each, compared by their medians so that one slow shot (a GC
// pause, a busy PC) does not switch paths.
type shotStats struct {
	raw, png shotWindow
	useRaw   bool // the path in use after calibration
	shots    int
}

// shotWindow holds the last durations of one path.
type shotWindow struct {
	d [5]time.Duration
	n int // samples recorded
}

func (w *shotWindow) add(d time.Duration) {
	w.d[w.n%len(w.d)] = d
	w.n++
}

func (w *shotWindow) median() time.Duration {
	k := min(w.n, len(w.d))
	s := slices.Clone(w.d[:k])
	slices.Sort(s)
	return s[k/2]
}

// shotCalibration is how many first shots alternate raw and -p.
const shotCalibration = 6

// pick returns whether the next shot should be raw: the paths alternate
// for the first shots, then the faster is used, with the other timed again
// every screenshotReprobe shots.
func (st *shotStats) pick() bool {
	switch {
	case st.shots < shotCalibration:
		return st.shots%2 == 0
	case st.shots%screenshotReprobe == screenshotReprobe-1:
		return !st.useRaw
	}
	return st.useRaw
}

// record adds a timed shot; after calibration the path changes when the
// other's median is at least 10% lower.
func (st *shotStats) record(raw bool, d time.Duration) {
	st.shots++
	if raw {
		st.raw.add(d)
	} else {
		st.png.add(d)
	}
	if st.shots < shotCalibration || st.raw.n == 0 || st.png.n == 0 {
		return
	}
	r, p := st.raw.median(), st.png.median()
	if st.shots == shotCalibration {
		st.useRaw = r <= p
		return
	}
	if st.useRaw && p*10 < r*9 {
		st.useRaw = false
	} else if !st.useRaw && r*10 < p*9 {
		st.useRaw = true
	}
}

// Screenshot captures the screen as a PNG, by raw screencap over exec:
// (decoded and PNG-encoded on the PC) or by `screencap -p` (encoded on the
// phone), as ADBOptions.ScreenshotMode says; auto mode uses whichever is
// faster for this phone. When raw output cannot be decoded, the phone uses
// screencap -p from then on.
func (d *ADBDevice) Screenshot(ctx context.Context) ([]byte, error) {
	var out []byte
	err := d.op(ctx, "screenshot", d.opts.CaptureTimeout, func(ctx context.Context) error {
		d.mu.Lock()
		raw := !d.rawBad && (d.opts.ScreenshotMode == ScreenshotRaw ||
			d.opts.ScreenshotMode == ScreenshotAuto && d.shots.pick())
		d.mu.Unlock()
		start := time.Now()
		if raw {
			b, err := d.rawScreenshot(ctx)
			if err == nil {
				d.mu.Lock()
				d.shots.record(true, time.Since(start))
				d.mu.Unlock()
				out = b
				return nil
			}
			var de *decodeError
			if !errors.As(err, &de) {
				return err
			}
			d.mu.Lock()
			d.rawBad = true
			d.mu.Unlock()
			d.opts.Log.Warn().Str("serial", d.serial).Err(err).Msg("raw screencap unusable, falling back to screencap -p")
			start = time.Now()
		}
		b, err := d.c.Exec(ctx, d.serial, "screencap -p", maxRawScreencap)
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			return fmt.Errorf("screencap -p: output of %d bytes is not a PNG: %q", len(b), clipText(string(b), 80))
		}
		d.mu.Lock()
		d.shots.record(false, time.Since(start))
		d.mu.Unlock()
		out = b
		return nil
	})
	return out, err
}

type decodeError struct{ err error }

func (e *decodeError) Error() string { return e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

func (d *ADBDevice) rawScreenshot(ctx context.Context) ([]byte, error) {
	s, err := d.c.Open(ctx, d.serial, "exec:screencap")
	if err != nil {
		return nil, fmt.Errorf("exec screencap: %w", err)
	}
	b, err := adb.ReadScreencap(s, maxRawScreencap)
	s.Close()
	if err != nil {
		if cerr := ctxErr(ctx); cerr != nil {
			return nil, cerr
		}
		return nil, &decodeError{err}
	}
	img, _, err := adb.DecodeScreencap(b)
	if err != nil {
		return nil, &decodeError{err}
	}
	var buf bytes.Buffer
	buf.Grow(len(b) / 8)
	if err := pngPC.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("encode screenshot as PNG: %w", err)
	}
	return buf.Bytes(), nil
}

// uiDumpAttempts is how often UIDump tries before giving up on transient
// uiautomator failures.
const uiDumpAttempts = 4

// UIDump returns the view hierarchy from `uiautomator dump`, to the stream
// (/dev/tty) or, where that does not work, to a file pulled over sync.
// "could not get idle state" and "null root node" (the screen is animating
// or the accessibility bridge is not ready) are retried with backoff.
func (d *ADBDevice) UIDump(ctx context.Context) ([]byte, error) {
	var out []byte
	err := d.op(ctx, "ui dump", d.opts.CaptureTimeout, func(ctx context.Context) error {
		var last error
		backoff := 150 * time.Millisecond
		for attempt := 1; attempt <= uiDumpAttempts; attempt++ {
			d.mu.Lock()
			toFile := d.ttyBad
			d.mu.Unlock()
			var xml []byte
			var err error
			if toFile {
				xml, err = d.dumpToFile(ctx)
			} else {
				xml, err = d.dumpToTTY(ctx)
			}
			if err == nil {
				out = xml
				return nil
			}
			last = err
			var ue *uiDumpError
			if !errors.As(err, &ue) {
				return err
			}
			if !toFile {
				// The stream gave no hierarchy: try a file next; if that
				// works, this phone cannot dump to /dev/tty.
				xml, ferr := d.dumpToFile(ctx)
				if ferr == nil {
					d.mu.Lock()
					d.ttyBad = !ue.transient
					d.mu.Unlock()
					out = xml
					return nil
				}
				last = ferr
				if !errors.As(ferr, &ue) {
					return ferr
				}
			}
			if !ue.transient {
				return last
			}
			if err := sleepCtx(ctx, backoff); err != nil {
				return fmt.Errorf("%w (last attempt: %w)", err, last)
			}
			backoff *= 2
		}
		return fmt.Errorf("gave up after %d attempts: %w", uiDumpAttempts, last)
	})
	return out, err
}

type uiDumpError struct {
	msg       string
	transient bool
}

func (e *uiDumpError) Error() string { return e.msg }

// parseUIDump extracts the XML hierarchy from uiautomator's output.
func parseUIDump(b []byte) ([]byte, error) {
	start := bytes.Index(b, []byte("<?xml"))
	if start < 0 {
		start = bytes.Index(b, []byte("<hierarchy"))
	}
	end := bytes.LastIndex(b, []byte("</hierarchy>"))
	if start >= 0 && end > start {
		return b[start : end+len("</hierarchy>")], nil
	}
	msg := strings.TrimSpace(string(b))
	transient := strings.Contains(msg, "could not get idle state") || strings.Contains(msg, "null root node")
	if msg == "" {
		msg = "no output"
	}
	return nil, &uiDumpError{msg: "uiautomator gave no hierarchy: " + clipText(msg, 200), transient: transient}
}

func (d *ADBDevice) dumpToTTY(ctx context.Context) ([]byte, error) {
	res, err := d.shell(ctx, "uiautomator dump /dev/tty")
	if err != nil {
		return nil, err
	}
	return parseUIDump(append(res.Stdout, res.Stderr...))
}

func (d *ADBDevice) dumpToFile(ctx context.Context) ([]byte, error) {
	path := "/data/local/tmp/edgeagent-ui-" + randHex(6) + ".xml"
	res, err := d.shell(ctx, "uiautomator dump "+path)
	if err != nil {
		return nil, err
	}
	defer d.cleanup(path)
	msg := append(res.Stdout, res.Stderr...)
	if !bytes.Contains(msg, []byte("dumped to")) {
		_, perr := parseUIDump(msg)
		return nil, perr
	}
	var buf bytes.Buffer
	if err := d.pull(ctx, path, &buf); err != nil {
		return nil, err
	}
	return parseUIDump(buf.Bytes())
}

// cleanup removes a file from the phone, best effort, even after the
// operation's context ended.
func (d *ADBDevice) cleanup(path string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.shell(ctx, "rm -f "+path); err != nil {
		d.opts.Log.Debug().Str("serial", d.serial).Str("path", path).Err(err).Msg("remove file from phone")
	}
}

func (d *ADBDevice) pull(ctx context.Context, path string, w io.Writer) error {
	_, err := d.pullN(ctx, path, w)
	return err
}

func (d *ADBDevice) pullN(ctx context.Context, path string, w io.Writer) (int64, error) {
	y, err := d.c.Sync(ctx, d.serial)
	if err != nil {
		return 0, err
	}
	defer y.Close()
	return y.Recv(path, w)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Tap taps at (x, y) with `input tap`.
func (d *ADBDevice) Tap(ctx context.Context, x, y int) error {
	return d.op(ctx, "tap", d.opts.OpTimeout, func(ctx context.Context) error {
		_, err := d.run(ctx, fmt.Sprintf("input tap %d %d", x, y))
		return err
	})
}

// Swipe swipes with `input swipe` over dur; the same start and end point
// make a long press.
func (d *ADBDevice) Swipe(ctx context.Context, x1, y1, x2, y2 int, dur time.Duration) error {
	return d.op(ctx, "swipe", d.opts.OpTimeout+dur, func(ctx context.Context) error {
		_, err := d.run(ctx, fmt.Sprintf("input swipe %d %d %d %d %d", x1, y1, x2, y2, dur.Milliseconds()))
		return err
	})
}

// LongPress holds a touch at (x, y) for dur.
func (d *ADBDevice) LongPress(ctx context.Context, x, y int, dur time.Duration) error {
	return d.Swipe(ctx, x, y, x, y, dur)
}

// HasIME reports whether the phone has the input method IMEPackage, as
// found when it was connected (or by the last text step beyond ASCII).
func (d *ADBDevice) HasIME() (has, known bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ime, d.imeKnown
}

// Text types s with `input text`, escaped for the phone's shell; text
// beyond printable ASCII goes through the input method IMEPackage (see
// typeWithIME).
func (d *ADBDevice) Text(ctx context.Context, s string) error {
	if err := protocol.CheckTypable(s); err != nil {
		return fmt.Errorf("text on %s: %w: text: %w", d.serial, ErrInvalidStep, err)
	}
	if protocol.NeedsIME(s) {
		return d.op(ctx, "text", d.opts.OpTimeout, func(ctx context.Context) error {
			return d.typeWithIME(ctx, s)
		})
	}
	cmd, err := InputTextCommand(s)
	if err != nil {
		return fmt.Errorf("text on %s: %w: %w", d.serial, ErrInvalidStep, err)
	}
	if cmd == "" {
		return nil
	}
	return d.op(ctx, "text", d.opts.OpTimeout, func(ctx context.Context) error {
		_, err := d.run(ctx, cmd)
		return err
	})
}

// typeWithIME types s through ADBKeyboard: it asks `pm path` whether the
// input method is installed (a *NoIMEError if not), makes it the current
// input method (`ime enable`, `ime set`) when it is not, sends the text
// base64-encoded in an ADB_INPUT_B64 broadcast, whose receiver commits it
// to the focused field, and then selects the input method that was
// current before again.
func (d *ADBDevice) typeWithIME(ctx context.Context, s string) error {
	has, err := d.installed(ctx, IMEPackage)
	if err != nil {
		return fmt.Errorf("ask whether the input method %s is installed: %w", IMEPackage, err)
	}
	d.mu.Lock()
	d.ime, d.imeKnown = has, true
	d.mu.Unlock()
	if !has {
		return &NoIMEError{Serial: d.serial}
	}
	res, err := d.run(ctx, "settings get secure default_input_method")
	if err != nil {
		return fmt.Errorf("read the current input method: %w", err)
	}
	prev := strings.TrimSpace(string(res.Stdout))
	if prev != IMEID {
		if _, err := d.run(ctx, "ime enable "+IMEID+" && ime set "+IMEID); err != nil {
			return fmt.Errorf("select the input method %s: %w", IMEID, err)
		}
		defer func() {
			if prev == "" || prev == "null" {
				return
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if _, err := d.run(rctx, "ime set "+shellQuote(prev)); err != nil {
				d.opts.Log.Warn().Str("serial", d.serial).Err(err).Msg("select the previous input method again")
			}
		}()
	}
	res, err = d.run(ctx, IMEBroadcastCommand(s))
	if err != nil {
		return err
	}
	if out := string(res.Stdout) + string(res.Stderr); !strings.Contains(out, "Broadcast completed") {
		return fmt.Errorf("am broadcast to the input method: %s", clipText(strings.TrimSpace(out), 200))
	}
	return nil
}

// IMEBroadcastCommand returns the shell command that has ADBKeyboard type
// s: `am broadcast -a ADB_INPUT_B64 --es msg <base64 of s's UTF-8>`.
// Base64 keeps every character (Japanese, emoji, quotes) away from the
// phone's shell and from am's argument parsing.
func IMEBroadcastCommand(s string) string {
	return "am broadcast -a ADB_INPUT_B64 --es msg " + base64.StdEncoding.EncodeToString([]byte(s))
}

// InputTextCommand returns the shell command that types s with
// `input text`: spaces become %s (input's own escape), every argument is
// single-quoted for the shell, and a literal "%s" in s is typed in two
// commands ("%" then "s...") so input does not turn it into a space. Only
// printable ASCII can be typed this way; the error says where the first
// other character is, without quoting the text.
func InputTextCommand(s string) (string, error) {
	if err := protocol.CheckTypable(s); err != nil {
		return "", fmt.Errorf("text: %w", err)
	}
	for i, r := range []rune(s) {
		if r > 0x7e {
			return "", fmt.Errorf("text: character %d is beyond printable ASCII, which adb input text cannot type (it is typed through the input method %s)", i+1, IMEPackage)
		}
	}
	if s == "" {
		return "", nil
	}
	var parts []string
	for {
		i := strings.Index(s, "%s")
		if i < 0 {
			parts = append(parts, s)
			break
		}
		parts = append(parts, s[:i+1])
		s = s[i+1:]
	}
	cmds := make([]string, 0, len(parts))
	for _, p := range parts {
		p = strings.ReplaceAll(p, " ", "%s")
		cmds = append(cmds, "input text "+shellQuote(p))
	}
	return strings.Join(cmds, " && "), nil
}

// shellQuote quotes s as one word for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var keyRE = regexp.MustCompile(`^(KEYCODE_[A-Z0-9_]+|[0-9]{1,3})$`)

// Key sends a key event by name (KEYCODE_BACK; "BACK" is accepted too) or
// number.
func (d *ADBDevice) Key(ctx context.Context, key string) error {
	k := strings.ToUpper(strings.TrimSpace(key))
	if k != "" && !strings.HasPrefix(k, "KEYCODE_") {
		if _, err := strconv.Atoi(k); err != nil {
			k = "KEYCODE_" + k
		}
	}
	if !keyRE.MatchString(k) {
		return fmt.Errorf("key on %s: %w: %q is not a key code name or number", d.serial, ErrInvalidStep, clipText(key, 40))
	}
	return d.op(ctx, "key", d.opts.OpTimeout, func(ctx context.Context) error {
		_, err := d.run(ctx, "input keyevent "+k)
		return err
	})
}

// Back presses the back key.
func (d *ADBDevice) Back(ctx context.Context) error { return d.Key(ctx, "KEYCODE_BACK") }

// Home presses the home key.
func (d *ADBDevice) Home(ctx context.Context) error { return d.Key(ctx, "KEYCODE_HOME") }

var packageRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$`)

// Launch starts pkg's launcher activity with monkey. When monkey finds no
// activity to start, `pm path` tells a package that is not installed (an
// *AppNotInstalledError) from one without a launcher activity
// (ErrInvalidStep).
func (d *ADBDevice) Launch(ctx context.Context, pkg string) error {
	if !packageRE.MatchString(pkg) {
		return fmt.Errorf("launch on %s: %w: %q is not a package name", d.serial, ErrInvalidStep, clipText(pkg, 80))
	}
	return d.op(ctx, "launch "+pkg, d.opts.OpTimeout, func(ctx context.Context) error {
		res, err := d.shell(ctx, "monkey -p "+pkg+" -c android.intent.category.LAUNCHER 1")
		if err != nil {
			return err
		}
		out := string(res.Stdout) + string(res.Stderr)
		if strings.Contains(out, "monkey aborted") || strings.Contains(out, "No activities found") {
			installed, err := d.installed(ctx, pkg)
			if err != nil {
				return fmt.Errorf("no launchable activity in %s, and asking whether it is installed failed: %w", pkg, err)
			}
			if !installed {
				return &AppNotInstalledError{Serial: d.serial, Package: pkg}
			}
			return fmt.Errorf("%w: no launchable activity in %s: the app is installed but has no launcher activity", ErrInvalidStep, pkg)
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("monkey exited with status %d: %s", res.ExitCode, clipText(strings.TrimSpace(out), 200))
		}
		return nil
	})
}

// Wake turns the screen on with KEYCODE_WAKEUP (Android 5 and later),
// which leaves a screen that is on as it is.
func (d *ADBDevice) Wake(ctx context.Context) error {
	return d.op(ctx, "wake", d.opts.OpTimeout, func(ctx context.Context) error {
		_, err := d.run(ctx, "input keyevent KEYCODE_WAKEUP")
		return err
	})
}

// Unlock wakes the phone and dismisses its keyguard with `wm
// dismiss-keyguard` (Android 8 and later). On a phone with a PIN, pattern
// or password the keyguard asks for it and stays.
func (d *ADBDevice) Unlock(ctx context.Context) error {
	return d.op(ctx, "unlock", d.opts.OpTimeout, func(ctx context.Context) error {
		_, err := d.run(ctx, "input keyevent KEYCODE_WAKEUP && wm dismiss-keyguard")
		return err
	})
}

// OpenURL starts a VIEW intent for rawURL (`am start -a
// android.intent.action.VIEW -d <url>`), which opens it in the app that
// handles it. A URL no app handles fails with am's error.
func (d *ADBDevice) OpenURL(ctx context.Context, rawURL string) error {
	if err := protocol.ValidateURL(rawURL); err != nil {
		return fmt.Errorf("open_url on %s: %w: %w", d.serial, ErrInvalidStep, err)
	}
	return d.op(ctx, "open_url", d.opts.OpTimeout, func(ctx context.Context) error {
		res, err := d.run(ctx, "am start -a android.intent.action.VIEW -d "+shellQuote(rawURL))
		if err != nil {
			return err
		}
		out := string(res.Stdout) + string(res.Stderr)
		if strings.Contains(out, "Error:") {
			// am says "Error: Activity not started, unable to resolve
			// Intent" with status 0 when no app handles the URL.
			return fmt.Errorf("no app on the phone opens the URL: %s", clipText(strings.TrimSpace(out), 200))
		}
		return nil
	})
}

// ForceStop stops the app with `am force-stop`; an app that is not
// running (or not installed) is left as it is.
func (d *ADBDevice) ForceStop(ctx context.Context, pkg string) error {
	if !packageRE.MatchString(pkg) {
		return fmt.Errorf("force_stop on %s: %w: %q is not a package name", d.serial, ErrInvalidStep, clipText(pkg, 80))
	}
	return d.op(ctx, "force_stop "+pkg, d.opts.OpTimeout, func(ctx context.Context) error {
		_, err := d.run(ctx, "am force-stop "+pkg)
		return err
	})
}

// ClearData deletes the app's data with `pm clear`, which prints
// "Success"; otherwise `pm path` tells an app that is not installed (an
// *AppNotInstalledError) from another failure.
func (d *ADBDevice) ClearData(ctx context.Context, pkg string) error {
	if !packageRE.MatchString(pkg) {
		return fmt.Errorf("clear_data on %s: %w: %q is not a package name", d.serial, ErrInvalidStep, clipText(pkg, 80))
	}
	return d.op(ctx, "clear_data "+pkg, d.opts.OpTimeout, func(ctx context.Context) error {
		res, err := d.shell(ctx, "pm clear "+pkg)
		if err != nil {
			return err
		}
		out := strings.TrimSpace(string(res.Stdout) + string(res.Stderr))
		if res.ExitCode == 0 && strings.Contains(out, "Success") {
			return nil
		}
		installed, ierr := d.installed(ctx, pkg)
		if ierr == nil && !installed {
			return &AppNotInstalledError{Serial: d.serial, Package: pkg}
		}
		return fmt.Errorf("pm clear exited with status %d: %s", res.ExitCode, clipText(out, 200))
	})
}

// RotateCommand returns the shell command that sets orientation: auto
// turns accelerometer rotation on; a fixed orientation turns it off and
// sets user_rotation to its index in protocol.Orientations (0 portrait, 1
// landscape, 2 reverse portrait, 3 reverse landscape).
func RotateCommand(orientation string) (string, error) {
	i := slices.Index(protocol.Orientations, orientation)
	switch {
	case i < 0:
		return "", fmt.Errorf("orientation %q is not one of %s", orientation, strings.Join(protocol.Orientations, ", "))
	case orientation == protocol.OrientationAuto:
		return "settings put system accelerometer_rotation 1", nil
	}
	return fmt.Sprintf("settings put system accelerometer_rotation 0 && settings put system user_rotation %d", i), nil
}

// Rotate sets the screen orientation through the system settings
// (RotateCommand); apps that fix their own orientation keep it.
func (d *ADBDevice) Rotate(ctx context.Context, orientation string) error {
	cmd, err := RotateCommand(orientation)
	if err != nil {
		return fmt.Errorf("rotate on %s: %w: %w", d.serial, ErrInvalidStep, err)
	}
	return d.op(ctx, "rotate", d.opts.OpTimeout, func(ctx context.Context) error {
		_, err := d.run(ctx, cmd)
		return err
	})
}

// installed asks the package manager whether pkg is installed: `pm path`
// prints "package:<apk path>" for an installed package and nothing (exit
// status 1) for one that is not.
func (d *ADBDevice) installed(ctx context.Context, pkg string) (bool, error) {
	res, err := d.shell(ctx, "pm path "+pkg)
	if err != nil {
		return false, err
	}
	out := string(res.Stdout) + string(res.Stderr)
	for line := range strings.Lines(out) {
		if strings.HasPrefix(strings.TrimSpace(line), "package:") {
			return true, nil
		}
	}
	if res.ExitCode != 0 && strings.TrimSpace(out) != "" {
		return false, fmt.Errorf("pm path exited with status %d: %s", res.ExitCode, clipText(strings.TrimSpace(out), 200))
	}
	return false, nil
}
