package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/edgeagent/edgeagent/capture/adb"
	"github.com/edgeagent/edgeagent/protocol"
)

// Device is one phone. All methods are safe for concurrent use, take a
// context and stop waiting as soon as it is done. Coordinates are screen
// pixels.
type Device interface {
	// Serial is the adb serial of the phone.
	Serial() string
	// Info describes the phone as reported to the coordinator. State is
	// "device" when the phone is usable. It must be cheap (no I/O): the
	// Inventory calls it under its lock.
	Info() protocol.Device
	// Screenshot returns the current screen as a PNG.
	Screenshot(ctx context.Context) ([]byte, error)
	// UIDump returns the current view hierarchy as uiautomator XML
	// (<hierarchy> root).
	UIDump(ctx context.Context) ([]byte, error)
	// Tap taps at (x, y).
	Tap(ctx context.Context, x, y int) error
	// Swipe drags from (x1, y1) to (x2, y2) over d. A swipe that starts and
	// ends at the same point is a long press.
	Swipe(ctx context.Context, x1, y1, x2, y2 int, d time.Duration) error
	// Text types s into the focused field.
	Text(ctx context.Context, s string) error
	// Key sends one key event, by Android key code name ("KEYCODE_HOME",
	// "KEYCODE_BACK", ...) or number.
	Key(ctx context.Context, key string) error
	// Launch starts the app with package name pkg.
	Launch(ctx context.Context, pkg string) error
	// Wake turns the screen on (KEYCODE_WAKEUP); an awake phone stays so.
	Wake(ctx context.Context) error
	// Unlock turns the screen on and dismisses the keyguard of a phone
	// without a PIN, pattern or password (a swipe lock).
	Unlock(ctx context.Context) error
	// OpenURL opens rawURL with a VIEW intent: a web page in the browser,
	// a deep link in the app that handles it.
	OpenURL(ctx context.Context, rawURL string) error
	// ForceStop stops every process of the app pkg.
	ForceStop(ctx context.Context, pkg string) error
	// ClearData deletes the data of the app pkg (and stops it), as a fresh
	// install would have it.
	ClearData(ctx context.Context, pkg string) error
	// Rotate fixes the screen in orientation (protocol.Orientations), or
	// gives it back to the accelerometer (protocol.OrientationAuto).
	Rotate(ctx context.Context, orientation string) error
	// StartRecording starts a screen recording. ctx bounds the start only:
	// the recording runs until Stop or Abort, and the caller must call one of
	// them.
	StartRecording(ctx context.Context) (Recording, error)
}

// Recording is a screen recording in progress.
type Recording interface {
	// Stop ends the recording and streams the MP4 into w, returning the
	// number of bytes written. The recording is finished whatever Stop
	// returns; on error, w may hold a partial file.
	Stop(ctx context.Context, w io.Writer) (int64, error)
	// Abort kills the recording at once (on the phone too) and discards it.
	// It is idempotent and safe to call after Stop.
	Abort()
}

// LimitedRecording is a Recording that the phone ends on its own at a time
// limit (screenrecord's --time-limit, at most 180 s).
type LimitedRecording interface {
	Recording
	// CutAtLimit reports, after a successful Stop, whether the phone had
	// already ended the recording at its time limit, and that limit: the
	// file is complete, but what happened on screen after the limit is not
	// in it.
	CutAtLimit() (limit time.Duration, cut bool)
}

