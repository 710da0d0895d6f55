package protocol

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Phone states the agent sets itself (adb reports the others). A phone in
// either state is listed but not offered jobs; Device.Reason says why.
const (
	// DeviceResting: too hot or battery too low (docs/capture.md, Resting
	// phones); offered again once it recovers.
	DeviceResting = "resting"
	// DeviceQuarantined: listed by adb but stopped answering, and the
	// recovery ladder gave up (docs/capture.md, Recovery).
	DeviceQuarantined = "quarantined"
)

// PhoneFacts describes one phone as the agent last read it: at connect and
// on a slow timer afterwards (docs/protocol.md, Phone facts). Zero values
// mean "not known"; pointer fields tell "not known" from zero.
type PhoneFacts struct {
	AndroidVersion string `json:"android_version,omitempty"` // ro.build.version.release, e.g. "14"
	IOSVersion     string `json:"ios_version,omitempty"`     // an iPhone's iOS version, e.g. "17.5.1"
	SDK            int    `json:"sdk,omitempty"`             // ro.build.version.sdk, e.g. 34
	Fingerprint    string `json:"fingerprint,omitempty"`     // ro.build.fingerprint
	ScreenWidth    int    `json:"screen_width,omitempty"`    // pixels, natural orientation
	ScreenHeight   int    `json:"screen_height,omitempty"`   // pixels, natural orientation
	Density        int    `json:"density,omitempty"`         // dpi

	BatteryLevel  *int     `json:"battery_level,omitempty"`   // percent, 0–100
	BatteryTempC  *float64 `json:"battery_temp_c,omitempty"`  // degrees Celsius
	Charging      *bool    `json:"charging,omitempty"`        // plugged in (AC, USB or wireless)
	BatteryHealth string   `json:"battery_health,omitempty"`  // good, overheat, dead, over_voltage, cold, unknown
	ScreenOn      *bool    `json:"screen_on,omitempty"`       //
	Locked        *bool    `json:"locked,omitempty"`          // keyguard showing
	FreeStorageMB *int64   `json:"free_storage_mb,omitempty"` // free space on /data
	IME           string   `json:"ime,omitempty"`             // Unicode text IME installed ("" when none)
	Locale        string   `json:"locale,omitempty"`          // persist.sys.locale, e.g. "ja-JP"
	TimeZone      string   `json:"time_zone,omitempty"`       // persist.sys.timezone, e.g. "Asia/Tokyo"
	// Apps are the installed apps a job may ask for (third-party apps and
	// updated system apps), with their versions, sorted by package; at
	// most MaxPhoneApps. nil: not known.
	Apps            []AppVersion `json:"apps,omitempty"`
	ReadAtUnixMilli int64        `json:"read_at_ms,omitempty"` // agent's wall clock when read
}

// TypesUnicode reports whether the phone d can type text beyond ASCII, as
// its facts tell: known once its facts were read (PhoneFacts.IME names the
// input method, "" when it has none).
func (d Device) TypesUnicode() (ok, known bool) {
	if d.Facts == nil || d.Facts.ReadAtUnixMilli == 0 {
		return false, false
	}
	return d.Facts.IME != "", true
}

// factsFit reports whether f satisfies the fact limits of s; a limit on a
// fact that f does not know (nil f, a nil pointer, a zero number, apps not
// listed) fails.
func (s DeviceSelector) factsFit(f *PhoneFacts) bool {
	if !s.hasFactLimits() {
		return true
	}
	if f == nil {
		return false
	}
	if !s.appsFit(f) {
		return false
	}
	if s.MinBattery > 0 && (f.BatteryLevel == nil || *f.BatteryLevel < s.MinBattery) {
		return false
	}
	if s.MaxTempC > 0 && (f.BatteryTempC == nil || *f.BatteryTempC > s.MaxTempC) {
		return false
	}
	if s.MinSDK > 0 && (f.SDK == 0 || f.SDK < s.MinSDK) {
		return false
	}
	if s.MaxSDK > 0 && (f.SDK == 0 || f.SDK > s.MaxSDK) {
		return false
	}
	if s.MinScreenWidth > 0 && (f.ScreenWidth == 0 || f.ScreenWidth < s.MinScreenWidth) {
		return false
	}
	if s.MinScreenHeight > 0 && (f.ScreenHeight == 0 || f.ScreenHeight < s.MinScreenHeight) {
		return false
	}
	return true
}

func (s DeviceSelector) hasFactLimits() bool {
	return s.MinBattery != 0 || s.MaxTempC != 0 || s.MinSDK != 0 || s.MaxSDK != 0 ||
		s.MinScreenWidth != 0 || s.MinScreenHeight != 0 || len(s.Apps) > 0
}

