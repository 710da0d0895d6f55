package capture

import (
	"errors"
	"fmt"

	"github.com/edgeagent/edgeagent/capture/adb"
	"github.com/edgeagent/edgeagent/protocol"
)

// ErrUnauthorized: the phone has not accepted this PC's adb key (or the PC
// may not open its USB device); see PhoneStateError.
var ErrUnauthorized = errors.New("phone not authorized")

// stateGone is the state of a phone the adb server no longer lists.
const stateGone = "gone"

// PhoneStateError reports that a phone cannot be used in its current state,
// and says how to fix it. It satisfies errors.Is(err, ErrUnplugged) for a
// phone that is offline or gone, and errors.Is(err, ErrUnauthorized) for
// one that is unauthorized or lacks permissions.
type PhoneStateError struct {
	Serial string
	State  string // adb state, or "gone" when adb no longer lists the phone
	Err    error  // what failed, when the state was found after a failure
	// Platform is protocol.PlatformIOS for an iPhone, whose fixes differ
	// (WebDriverAgent, not adb); empty for an Android phone.
	Platform string
}

func (e *PhoneStateError) Error() string {
	var s string
	if e.Platform == protocol.PlatformIOS {
		s = iosStateText(e.Serial, e.State)
		if e.Err != nil {
			s += " (" + e.Err.Error() + ")"
		}
		return s
	}
	switch e.State {
	case adb.StateUnauthorized:
		s = fmt.Sprintf("phone %s is unauthorized: unlock it and accept the USB debugging prompt (tick \"Always allow from this computer\"), then run `adb devices`; authorised before? the agent's adb server must use the key the phone accepted (~/.android/adbkey of the user the agent runs as, or ADB_VENDOR_KEYS)", e.Serial)
	case adb.StateNoPermissions:
		s = fmt.Sprintf("phone %s has no permissions: this user may not open its USB device; add a udev rule for the phone (see docs/capture.md), replug it, then run `adb devices`", e.Serial)
	case adb.StateAuthorizing, adb.StateConnecting:
		s = fmt.Sprintf("phone %s is still %s: wait a few seconds; if it stays so, replug it and run `adb devices`", e.Serial, e.State)
	case stateGone:
		s = fmt.Sprintf("phone %s was unplugged (adb no longer lists it): reconnect the USB cable, then run `adb devices`", e.Serial)
	case protocol.DeviceResting:
		s = fmt.Sprintf("phone %s is resting: %s", e.Serial, protocol.StateFix(e.State))
	case adb.StateOffline:
		s = fmt.Sprintf("phone %s is offline: reconnect the USB cable (or restart adb with `adb kill-server`), then run `adb devices`", e.Serial)
	default:
		s = fmt.Sprintf("phone %s is in state %q: it must be in state \"device\"; check it with `adb devices`", e.Serial, e.State)
	}
	if e.Err != nil {
		s += " (" + e.Err.Error() + ")"
	}
	return s
}

// Is maps the state to ErrUnplugged or ErrUnauthorized.
func (e *PhoneStateError) Is(target error) bool {
	switch target {
	case ErrUnplugged:
		return e.State == adb.StateOffline || e.State == stateGone
	case ErrUnauthorized:
		return e.State == adb.StateUnauthorized || e.State == adb.StateNoPermissions
	}
	return false
}

// Unwrap returns the failure that revealed the state.
func (e *PhoneStateError) Unwrap() error { return e.Err }

// iosStateText says why an iPhone in state cannot run jobs and how to fix
// it (docs/capture.md, iPhones).
func iosStateText(udid, state string) string {
	switch state {
	case protocol.DeviceResting:
		return fmt.Sprintf("iPhone %s is resting: %s", udid, protocol.StateFix(state))
	case adb.StateConnecting:
		return fmt.Sprintf("iPhone %s is still connecting: the agent is asking its WebDriverAgent whether it is up; wait a few seconds", udid)
	}
	return fmt.Sprintf("iPhone %s is %s: %s", udid, state, IOSFix(udid, state))
}

// IOSFix is what to do about the iPhone with udid in state
// (docs/capture.md, iPhones: States and fixes).
func IOSFix(udid, state string) string {
	switch state {
	case protocol.DeviceOffline:
		return fmt.Sprintf("WebDriverAgent on it does not answer; start WebDriverAgent on the iPhone (from a Mac: `xcodebuild test-without-building -project WebDriverAgent.xcodeproj -scheme WebDriverAgentRunner -destination id=%s`, or with go-ios: `ios runwda --udid %s`), check its wda_url in the agent's config and that the port forwarder runs (`iproxy 8100 8100 -u %s`)", udid, udid, udid)
	case protocol.DeviceUnauthorized:
		return "it is locked with a passcode (WebDriverAgent cannot unlock it) or does not trust this computer; unlock it, set Settings > Display & Brightness > Auto-Lock to Never, and tap Trust if it asks whether to trust this computer"
	}
	return "it must be in state \"device\"; check that WebDriverAgent answers at its wda_url (`curl WDA_URL/status`)"
}

// StateProblem returns the error explaining why a phone in state cannot run
// jobs, or nil for state "device".
func StateProblem(serial, state string) error {
	if state == protocol.DeviceReady {
		return nil
	}
	return &PhoneStateError{Serial: serial, State: state}
}
