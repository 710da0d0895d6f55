package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestDoctorNATSAuth: a NATS server that refuses the agent's password is
// reported as an authentication problem, not as an unreachable server.
func TestDoctorNATSAuth(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, Username: "pc-bin", Password: "right"})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	cfg := writeConfig(t, fmt.Sprintf(`agent_id: pc-bin
state_dir: %s/state
nats:
  url: %s
  user: pc-bin
  password: wrong
storage:
  mode: presigned
devices:
  - serial: sim-1
    simulated: true
status:
  listen: %s
`, t.TempDir(), s.ClientURL(), testenv.FreeAddr(t)))
	// The refusal comes at once; the timeout only bounds a server that
	// does not answer.
	code, out, _ := runCLI(t, "doctor", "-c", cfg, "-timeout", "30s")
	if code != 1 || !strings.Contains(out, "[FAIL] nats") || !strings.Contains(out, "refused this agent's credentials") {
		t.Fatalf("doctor with a wrong NATS password: exit %d\n%s", code, out)
	}
	t.Log(out)
}
