package coordinator_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestMain keeps one throwaway PostgreSQL cluster for the whole binary.
func TestMain(m *testing.M) { testenv.Main(m) }

// fastOptions are coordinator options for tests: short intervals, warnings
// only in the log. An agent counts as offline after 3 s without a
// heartbeat (fifteen of them): the tests run beside each other, and one
// heartbeat late on a loaded machine must not take an agent offline (the
// test of going offline sets its own).
func fastOptions(t testing.TB, id string) coordinator.Options {
	return coordinator.Options{
		ID: id, LeaseTTL: 3 * time.Second, ReapInterval: 200 * time.Millisecond,
		ScheduleInterval: 50 * time.Millisecond, HeartbeatEvery: 200 * time.Millisecond,
		OfflineAfter: 3 * time.Second, AssignTimeout: 2 * time.Second,
		Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	}
}

func openSQLite(t testing.TB) sqlstore.Lab {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatalf("open sqlite store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openPostgres opens a store on dsn with its own pool, as a separate
// coordinator process would.
func openPostgres(t testing.TB, dsn string) jobstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open postgres store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// running is a coordinator running until stop or the end of the test.
type running struct {
	srv  *coordinator.Server
	nc   *nats.Conn
	stop func()
}

// startCoordinator runs a Server on store, connected to url with opts.
func startCoordinator(t testing.TB, url string, store jobstore.Store, opts coordinator.Options, nopts ...nats.Option) *running {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.Name("coordinator " + opts.ID)}, nopts...)...)
	if err != nil {
		t.Fatalf("connect coordinator: %v", err)
	}
	srv := coordinator.New(nc, store, opts)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	ready := make(chan struct{})
	wg.Go(func() {
		go func() {
			// The micro service is up once this instance answers a ping,
			// and serves every agent verb once Ready stops naming "service"
			// (the endpoints are subscribed after the ping handler).
			for ctx.Err() == nil && !pingedBy(nc, opts.ID) {
			}
			for ctx.Err() == nil {
				if _, down := srv.Ready(ctx)["service"]; !down {
					close(ready)
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
		if err := srv.Run(ctx); err != nil {
			t.Errorf("coordinator %s: %v", opts.ID, err)
		}
	})
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatalf("coordinator %s did not come up", opts.ID)
	}
	var once sync.Once
	r := &running{srv: srv, nc: nc}
	r.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			nc.Close()
		})
	}
	t.Cleanup(r.stop)
	return r
}

func phone(serial string, tags ...string) protocol.Device {
	return protocol.Device{Serial: serial, State: protocol.DeviceReady, Model: "Pixel 7", Tags: tags}
}

func task(sel protocol.DeviceSelector) protocol.Task {
	return protocol.Task{Device: sel, Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "shot.png"}}}
}

func submit(t testing.TB, s jobstore.Store, id string, sel protocol.DeviceSelector) jobstore.Job {
	t.Helper()
	j, err := s.Submit(context.Background(), jobstore.JobSpec{ID: id, Task: task(sel)})
	if err != nil {
		t.Fatalf("submit %s: %v", id, err)
	}
	return j
}

func getJob(t testing.TB, s jobstore.Store, id string) jobstore.Job {
	t.Helper()
	j, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return j
}

func waitStatus(t testing.TB, s jobstore.Store, id, status string, timeout time.Duration) jobstore.Job {
	t.Helper()
	var j jobstore.Job
	testenv.Eventually(t, timeout, "job "+id+" "+status, func() bool {
		j = getJob(t, s, id)
		return j.Status == status
	})
	return j
}

func waitAssign(t testing.TB, a *coordtest.Agent, jobID string, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, a.ID()+" assigned "+jobID, func() bool {
		for _, tk := range a.Assigns() {
			if tk.JobID == jobID {
				return true
			}
		}
		return false
	})
}

// metricValue sums the samples of a metric family whose labels include
// every pair of want.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metric
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// pingedBy reports whether the coordinator with id serves every verb: its
// micro service lists all endpoints. (The service answers discovery as soon
// as it exists, before its endpoints are added.)
func pingedBy(nc *nats.Conn, id string) bool {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return false
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$SRV.INFO."+coordinator.ServiceName, inbox, nil); err != nil {
		return false
	}
	deadline := time.Now().Add(200 * time.Millisecond)
	for {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			return false
		}
		var info struct {
			Metadata  map[string]string `json:"metadata"`
			Endpoints []json.RawMessage `json:"endpoints"`
		}
		if json.Unmarshal(m.Data, &info) == nil && info.Metadata["coordinator_id"] == id &&
			len(info.Endpoints) == len(protocol.CoordVerbs) {
			return true
		}
	}
}
