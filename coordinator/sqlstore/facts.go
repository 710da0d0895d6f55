package sqlstore

import (
	"fmt"
	"maps"
	"slices"

	"github.com/edgeagent/edgeagent/protocol"
)

// ClaimDevice is one usable phone as the stores' grant SQL sees it: the
// fields a selector matches (protocol.DeviceSelector.Matches), with the
// facts a selector may limit null when the agent does not know them.
type ClaimDevice struct {
	Serial string `json:"serial"`
	// Platform is protocol.PlatformOf the phone: android for a phone
	// reported without one.
	Platform     string   `json:"platform"`
	Model        string   `json:"model"`
	Tags         []string `json:"tags"`
	Battery      *int     `json:"battery"`       // percent
	TempC        *float64 `json:"temp_c"`        // battery °C
	SDK          *int     `json:"sdk"`           // API level
	ScreenWidth  *int     `json:"screen_width"`  // pixels
	ScreenHeight *int     `json:"screen_height"` // pixels
	// IME: whether the phone can type text beyond ASCII (null when its
	// facts do not tell); a task that needs it is not granted on false.
	IME *bool `json:"ime"`
	// Projects and Only: the projects whose jobs the phone may take
	// (jobstore.DeviceProjects): with only, exactly these; otherwise all
	// but these.
	Projects []string `json:"projects"`
	Only     bool     `json:"projects_only"`
	// Apps are the phone's installed apps by package, with their version
	// keys (null when its facts do not list its apps).
	Apps map[string]ClaimApp `json:"apps"`
}

// ClaimApp is one installed app as the grant SQL sees it: the sortable
// keys of its versionName (protocol.VersionKey) and versionCode
// (protocol.CodeKey), null when they do not compare.
type ClaimApp struct {
	Name *string `json:"name"`
	Code *string `json:"code"`
}

// NewClaimDevice returns d as the grant SQL sees it.
func NewClaimDevice(d protocol.Device) ClaimDevice {
	c := ClaimDevice{Serial: d.Serial, Platform: protocol.PlatformOf(d), Model: d.Model, Tags: d.Tags, Projects: []string{}}
	if c.Tags == nil {
		c.Tags = []string{}
	}
	if f := d.Facts; f != nil {
		c.Battery, c.TempC = f.BatteryLevel, f.BatteryTempC
		c.SDK, c.ScreenWidth, c.ScreenHeight = known(f.SDK), known(f.ScreenWidth), known(f.ScreenHeight)
		if f.Apps != nil {
			c.Apps = claimApps(f)
		}
	}
	if ok, isKnown := d.TypesUnicode(); isKnown {
		c.IME = &ok
	}
	return c
}

// claimApps returns the apps of f by package as protocol.PhoneFacts.App
// finds them: the first entry of a package, among the first
// protocol.MaxPhoneApps.
func claimApps(f *protocol.PhoneFacts) map[string]ClaimApp {
	apps := map[string]ClaimApp{}
	for _, a := range f.Apps[:min(len(f.Apps), protocol.MaxPhoneApps)] {
		if _, dup := apps[a.Package]; dup {
			continue
		}
		var c ClaimApp
		if k, ok := protocol.VersionKey(a.VersionName); ok {
			c.Name = &k
		}
		if k, ok := protocol.CodeKey(a.VersionCode); ok {
			c.Code = &k
		}
		apps[a.Package] = c
	}
	return apps
}

// AppKey is one comparison of a selector's app requirements
// (protocol.ParseAppRequirement) as the grant SQL reads it: the stored
// task carries them as app_keys (PrepareSubmit), each of which a phone
// must satisfy. Field is "name" (the versionName's key), "code" (the
// versionCode's) or "" with Op "*" (installed).
type AppKey struct {
	Package string `json:"package"`
	Field   string `json:"field"`
	Op      string `json:"op"`
	Key     string `json:"key"`
}

// AppKeys returns the comparisons of the app requirements of sel, in
// package order. A requirement that does not parse is an error (tasks
// are validated before).
func AppKeys(sel protocol.DeviceSelector) ([]AppKey, error) {
	var keys []AppKey
	for _, pkg := range slices.Sorted(maps.Keys(sel.Apps)) {
		cs, err := protocol.ParseAppRequirement(sel.Apps[pkg])
		if err != nil {
			return nil, fmt.Errorf("device: apps.%s: %w", pkg, err)
		}
		for _, c := range cs {
			k := AppKey{Package: pkg, Op: c.Op, Key: c.Key}
			switch {
			case c.Op == protocol.AppInstalled:
			case c.Code:
				k.Field = "code"
			default:
				k.Field = "name"
			}
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// known returns &n, or nil for 0 (not known).
func known(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}
