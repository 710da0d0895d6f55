package ui

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/edgeagent/edgeagent/protocol"
)

// DeviceMemo keeps each agent's decoded device list while the JSON it was
// decoded from is unchanged, so the fleet page does not decode every
// phone's JSON on every render (docs/benchmarks.md, "Web dashboard"). The
// lists it returns are shared between callers, who must not modify them.
// The zero value is ready; it is safe for concurrent use.
type DeviceMemo struct {
	mu sync.Mutex
	m  map[string]memoDevices
}

type memoDevices struct {
	raw  string
	devs []protocol.Device
}

// Devices returns the devices of agent id whose stored JSON is raw.
func (d *DeviceMemo) Devices(id string, raw []byte) ([]protocol.Device, error) {
	d.mu.Lock()
	e, ok := d.m[id]
	d.mu.Unlock()
	if ok && e.raw == string(raw) {
		return e.devs, nil
	}
	var devs []protocol.Device
	if err := json.Unmarshal(raw, &devs); err != nil {
		return nil, fmt.Errorf("decode devices of agent %s: %w", id, err)
	}
	d.mu.Lock()
	if d.m == nil {
		d.m = map[string]memoDevices{}
	}
	d.m[id] = memoDevices{raw: string(raw), devs: devs}
	d.mu.Unlock()
	return devs, nil
}

// Keep forgets the agents keep does not list.
func (d *DeviceMemo) Keep(keep map[string]bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id := range d.m {
		if !keep[id] {
			delete(d.m, id)
		}
	}
}
