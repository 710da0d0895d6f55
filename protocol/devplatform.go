package protocol

import (
	"fmt"
	"strconv"
	"strings"
)

// Phone platforms (Device.Platform, DeviceSelector.Platform). A phone
// without a platform is an Android phone: agents that predate iPhones
// send none.
const (
	PlatformAndroid = "android"
	PlatformIOS     = "ios"
)

// Platforms are the platform names a selector may ask for.
var Platforms = []string{PlatformAndroid, PlatformIOS}

// PlatformOf returns d's platform, PlatformAndroid when it names none.
func PlatformOf(d Device) string {
	if d.Platform == "" {
		return PlatformAndroid
	}
	return d.Platform
}

// UnsupportedOn returns, for each thing t asks that a phone of platform
// cannot do, a message naming the field and why (docs/capture.md,
// iPhones): an iPhone driven through WebDriverAgent cannot record its
// screen, has no logcat, no Android key codes beyond home and volume,
// installs no APK and cannot clear an app's data. Nil when the platform can
// run all of t.
func UnsupportedOn(platform string, t Task) []string {
	if platform != PlatformIOS {
		return nil
	}
	var out []string
	if t.Logcat {
		out = append(out, "logcat: an iPhone has no logcat")
	}
	for i, s := range t.Steps {
		why := ""
		switch s.Op {
		case OpRecordStart, OpRecordStop:
			why = "an iPhone's screen cannot be recorded without a Mac"
		case OpInstallApp:
			why = "an iPhone installs no APK"
		case OpClearData:
			why = "WebDriverAgent cannot clear an iOS app's data"
		case OpKey:
			if _, ok := IOSButton(s.Key); !ok {
				out = append(out, fmt.Sprintf("steps[%d].key %q: %s", i, clip(s.Key, 40), IOSKeys))
			}
		}
		if why != "" {
			out = append(out, fmt.Sprintf("steps[%d].op %s: %s", i, s.Op, why))
		}
	}
	return out
}

// IOSKeys says which keys an iPhone has.
const IOSKeys = "an iPhone has only the keys KEYCODE_HOME (3), KEYCODE_VOLUME_UP (24) and KEYCODE_VOLUME_DOWN (25)"

// iosButtons maps the Android key codes an iPhone has to its buttons, as
// WebDriverAgent's pressButton names them.
var iosButtons = map[string]string{
	"KEYCODE_HOME": "home", "3": "home",
	"KEYCODE_VOLUME_UP": "volumeUp", "24": "volumeUp",
	"KEYCODE_VOLUME_DOWN": "volumeDown", "25": "volumeDown",
}

// IOSButton returns the iPhone button (WebDriverAgent's home, volumeUp,
// volumeDown) of an Android key code name or number: KEYCODE_HOME (3),
// KEYCODE_VOLUME_UP (24), KEYCODE_VOLUME_DOWN (25); a name without the
// KEYCODE_ prefix ("HOME") is accepted. ok is false for any other key.
func IOSButton(key string) (button string, ok bool) {
	k := strings.ToUpper(strings.TrimSpace(key))
	if _, err := strconv.Atoi(k); err != nil && k != "" && !strings.HasPrefix(k, "KEYCODE_") {
		k = "KEYCODE_" + k
	}
	b, ok := iosButtons[k]
	return b, ok
}
