package coordinator_test

import (
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

func TestDescribeSelector(t *testing.T) {
	t.Parallel()
	if got := coordinator.DescribeSelector(protocol.DeviceSelector{Serial: "a", Model: "b", Tags: []string{"x", "y"}}); got != "serial=a model=b tags=x,y" {
		t.Errorf("DescribeSelector = %q", got)
	}
	if got := coordinator.DescribeSelector(protocol.DeviceSelector{}); got != "any phone" {
		t.Errorf("DescribeSelector of the empty selector = %q", got)
	}
}

func TestWaitReason(t *testing.T) {
	t.Parallel()
	const off = 15 * time.Second
	online := func(id string, slots int, draining bool, devs ...protocol.Device) jobstore.Agent {
		return jobstore.Agent{ID: id, BootID: "b", Slots: slots, Draining: draining, Devices: devs, LastSeen: time.Now(), SeenAgo: time.Second}
	}
	p := func(serial string) protocol.Device { return protocol.Device{Serial: serial, State: "device"} }
	busy := func(owner, serial string) jobstore.Job {
		return jobstore.Job{Status: jobstore.StatusInProgress, WorkerID: owner, Device: serial}
	}
	offline := online("gone", 1, false, p("G1"))
	offline.SeenAgo = time.Minute
	for name, tc := range map[string]struct {
		sel     protocol.DeviceSelector
		agents  []jobstore.Agent
		running []jobstore.Job
		want    string
	}{
		"free phone":       {protocol.DeviceSelector{}, []jobstore.Agent{online("a", 1, false, p("A1"))}, nil, ""},
		"no agent":         {protocol.DeviceSelector{}, nil, nil, "waiting for any phone"},
		"no such phone":    {protocol.DeviceSelector{Serial: "X"}, []jobstore.Agent{online("a", 1, false, p("A1"))}, nil, "waiting for phone serial=X"},
		"offline agent":    {protocol.DeviceSelector{Serial: "G1"}, []jobstore.Agent{offline}, nil, "waiting for phone serial=G1"},
		"phone busy":       {protocol.DeviceSelector{Serial: "A1"}, []jobstore.Agent{online("a", 2, false, p("A1"))}, []jobstore.Job{busy("a/b", "A1")}, "waiting for phone serial=A1 (every matching phone is busy)"},
		"slots full":       {protocol.DeviceSelector{Serial: "A2"}, []jobstore.Agent{online("a", 1, false, p("A1"), p("A2"))}, []jobstore.Job{busy("a/b", "A1")}, "waiting for phone serial=A2 (every agent with a matching phone is at its slot limit)"},
		"draining":         {protocol.DeviceSelector{}, []jobstore.Agent{online("a", 1, true, p("A1"))}, nil, "waiting for any phone (every matching phone is on a draining agent)"},
		"one of two free":  {protocol.DeviceSelector{}, []jobstore.Agent{online("a", 1, true, p("A1")), online("c", 1, false, p("C1"))}, nil, ""},
		"unauthorized":     {protocol.DeviceSelector{Serial: "U1"}, []jobstore.Agent{online("a", 1, false, p("A1"), protocol.Device{Serial: "U1", State: "unauthorized"})}, nil, "waiting for phone serial=U1 (phone U1 is unauthorized: " + protocol.StateFix("unauthorized") + ")"},
		"busy or draining": {protocol.DeviceSelector{}, []jobstore.Agent{online("a", 1, true, p("A1")), online("c", 2, false, p("C1"))}, []jobstore.Job{busy("c/b", "C1")}, "waiting for any phone (every matching phone is busy)"},
	} {
		if got := coordinator.WaitReason(tc.sel, tc.agents, tc.running, off); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}
