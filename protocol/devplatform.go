package protocol

import "fmt"

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
		}
		if why != "" {
			out = append(out, fmt.Sprintf("steps[%d].op %s: %s", i, s.Op, why))
		}
	}
	return out
}
