package coordinator_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"

	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestServerLeavesNoGoroutines: once Run has returned (and the pieces the
// test started are closed), nothing the coordinator started is left
// running, assigns and pushes in flight included.
func TestServerLeavesNoGoroutines(t *testing.T) {
	before := goleak.IgnoreCurrent()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	store, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	c := startCoordinator(t, ns.ClientURL(), store, fastOptions(t, "c1"))
	a, err := coordtest.New(coordtest.Options{ID: "pc-a", URL: ns.ClientURL(), Devices: []protocol.Device{phone("A1")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	submit(t, store, "j1", protocol.DeviceSelector{})
	waitStatus(t, store, "j1", jobstore.StatusSucceeded, 5*time.Second)
	a.Stop()
	c.stop()
	store.Close()
	ns.Shutdown()
	ns.WaitForShutdown()
	goleak.VerifyNone(t, before)
}
