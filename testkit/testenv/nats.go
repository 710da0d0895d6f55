package testenv

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATS starts an embedded NATS server on a random loopback port and returns
// it; it is shut down when the test ends.
func NATS(t testing.TB) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatalf("start nats server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatalf("nats server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}
