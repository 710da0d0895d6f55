package protocol

import (
	"slices"
	"sort"
	"strings"
)

// Device states, as adb reports them. Only a phone in state DeviceReady can
// run a job; the others say why it cannot.
const (
	DeviceReady         = "device"
	DeviceOffline       = "offline"
	DeviceUnauthorized  = "unauthorized"
	DeviceNoPermissions = "no permissions"
)

// Device describes one phone attached to an agent.
type Device struct {
	Serial string `json:"serial"`
	State  string `json:"state"` // DeviceReady, DeviceOffline, DeviceUnauthorized, DeviceNoPermissions, or what adb said
	// Platform is PlatformAndroid or PlatformIOS; empty is Android
	// (PlatformOf). An iPhone's Serial is its UDID.
	Platform string   `json:"platform,omitempty"`
	Model    string   `json:"model,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	// Reason says why a phone in state DeviceResting, DeviceRecovering or
	// DeviceQuarantined is not offered jobs ("battery 41.5 °C over 40 °C"),
	// or that the agent connects an offline network phone again
	// (docs/capture.md, Network phones); empty otherwise.
	Reason string `json:"reason,omitempty"`
	// Facts are the phone's facts as last read (nil when never read).
	Facts *PhoneFacts `json:"facts,omitempty"`
	// Recovery is what the recovery ladder did to the phone (nil: nothing).
	Recovery *DeviceRecovery `json:"recovery,omitempty"`
}

// Ready reports whether the phone can take a job: it has a serial and is in
// state DeviceReady.
func (d Device) Ready() bool { return d.State == DeviceReady && d.Serial != "" }

// ReadyDevices returns the phones that can take a job, sorted by serial.
func ReadyDevices(ds []Device) []Device {
	var out []Device
	for _, d := range ds {
		if d.Ready() {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Serial < out[j].Serial })
	return out
}

// DeviceSelector chooses the phone a job runs on. Empty fields match any.
type DeviceSelector struct {
	Serial string `json:"serial,omitempty"`
	// Platform limits the job to phones of one platform (PlatformAndroid
	// or PlatformIOS); empty: either.
	Platform string   `json:"platform,omitempty"`
	Model    string   `json:"model,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	// Fact limits (docs/protocol.md, Phone facts): a phone whose fact is
	// not known does not match a selector that sets a limit on it. Zero
	// sets no limit.
	MinBattery      int     `json:"min_battery,omitempty"`       // battery level at least this percent
	MaxTempC        float64 `json:"max_temp_c,omitempty"`        // battery temperature at most this, °C
	MinSDK          int     `json:"min_sdk,omitempty"`           // Android API level at least this
	MaxSDK          int     `json:"max_sdk,omitempty"`           // Android API level at most this
	MinScreenWidth  int     `json:"min_screen_width,omitempty"`  // pixels, natural orientation
	MinScreenHeight int     `json:"min_screen_height,omitempty"` // pixels, natural orientation
	// Apps requires installed apps: package → requirement (">=5.2",
	// "code>=52100", "*"; ParseAppRequirement). A phone whose apps are
	// not known, or that lacks one, does not match.
	Apps map[string]string `json:"apps,omitempty"`
}

// Matches reports whether phone d can run a job with selector s: d is in
// state DeviceReady, and every field set in s matches (serial and model
// exactly, d carries every tag of s, and d's facts are known and within
// every fact limit of s, every app of s installed at a version its
// requirement allows). The coordinator's stores implement
// the same rule in SQL (their conformance suite, coordinator/storetest,
// checks it case by case).
func (s DeviceSelector) Matches(d Device) bool {
	return d.State == DeviceReady && s.Fits(d)
}

// Fits reports whether d's fields satisfy s, whatever d's state: the phone
// is the one s asks for, though it may not be usable now.
func (s DeviceSelector) Fits(d Device) bool {
	if s.Serial != "" && s.Serial != d.Serial {
		return false
	}
	if s.Model != "" && s.Model != d.Model {
		return false
	}
	if s.Platform != "" && s.Platform != PlatformOf(d) {
		return false
	}
	for _, t := range s.Tags {
		if !slices.Contains(d.Tags, t) {
			return false
		}
	}
	return s.factsFit(d.Facts)
}

