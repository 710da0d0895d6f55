package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestDoctorModelSpaces: adb's device list writes a model's spaces as
// underscores ("FakePhone_X1"); doctor shows the model as the phone reports
// it ("FakePhone X1"), like the inventory, status and the coordinator.
func TestDoctorModelSpaces(t *testing.T) {
	t.Parallel()
	srv := testenv.StartADB(t)
	p, err := fakeadbd.Start(fakeadbd.Options{Model: "FakePhone X1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	srv.Connect(t, p.Addr(), "device")
	cfg := writeConfig(t, fmt.Sprintf(`agent_id: pc-model
state_dir: %s/state
nats:
  url: nats://%s
storage:
  mode: presigned
adb:
  address: %s
  path: %s
devices:
  - serial: %s
`, t.TempDir(), testenv.FreeAddr(t), srv.Addr, srv.Path, p.Serial()))
	_, out, _ := runCLI(t, "doctor", "-c", cfg, "-timeout", "2s")
	want := "[ok  ] phone " + p.Serial()
	for line := range strings.Lines(out) {
		if strings.Contains(line, want) {
			if !strings.Contains(line, "ready (FakePhone X1)") {
				t.Errorf("doctor shows the phone as %q, want the model with spaces: ready (FakePhone X1)", strings.TrimSpace(line))
			}
			return
		}
	}
	t.Fatalf("doctor output lacks %q:\n%s", want, out)
}