// Errors callers branch on.
var (
	// ErrNoDevice: no connected phone matches (see NoDeviceError).
	ErrNoDevice = errors.New("no matching phone")
	// ErrUnplugged: the phone went away; every call on it fails.
	ErrUnplugged = errors.New("device unplugged")
	// ErrClosed: the Runner was closed (job stopped or finished).
	ErrClosed = errors.New("runner closed")
	// ErrInvalidStep: the step cannot be run as written (a negative
	// coordinate, an unknown op, a key that is no key code, text the phone
	// cannot type, record_stop without a recording, an artifact name used
	// twice): running it again anywhere fails the same way.
	ErrInvalidStep = errors.New("invalid step")
	// ErrAppNotInstalled: a package the step names is not installed on the
	// phone (see AppNotInstalledError).
	ErrAppNotInstalled = errors.New("app not installed")
	// ErrAssertion: a check the task makes did not hold (an assert step,
	// a wait_for an element to go that stayed).
	ErrAssertion = errors.New("assertion failed")
	// ErrElementNotFound: no element on screen matched a step's selector
	// (see ElementNotFoundError).
	ErrElementNotFound = errors.New("element not found")
	// ErrExtract: an extract step found its element but could not read the
	// value as the step asks (a range where one price was asked, no
	// currency, two prices).
	ErrExtract = errors.New("extract failed")
	// ErrADBServerGone: the adb server stopped answering (connection
	// refused) and could not be started again; the same error as
	// adb.ErrServerGone.
	ErrADBServerGone = adb.ErrServerGone
)

// IMEPackage is the input method a phone needs to type text beyond ASCII:
// ADBKeyboard, which types the text of an ADB_INPUT_B64 broadcast
// (docs/capture.md, Text beyond ASCII).
const (
	IMEPackage = "com.android.adbkeyboard"
	IMEID      = IMEPackage + "/.AdbIME"
)

// ErrNoIME: a text step has characters beyond printable ASCII and the
// phone has no input method that types them (see NoIMEError).
var ErrNoIME = errors.New("no input method for text beyond ASCII")

// NoIMEError reports that a phone cannot type text beyond ASCII, and says
// what to install. It satisfies errors.Is(err, ErrNoIME) and
// errors.Is(err, ErrInvalidStep): the step cannot run on that phone.
type NoIMEError struct {
	Serial string
}

func (e *NoIMEError) Error() string {
	return fmt.Sprintf("phone %s cannot type text beyond ASCII: adb input text types ASCII only, and the input method ADBKeyboard (%s) is not installed; install it on the phone (`adb -s %s install ADBKeyboard.apk`) and run the job again; the agent enables and selects it while it types", e.Serial, IMEPackage, e.Serial)
}

// Is makes errors.Is hold for ErrNoIME and ErrInvalidStep.
func (e *NoIMEError) Is(target error) bool { return target == ErrNoIME || target == ErrInvalidStep }

// imeReporter is a Device that knows, without I/O, whether it can type
// text beyond ASCII.
type imeReporter interface {
	// HasIME reports whether the phone has the input method (IMEPackage);
	// known is false when it has not been asked yet.
	HasIME() (has, known bool)
}

// TypesUnicode reports whether d can type text beyond ASCII (it has the
// input method IMEPackage); known is false when d cannot tell (yet). It does
// no I/O.
func TypesUnicode(d Device) (ok, known bool) {
	if r, isR := d.(imeReporter); isR {
		return r.HasIME()
	}
	return false, false
}

// AppNotInstalledError reports that the package a step names is not
// installed on the phone. It satisfies errors.Is(err, ErrAppNotInstalled).
type AppNotInstalledError struct {
	Serial  string
	Package string
	// Platform is protocol.PlatformIOS for an iPhone (Package is then a
	// bundle id); empty for an Android phone.
	Platform string
}

func (e *AppNotInstalledError) Error() string {
	if e.Platform == protocol.PlatformIOS {
		return fmt.Sprintf("app %s is not installed on iPhone %s (WebDriverAgent cannot launch it): install it (App Store, TestFlight or Xcode) or fix the bundle id", e.Package, e.Serial)
	}
	return fmt.Sprintf("app %s is not installed on phone %s (`adb -s %s shell pm path %s` finds nothing): install it or fix the package name", e.Package, e.Serial, e.Serial, e.Package)
}

// Is makes errors.Is(err, ErrAppNotInstalled) hold.
func (e *AppNotInstalledError) Is(target error) bool { return target == ErrAppNotInstalled }

// invalidStep returns an error wrapping ErrInvalidStep.
func invalidStep(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidStep, fmt.Sprintf(format, args...))
}

// ctxErr returns the context's error, also wrapping its cause when the cause
// differs (for example fencing.ErrRevoked), so both errors.Is checks hold.
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

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctxErr(ctx)
	}
}
