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
		e := DeviceEntry{Serial: serial, State: state}
		if rest, ok := strings.CutPrefix(state, StateNoPermissions); ok {
			e.State = StateNoPermissions
			e.Detail = strings.TrimSpace(rest)
		}
		out = append(out, e)
	}
	return out, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
