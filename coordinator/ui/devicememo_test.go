package ui

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/edgeagent/edgeagent/protocol"
)

// TestDeviceMemo: the memo hands back the list it decoded while an agent's
// stored JSON is the same, decodes a changed list at once, refuses JSON
// that is no device list, and forgets the agents Keep leaves out.
func TestDeviceMemo(t *testing.T) {
	enc := func(serials ...string) []byte {
		var ds []protocol.Device
		for _, s := range serials {
			ds = append(ds, protocol.Device{Serial: s, State: "device"})
		}
		b, err := json.Marshal(ds)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	serials := func(ds []protocol.Device) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Serial)
		}
		return out
	}
	var m DeviceMemo
	first, err := m.Devices("a", enc("S1", "S2"))
	if err != nil || !slices.Equal(serials(first), []string{"S1", "S2"}) {
		t.Fatalf("first decode: %v %v", serials(first), err)
	}
	again, err := m.Devices("a", enc("S1", "S2"))
	if err != nil || len(again) != 2 || &again[0] != &first[0] {
		t.Fatalf("same JSON decoded again instead of shared: %v %v", serials(again), err)
	}
	changed, err := m.Devices("a", enc("S3"))
	if err != nil || !slices.Equal(serials(changed), []string{"S3"}) {
		t.Fatalf("changed list: %v %v", serials(changed), err)
	}
	if _, err := m.Devices("b", []byte(`{"serial":"S1"}`)); err == nil {
		t.Fatal("an object decoded as a device list")
	}
	if _, err := m.Devices("b", enc("B1")); err != nil {
		t.Fatal(err)
	}
	m.Keep(map[string]bool{"b": true})
	if _, ok := m.m["a"]; ok {
		t.Fatal("Keep left agent a, which it does not list")
	}
	if e, ok := m.m["b"]; !ok || e.raw != string(enc("B1")) {
		t.Fatalf("Keep dropped agent b: %+v", m.m)
	}
}
