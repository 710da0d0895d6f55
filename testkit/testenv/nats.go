package testenv

import (
	"fmt"
	"os"
	"path/filepath"
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

// NATSOperator starts an embedded NATS server on a random loopback port
// from the server config include `edgecoord nats init` wrote (operator
// mode, resolver full, docs/operations.md "Add a PC"): the file is
// included as an operator would include it from nats-server.conf. The
// server is shut down when the test ends.
func NATSOperator(t testing.TB, include string) *server.Server {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats-server.conf")
	abs, err := filepath.Abs(include)
	if err != nil {
		t.Fatal(err)
	}
	// nats-server reads an include relative to the including file.
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("listen: 127.0.0.1:-1\ninclude %q\n", rel)), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats server config from %s: %v", include, err)
	}
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
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
