package agent_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestStorageModeMismatchRefusedAtHello: an agent in presigned mode says so
// in its hello; a real coordinator with no storage configured (it cannot
// presign) refuses that hello with 400 naming both modes, so the agent
// opens no session, is given no job, logs the refusal as an error and Run
// returns it (docs/protocol.md section 5, hello). The same coordinator
// accepts an agent in direct mode and one that says no mode; a coordinator
// that presigns accepts the presigned agent.
func TestStorageModeMismatchRefusedAtHello(t *testing.T) {
	leakCheck(t)
	ns := testenv.NATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	startCoord := func(name string, presigner coordinator.Presigner) *sqlitestore.Store {
		st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "jobs.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		nc, err := nats.Connect(ns.ClientURL(), nats.Name(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		c := coordinator.New(nc, st, coordinator.Options{
			ID: name, LeaseTTL: 3 * time.Second, ReapInterval: 100 * time.Millisecond, ScheduleInterval: 50 * time.Millisecond,
			HeartbeatEvery: 200 * time.Millisecond, Presigner: presigner, Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel),
		})
		wg.Go(func() {
			if err := c.Run(ctx); err != nil {
				t.Errorf("coordinator: %v", err)
			}
		})
		return st
	}
	st := startCoord("c-direct", nil)
	if _, err := st.Submit(ctx, jobstore.JobSpec{ID: "waiting", Task: screenshotTask(1, 0)}); err != nil {
		t.Fatal(err)
	}

	type run struct {
		a    *agent.Agent
		logs *logBuffer
		done chan error
	}
	start := func(id, mode string) run {
		nc, err := nats.Connect(ns.ClientURL(), nats.Name(id), nats.CustomInboxPrefix(protocol.InboxPrefix(id)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		inv := capture.NewInventory()
		if err := inv.Add(capture.NewSimulated(capture.SimOptions{Serial: "sim-" + id, Width: 96, Height: 160})); err != nil {
			t.Fatal(err)
		}
		r := run{logs: &logBuffer{}, done: make(chan error, 1)}
		r.a, err = agent.New(agent.Options{
			AgentID: id, Conn: nc, Phones: agent.InventoryPhones(inv, "", capture.OpLogOptions{}), Store: &memStore{},
			RequestTimeout: time.Second, UploadMode: mode, Log: zerolog.New(r.logs).Level(zerolog.DebugLevel),
		})
		if err != nil {
			t.Fatal(err)
		}
		actx, stop := context.WithCancel(ctx)
		wg.Go(func() { r.done <- r.a.Run(actx) })
		t.Cleanup(func() { stop() })
		return r
	}

	mis := start("pc-pre", protocol.UploadModePresigned)
	var err error
	select {
	case err = <-mis.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the presigned agent's Run did not return after the coordinator refused its hello")
	}
	if !errors.Is(err, protocol.ErrBadRequest) || !strings.Contains(err.Error(), "presigned") || !strings.Contains(err.Error(), "direct") {
		t.Fatalf("Run = %v, want a 400 naming both storage modes", err)
	}
	t.Logf("agent: %v", err)
	var logged bool
	for _, e := range mis.logs.entries("") {
		if s, _ := e["error"].(string); e["level"] == "error" && strings.Contains(s, "storage mode mismatch") {
			logged = true
		}
	}
	if !logged {
		t.Errorf("no error logged for the refusal:\n%s", mis.logs.String())
	}
	if _, err := st.GetAgent(ctx, "pc-pre"); !errors.Is(err, jobstore.ErrAgentNotFound) {
		t.Errorf("the refused agent has a session: %v", err)
	}
	if mis.a.Ready() {
		t.Error("the refused agent says it is ready")
	}

	// Direct mode, and no mode said: accepted, and the waiting job runs.
	direct := start("pc-direct", protocol.UploadModeDirect)
	testenv.Eventually(t, 10*time.Second, "the direct agent's session", direct.a.Ready)
	unsaid := start("pc-unsaid", "")
	testenv.Eventually(t, 10*time.Second, "the session of the agent that says no mode", unsaid.a.Ready)
	testenv.Eventually(t, 20*time.Second, "the waiting job to run", func() bool {
		j, err := st.Get(ctx, "waiting")
		return err == nil && j.Status == jobstore.StatusSucceeded
	})

	// A coordinator that presigns accepts the presigned agent.
	p, err := coordinator.NewS3Presigner(coordinator.S3Options{Endpoint: "127.0.0.1:9", Region: "us-east-1", Bucket: "b", AccessKey: "a", SecretKey: "secret-key"})
	if err != nil {
		t.Fatal(err)
	}
	cancel() // the direct coordinator and every agent stop
	wg.Wait()
	ctx, cancel = context.WithCancel(context.Background())
	startCoord("c-presign", p)
	pre := start("pc-pre2", protocol.UploadModePresigned)
	testenv.Eventually(t, 10*time.Second, "the presigned agent's session with a presigning coordinator", pre.a.Ready)
	cancel() // before the connections and the store close
	wg.Wait()
	if err := <-pre.done; err != nil {
		t.Errorf("presigned agent with a presigning coordinator: %v", err)
	}
}
