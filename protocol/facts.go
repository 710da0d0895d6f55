package protocol

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
	SDK            int    `json:"sdk,omitempty"`             // ro.build.version.sdk, e.g. 34
	Fingerprint    string `json:"fingerprint,omitempty"`     // ro.build.fingerprint
	ScreenWidth    int    `json:"screen_width,omitempty"`    // pixels, natural orientation
	ScreenHeight   int    `json:"screen_height,omitempty"`   // pixels, natural orientation
	Density        int    `json:"density,omitempty"`         // dpi

	BatteryLevel    *int     `json:"battery_level,omitempty"`   // percent, 0–100
	BatteryTempC    *float64 `json:"battery_temp_c,omitempty"`  // degrees Celsius
	Charging        *bool    `json:"charging,omitempty"`        // plugged in (AC, USB or wireless)
	BatteryHealth   string   `json:"battery_health,omitempty"`  // good, overheat, dead, over_voltage, cold, unknown
	ScreenOn        *bool    `json:"screen_on,omitempty"`       //
	Locked          *bool    `json:"locked,omitempty"`          // keyguard showing
	FreeStorageMB   *int64   `json:"free_storage_mb,omitempty"` // free space on /data
	IME             string   `json:"ime,omitempty"`             // Unicode text IME installed ("" when none)
	ReadAtUnixMilli int64    `json:"read_at_ms,omitempty"`      // agent's wall clock when read
}
