package adb

import (
	"fmt"
	"strings"
)

// Device states as the adb server reports them.
const (
	StateDevice        = "device"
	StateOffline       = "offline"
	StateUnauthorized  = "unauthorized"
	StateNoPermissions = "no permissions"
	StateAuthorizing   = "authorizing"
	StateConnecting    = "connecting"
)

// DeviceEntry is one line of the server's device list.
type DeviceEntry struct {
	Serial string
	State  string // one of the State constants, or what the server said
	Detail string // the rest of a "no permissions (...)" state
	// Model is the phone's model as the long list (host:devices-l) gives
	// it ("Pixel_7"); empty in the short list.
	Model string
}

// ParseDeviceList parses the payload of host:devices and of each
// host:track-devices update: one "serial<TAB>state" per line. An empty
// payload is an empty list.
func ParseDeviceList(s string) ([]DeviceEntry, error) {
	var out []DeviceEntry
	seen := map[string]bool{}
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		serial, state, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, fmt.Errorf("parse device list line %d %q: no tab between serial and state", i+1, clip(line))
		}
		if serial == "" {
			return nil, fmt.Errorf("parse device list line %d %q: empty serial", i+1, clip(line))
		}
		if state == "" {
			return nil, fmt.Errorf("parse device list line %d %q: empty state", i+1, clip(line))
		}
		if seen[serial] {
			return nil, fmt.Errorf("parse device list line %d: serial %q listed twice", i+1, clip(serial))
		}
		seen[serial] = true
		out = append(out, newEntry(serial, state))
	}
	return out, nil
}

func newEntry(serial, state string) DeviceEntry {
	e := DeviceEntry{Serial: serial, State: state}
	if rest, ok := strings.CutPrefix(state, StateNoPermissions); ok {
		e.State = StateNoPermissions
		e.Detail = strings.TrimSpace(rest)
	}
	return e
}

// ParseDeviceListLong parses the payload of host:devices-l: per line the
// serial, blanks, the state (which may hold blanks: "no permissions (...);
// see [...]"), then key:value properties ("usb:1-1 product:sdk
// model:Pixel_7 device:emu transport_id:4"). An empty payload is an empty
// list.
func ParseDeviceListLong(s string) ([]DeviceEntry, error) {
	var out []DeviceEntry
	seen := map[string]bool{}
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSuffix(line, "\r")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("parse long device list line %d %q: no state after the serial", i+1, clip(line))
		}
		serial := f[0]
		if seen[serial] {
			return nil, fmt.Errorf("parse long device list line %d: serial %q listed twice", i+1, clip(serial))
		}
		seen[serial] = true
		// Properties are the trailing key:value fields; the state is what
		// stands between them and the serial.
		end := len(f)
		props := map[string]string{}
		for end > 2 {
			k, v, ok := strings.Cut(f[end-1], ":")
			if !ok || !isPropKey(k) {
				break
			}
			props[k] = v
			end--
		}
		e := newEntry(serial, strings.Join(f[1:end], " "))
		e.Model = props["model"]
		out = append(out, e)
	}
	return out, nil
}

// isPropKey reports whether k can name a property of the long list
// (lowercase letters and underscores).
func isPropKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
