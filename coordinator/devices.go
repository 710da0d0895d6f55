package coordinator

import (
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// imePackage is the input method a phone needs to type text beyond ASCII
// (capture.IMEPackage; the coordinator links no capture code).
const imePackage = "com.android.adbkeyboard"

// DescribeSelector renders a selector for people: "serial=X model=Y
// tags=a,b", or "any phone".
func DescribeSelector(sel protocol.DeviceSelector) string {
	if d := sel.Describe(); d != "any" {
		return d
	}
	return "any phone"
}

// WaitReason explains why a queued job with selector sel has not started,
// given the registered agents and the jobs in progress: no online agent has
// a matching phone ("waiting for phone serial=X"), every matching phone is
// busy, or the agents with matching phones are draining. It returns "" when
// a matching phone is free, so the job is about to be granted.
func WaitReason(sel protocol.DeviceSelector, agents []jobstore.Agent, running []jobstore.Job, offlineAfter time.Duration) string {
	return WaitReasonFor(protocol.Task{Device: sel}, agents, running, offlineAfter)
}

// WaitReasonFor is WaitReason for a whole task: a task with text beyond
// ASCII (protocol.Task.NeedsIME) waits for a matching phone that can type
// it, and when every matching phone is known to lack the input method the
// reason says so and what to install (docs/capture.md, Text beyond ASCII).
// When ready phones would match but for the selector's app requirements,
// the reason names what they have instead
// (protocol.DeviceSelector.MissingApps).
func WaitReasonFor(task protocol.Task, agents []jobstore.Agent, running []jobstore.Job, offlineAfter time.Duration) string {
	sel := task.Device
	needsIME := task.NeedsIME()
	busy := map[string]bool{} // owner + " " + serial
	load := map[string]int{}  // owner → in-progress jobs
	for _, j := range running {
		if j.Status != jobstore.StatusInProgress {
			continue
		}
		load[j.WorkerID]++
		if j.Device != "" {
			busy[j.WorkerID+" "+j.Device] = true
		}
	}
	matching, draining, busyPhone, noSlot, noIME := 0, 0, 0, 0, 0
	for _, a := range agents {
		if !a.Online(offlineAfter) {
			continue
		}
		for _, d := range a.Devices {
			if !sel.Matches(d) {
				continue
			}
			if ok, known := d.TypesUnicode(); needsIME && known && !ok {
				noIME++
				continue
			}
			matching++
			switch {
			case a.Draining || a.AgentDraining:
				draining++
			case busy[a.Owner()+" "+d.Serial]:
				busyPhone++
			case load[a.Owner()] >= max(1, a.Slots):
				noSlot++
			default:
				return ""
			}
		}
	}
	want := "phone " + DescribeSelector(sel)
	if want == "phone any phone" {
		want = "any phone"
	}
	switch {
	case matching == 0 && noIME > 0:
		return "waiting for " + want + " that can type its text (every matching phone lacks the input method " +
			imePackage + " that types text beyond ASCII: install it, docs/capture.md)"
	case matching == 0:
		// A phone that is listed but not usable (unauthorized, offline, no
		// permissions) is named with its state and the fix.
		var listed []protocol.Device
		for _, a := range agents {
			if a.Online(offlineAfter) {
				listed = append(listed, a.Devices...)
			}
		}
		if why := sel.NotReadyReason(listed); why != "" {
			return "waiting for " + want + " (" + why + ")"
		}
		if why := sel.MissingApps(listed, 3); why != "" {
			return "waiting for " + want + " (no phone has the app at that version: " + why + ")"
		}
		return "waiting for " + want
	case draining == matching:
		return "waiting for " + want + " (every matching phone is on a draining agent)"
	case busyPhone+draining == matching:
		return "waiting for " + want + " (every matching phone is busy)"
	case noSlot+draining == matching:
		return "waiting for " + want + " (every agent with a matching phone is at its slot limit)"
	default:
		return "waiting for " + want + " (every matching phone is busy or its agent at its slot limit)"
	}
}
