package config

import "testing"

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