// describeFacts renders the fact limits of s as "min_battery=50" parts.
func (s DeviceSelector) describeFacts() []string {
	var parts []string
	add := func(name string, v int) {
		if v != 0 {
			parts = append(parts, name+"="+strconv.Itoa(v))
		}
	}
	add("min_battery", s.MinBattery)
	if s.MaxTempC != 0 {
		parts = append(parts, "max_temp_c="+strconv.FormatFloat(s.MaxTempC, 'f', -1, 64))
	}
	add("min_sdk", s.MinSDK)
	add("max_sdk", s.MaxSDK)
	add("min_screen_width", s.MinScreenWidth)
	add("min_screen_height", s.MinScreenHeight)
	return append(parts, s.describeApps()...)
}

// Validate reports the first field of s that no phone can meet: a
// platform that is not one of Platforms, a battery level outside 1–100, a temperature outside 1–150 °C, a
// negative number, min_sdk above max_sdk, more than MaxAppRequirements
// apps, or an app whose key is not a package name or whose requirement
// ParseAppRequirement refuses.
func (s DeviceSelector) Validate() error {
	switch {
	case s.Platform != "" && !slices.Contains(Platforms, s.Platform):
		return fmt.Errorf("platform: %q is not one of %s", s.Platform, strings.Join(Platforms, ", "))
	case s.MinBattery < 0 || s.MinBattery > 100:
		return fmt.Errorf("min_battery: %d is not a battery level from 1 to 100 percent", s.MinBattery)
	case math.IsNaN(s.MaxTempC) || s.MaxTempC < 0 || s.MaxTempC > 150:
		return fmt.Errorf("max_temp_c: %v is not a temperature from 1 to 150 °C", s.MaxTempC)
	case s.MinSDK < 0:
		return fmt.Errorf("min_sdk: %d is negative", s.MinSDK)
	case s.MaxSDK < 0:
		return fmt.Errorf("max_sdk: %d is negative", s.MaxSDK)
	case s.MinSDK > 0 && s.MaxSDK > 0 && s.MinSDK > s.MaxSDK:
		return fmt.Errorf("min_sdk %d is above max_sdk %d: no phone fits", s.MinSDK, s.MaxSDK)
	case s.MinScreenWidth < 0:
		return fmt.Errorf("min_screen_width: %d is negative", s.MinScreenWidth)
	case s.MinScreenHeight < 0:
		return fmt.Errorf("min_screen_height: %d is negative", s.MinScreenHeight)
	}
	return s.validateApps()
}

// Summary renders the facts people look at first, in one line:
// "Android 13 (SDK 33), 720x1280 420dpi, battery 80% 31.5 °C charging
// good, screen on unlocked, 2048 MB free, IME com.android.adbkeyboard,
// 12 apps"; unknown facts are left out, and "" when nothing is known.
func (f *PhoneFacts) Summary() string {
	if f == nil {
		return ""
	}
	var parts []string
	switch {
	case f.IOSVersion != "":
		parts = append(parts, "iOS "+f.IOSVersion)
	case f.AndroidVersion != "" && f.SDK != 0:
		parts = append(parts, fmt.Sprintf("Android %s (SDK %d)", f.AndroidVersion, f.SDK))
	case f.AndroidVersion != "":
		parts = append(parts, "Android "+f.AndroidVersion)
	case f.SDK != 0:
		parts = append(parts, fmt.Sprintf("SDK %d", f.SDK))
	}
	if f.ScreenWidth != 0 && f.ScreenHeight != 0 {
		sc := fmt.Sprintf("%dx%d", f.ScreenWidth, f.ScreenHeight)
		if f.Density != 0 {
			sc += fmt.Sprintf(" %ddpi", f.Density)
		}
		parts = append(parts, sc)
	}
	var bat []string
	if f.BatteryLevel != nil {
		bat = append(bat, fmt.Sprintf("%d%%", *f.BatteryLevel))
	}
	if f.BatteryTempC != nil {
		bat = append(bat, fmt.Sprintf("%.1f °C", *f.BatteryTempC))
	}
	if f.Charging != nil {
		if *f.Charging {
			bat = append(bat, "charging")
		} else {
			bat = append(bat, "not charging")
		}
	}
	if f.BatteryHealth != "" {
		bat = append(bat, f.BatteryHealth)
	}
	if len(bat) > 0 {
		parts = append(parts, "battery "+strings.Join(bat, " "))
	}
	var scr []string
	if f.ScreenOn != nil {
		scr = append(scr, map[bool]string{true: "on", false: "off"}[*f.ScreenOn])
	}
	if f.Locked != nil {
		scr = append(scr, map[bool]string{true: "locked", false: "unlocked"}[*f.Locked])
	}
	if len(scr) > 0 {
		parts = append(parts, "screen "+strings.Join(scr, " "))
	}
	if f.FreeStorageMB != nil {
		parts = append(parts, fmt.Sprintf("%d MB free", *f.FreeStorageMB))
	}
	if f.IME != "" {
		parts = append(parts, "IME "+f.IME)
	}
	switch len(f.Apps) {
	case 0:
	case 1:
		parts = append(parts, "1 app")
	default:
		parts = append(parts, fmt.Sprintf("%d apps", len(f.Apps)))
	}
	return strings.Join(parts, ", ")
}
