package coordinator

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

// DeviceReady is the adb state of a phone that can run a job.
const DeviceReady = "device"

// UsableDevices returns the phones that can take a job (state "device", a
// serial), sorted by serial.
func UsableDevices(ds []protocol.Device) []protocol.Device {
	var out []protocol.Device
	for _, d := range ds {
		if d.State == DeviceReady && d.Serial != "" {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Serial < out[j].Serial })
	return out
}

// Matches reports whether phone d can run a job with selector sel: it is in
// state "device", and every field set in sel matches (serial and model
// exactly, and d carries every tag of sel). The stores implement the same
// rule in SQL.
func Matches(sel protocol.DeviceSelector, d protocol.Device) bool {
	if d.State != DeviceReady {
		return false
	}
	if sel.Serial != "" && sel.Serial != d.Serial {
		return false
	}
	if sel.Model != "" && sel.Model != d.Model {
		return false
	}
	for _, t := range sel.Tags {
		if !slices.Contains(d.Tags, t) {
			return false
		}
	}
	return true
}

// DescribeSelector renders a selector for people: "serial=X model=Y
// tags=a,b", or "any phone".
func DescribeSelector(sel protocol.DeviceSelector) string {
	var parts []string
	if sel.Serial != "" {
		parts = append(parts, "serial="+sel.Serial)
	}
	if sel.Model != "" {
		parts = append(parts, "model="+sel.Model)
	}
	if len(sel.Tags) > 0 {
		parts = append(parts, "tags="+strings.Join(sel.Tags, ","))
	}
	if len(parts) == 0 {
		return "any phone"
	}
	return strings.Join(parts, " ")
}

// WaitReason explains why a queued job with selector sel has not started,
// given the registered agents and the jobs in progress: no online agent has
// a matching phone ("waiting for phone serial=X"), every matching phone is
// busy, or the agents with matching phones are draining. It returns "" when
// a matching phone is free, so the job is about to be granted.
func WaitReason(sel protocol.DeviceSelector, agents []Agent, running []Job, offlineAfter time.Duration) string {
	busy := map[string]bool{} // owner + " " + serial
	load := map[string]int{}  // owner → in-progress jobs
	for _, j := range running {
		if j.Status != StatusInProgress {
			continue
		}
		load[j.WorkerID]++
		if j.Device != "" {
			busy[j.WorkerID+" "+j.Device] = true
		}
	}
	matching, draining, busyPhone, noSlot := 0, 0, 0, 0
	for _, a := range agents {
		if !a.Online(offlineAfter) {
			continue
		}
		for _, d := range a.Devices {
			if !Matches(sel, d) {
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
	case matching == 0:
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