// Describe renders the selector as "serial=X model=Y tags=a,b", or "any" when
// it is empty.
func (s DeviceSelector) Describe() string {
	var parts []string
	if s.Serial != "" {
		parts = append(parts, "serial="+s.Serial)
	}
	if s.Model != "" {
		parts = append(parts, "model="+s.Model)
	}
	if s.Platform != "" {
		parts = append(parts, "platform="+s.Platform)
	}
	if len(s.Tags) > 0 {
		parts = append(parts, "tags="+strings.Join(s.Tags, ","))
	}
	parts = append(parts, s.describeFacts()...)
	if len(parts) == 0 {
		return "any"
	}
	return strings.Join(parts, " ")
}

// DeviceFix says what to do about phone d in its state so that it can take
// jobs again, for people ("" for DeviceReady): StateFixOn of its platform
// (PlatformOf) and state.
func DeviceFix(d Device) string { return StateFixOn(PlatformOf(d), d.State) }

// StateFixOn says what to do about a phone of platform in state: an
// iPhone's fixes are about its WebDriverAgent (docs/capture.md, iPhones),
// an Android phone's about adb and USB (StateFix).
func StateFixOn(platform, state string) string {
	if platform != PlatformIOS {
		return StateFix(state)
	}
	switch state {
	case DeviceReady:
		return ""
	case DeviceUnauthorized:
		return "unlock it (it has a passcode WebDriverAgent cannot enter), set Settings > Display & Brightness > Auto-Lock to Never, and tap Trust if it asks whether to trust this computer"
	case DeviceOffline:
		return "start WebDriverAgent on the iPhone, check its wda_url in the agent's config and that the port forwarder runs (`curl WDA_URL/status` must answer)"
	case DeviceResting:
		return StateFix(state)
	case DeviceQuarantined:
		return "its WebDriverAgent stopped answering: restart WebDriverAgent on the iPhone (or the iPhone); it is offered again once it answers the agent's probe"
	case DeviceRecovering:
		return "its WebDriverAgent stopped answering; the agent is re-creating its WebDriverAgent session (see its reason)"
	}
	return "it must be in state \"device\"; check that WebDriverAgent answers at its wda_url (`curl WDA_URL/status`)"
}

// StateFix says what to do about an Android phone in state so that it can
// take jobs again, for people ("" for DeviceReady). The agent's step
// errors (docs/capture.md, What the agent sees) give the same fixes; an
// iPhone's are StateFixOn's.
func StateFix(state string) string {
	switch state {
	case DeviceReady:
		return ""
	case DeviceUnauthorized:
		return "unlock it and accept the USB debugging prompt (tick \"Always allow from this computer\"); authorised before? the agent's adb server must use the key the phone accepted (~/.android/adbkey of the user the agent runs as, or ADB_VENDOR_KEYS)"
	case DeviceNoPermissions:
		return "the agent's user may not open its USB device: add a udev rule for the phone and replug it"
	case DeviceOffline:
		return "reconnect the USB cable (or restart adb with `adb kill-server`)"
	case DeviceResting:
		return "it is offered jobs again once it has cooled down or charged (see its reason)"
	case DeviceQuarantined:
		return "it stopped answering while listed: replug or reboot it; it is offered again once it answers the agent's probe"
	case DeviceRecovering:
		return "it stopped answering while listed; the agent is reconnecting it (see its reason)"
	}
	return "it must be in state \"device\"; check it with `adb devices`"
}

// NotReadyReason explains why no phone can take a job with selector s when
// phones that fit it (Fits) are listed but none is in state DeviceReady:
// "phone R58M12 is unauthorized: unlock it and accept …", naming each
// state of each platform once with its fix for the platform (DeviceFix; the first phone in
// serial order for each). It
// returns "" when no listed phone fits s, or one that fits is ready.
func (s DeviceSelector) NotReadyReason(listed []Device) string {
	var fit []Device
	for _, d := range listed {
		if !s.Fits(d) {
			continue
		}
		if d.State == DeviceReady {
			return ""
		}
		fit = append(fit, d)
	}
	sort.Slice(fit, func(i, j int) bool { return fit[i].Serial < fit[j].Serial })
	var parts []string
	seen := map[string]bool{}
	for _, d := range fit {
		key := PlatformOf(d) + " " + d.State // an iPhone's fix is not an Android phone's
		if seen[key] {
			continue
		}
		seen[key] = true
		why := ""
		if d.Reason != "" {
			why = " (" + d.Reason + ")"
		}
		parts = append(parts, "phone "+d.Serial+" is "+d.State+why+": "+DeviceFix(d))
	}
	return strings.Join(parts, "; ")
}
