package capture

import (
	"github.com/edgeagent/edgeagent/capture/adb"
	"github.com/edgeagent/edgeagent/protocol"
)

// Hold is what the agent says about a phone over what the phone says about
// itself: a state that keeps it from jobs (protocol.DeviceRecovering,
// protocol.DeviceQuarantined) with its reason, and the recovery ladder's
// record (docs/capture.md, Recovery).
type Hold struct {
	// State, when set, replaces the phone's own state while adb lists the
	// phone as "device" (Listed); "" leaves it.
	State    string
	Reason   string
	Recovery *protocol.DeviceRecovery
}

// SetHold sets what the agent says about the phone with serial; the zero
// Hold forgets it. Waiters for a phone are woken.
func (inv *Inventory) SetHold(serial string, h Hold) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if h == (Hold{}) {
		delete(inv.held, serial)
	} else {
		if inv.held == nil {
			inv.held = map[string]Hold{}
		}
		inv.held[serial] = h
	}
	inv.signalLocked()
}

// holdLocked is info with the hold of its serial applied.
func (inv *Inventory) holdLocked(info protocol.Device) protocol.Device {
	h, ok := inv.held[info.Serial]
	if !ok {
		return info
	}
	if h.Recovery != nil {
		r := *h.Recovery
		info.Recovery = &r
	}
	if h.State != "" && Listed(info.State) {
		info.State, info.Reason = h.State, h.Reason
	}
	return info
}

// Listed reports whether a phone's own state says adb lists it as
// "device": ready, or still being read after it came (back).
func Listed(state string) bool {
	return state == protocol.DeviceReady || state == adb.StateConnecting
}
