package config

import (
	"strings"
	"testing"
)

func TestSimulatedDevices(t *testing.T) {
	cfg, err := ParseAgent("agent.yaml", []byte(`agent_id: lab-1
nats:
  url: nats://127.0.0.1:4222
storage:
  mode: presigned
devices:
  - serial: sim-1
    simulated: true
    tags: [lab]
  - serial: R58M123ABC
`))
	if err != nil {
		t.Fatal(err)
	}
	sims := cfg.SimulatedDevices()
	if len(sims) != 1 || sims[0].Serial != "sim-1" || !sims[0].Simulated || len(sims[0].Tags) != 1 {
		t.Fatalf("SimulatedDevices() = %+v", sims)
	}
	if _, err := ParseAgent("agent.yaml", []byte("agent_id: a\nnats:\n  url: nats://x:1\nstorage:\n  mode: presigned\ndevices:\n  - serial: s\n    simulated: maybe\n")); err == nil {
		t.Fatal("simulated: maybe accepted")
	}
}

// TestSimulatedIME: ime gives a simulated phone the input method; on a
// real phone it is refused, naming the field.
func TestSimulatedIME(t *testing.T) {
	const head = "agent_id: a\nnats:\n  url: nats://x:1\nstorage:\n  mode: presigned\ndevices:\n"
	cfg, err := ParseAgent("agent.yaml", []byte(head+"  - serial: sim-1\n    simulated: true\n    ime: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Devices[0].IME {
		t.Fatal("ime: true not read")
	}
	_, err = ParseAgent("agent.yaml", []byte(head+"  - serial: R58M\n    ime: true\n"))
	if err == nil || !strings.Contains(err.Error(), "devices[0].ime: only for simulated phones") {
		t.Fatalf("ime on a real phone: %v", err)
	}
}
