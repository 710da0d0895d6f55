package coordinator_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestSchedulerMatchesPhones: jobs go to an agent with a matching phone in
// state device, one job per phone and no more than the agent's slots,
// oldest first; a job whose phone never appears waits and says so, and
// starts once an agent with that phone connects.
func TestSchedulerMatchesPhones(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	store := openSQLite(t)
	opts := fastOptions(t, "c1")
	startCoordinator(t, ns.ClientURL(), store, opts)
	hold := func(fencing.Token) coordtest.Behavior { return coordtest.Hold }
	eu := coordtest.Start(t, coordtest.Options{
		ID: "pc-eu", URL: ns.ClientURL(), Slots: 3, Behavior: hold,
		Devices: []protocol.Device{phone("E1", "eu"), phone("E2", "eu"), {Serial: "E3", State: "unauthorized", Tags: []string{"eu"}}},
	})
	us := coordtest.Start(t, coordtest.Options{
		ID: "pc-us", URL: ns.ClientURL(), Slots: 1, Behavior: hold,
		Devices: []protocol.Device{phone("U1", "us"), phone("U2", "us")},
	})
	for _, j := range []struct {
		id  string
		sel protocol.DeviceSelector
	}{
		{"eu-1", protocol.DeviceSelector{Tags: []string{"eu"}}},
		{"eu-2", protocol.DeviceSelector{Tags: []string{"eu"}}},
		{"eu-3", protocol.DeviceSelector{Tags: []string{"eu"}}}, // E3 is unauthorized: waits for a free phone
		{"us-1", protocol.DeviceSelector{Tags: []string{"us"}}},
		{"us-2", protocol.DeviceSelector{Serial: "U2"}}, // pc-us has one slot: waits
		{"x-1", protocol.DeviceSelector{Serial: "X1"}},  // no such phone anywhere
	} {
		submit(t, store, j.id, j.sel)
		time.Sleep(2 * time.Millisecond)
	}
	waitAssign(t, eu, "eu-1", 5*time.Second)
	waitAssign(t, eu, "eu-2", 5*time.Second)
	waitAssign(t, us, "us-1", 5*time.Second)
	time.Sleep(5 * opts.ScheduleInterval) // several scheduler rounds
	if n := len(eu.Assigns()); n != 2 {
		t.Fatalf("pc-eu got %d jobs, want 2 (two usable phones)", n)
	}
	if n := len(us.Assigns()); n != 1 {
		t.Fatalf("pc-us got %d jobs, want 1 (one slot)", n)
	}
	devs := map[string]string{}
	for _, id := range []string{"eu-1", "eu-2", "us-1"} {
		devs[id] = getJob(t, store, id).Device
	}
	if devs["eu-1"] != "E1" || devs["eu-2"] != "E2" || devs["us-1"] != "U1" {
		t.Fatalf("phones %v", devs)
	}

	ctx := context.Background()
	agents, err := store.Agents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	running, err := store.ListJobs(ctx, jobstore.JobFilter{Statuses: []string{jobstore.StatusInProgress}})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{
		"eu-3": "waiting for phone tags=eu (every matching phone is busy)",
		"us-2": "waiting for phone serial=U2 (every agent with a matching phone is at its slot limit)",
		"x-1":  "waiting for phone serial=X1",
	} {
		j := getJob(t, store, id)
		if j.Status != jobstore.StatusQueued {
			t.Fatalf("%s: %+v", id, j)
		}
		// Both agents count as online here whatever their last heartbeat:
		// on a loaded machine one may come later than the test's short
		// offline_after, and the reasons are about busy phones and slots.
		if got := coordinator.WaitReason(j.Task.Device, agents, running, time.Hour); got != want {
			t.Errorf("%s: wait reason %q, want %q", id, got, want)
		}
	}

	// The phone appears: the job starts.
	x := coordtest.Start(t, coordtest.Options{ID: "pc-x", URL: ns.ClientURL(), Devices: []protocol.Device{phone("X1")}})
	waitStatus(t, store, "x-1", jobstore.StatusSucceeded, 5*time.Second)
	if got := x.Assigns(); len(got) != 1 || got[0].JobID != "x-1" {
		t.Fatalf("pc-x assigns %v", got)
	}
}

// TestAgentOfflineAndDraining: an agent that stops heartbeating goes
// offline after OfflineAfter (database clock) and gets nothing; an agent
// that reports draining gets nothing until it resumes.
func TestAgentOfflineAndDraining(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	store := openSQLite(t)
	opts := fastOptions(t, "c1")
	opts.OfflineAfter = 600 * time.Millisecond
	startCoordinator(t, ns.ClientURL(), store, opts)
	a := coordtest.Start(t, coordtest.Options{ID: "pc-a", URL: ns.ClientURL(), Devices: []protocol.Device{phone("A1")}})
	ctx := context.Background()

	// Draining by its own word (control drain → hello with draining).
	if _, err := coordinator.PushControl(ctx, a.Conn(), "pc-a", protocol.Control{Command: protocol.ControlDrain}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "pc-a reported draining", func() bool {
		ag, err := store.GetAgent(ctx, "pc-a")
		return err == nil && ag.AgentDraining
	})
	submit(t, store, "j1", protocol.DeviceSelector{})
	time.Sleep(5 * opts.ScheduleInterval)
	if j := getJob(t, store, "j1"); j.Status != jobstore.StatusQueued {
		t.Fatalf("a draining agent got a job: %+v", j)
	}
	if _, err := coordinator.PushControl(ctx, a.Conn(), "pc-a", protocol.Control{Command: protocol.ControlResume}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, store, "j1", jobstore.StatusSucceeded, 5*time.Second)

	// Offline: silent for longer than OfflineAfter.
	a.Stop()
	testenv.Eventually(t, 5*time.Second, "pc-a offline", func() bool {
		ag, err := store.GetAgent(ctx, "pc-a")
		return err == nil && !ag.Online(opts.OfflineAfter)
	})
	submit(t, store, "j2", protocol.DeviceSelector{})
	time.Sleep(5 * opts.ScheduleInterval)
	if j := getJob(t, store, "j2"); j.Status != jobstore.StatusQueued {
		t.Fatalf("an offline agent got a job: %+v", j)
	}
}

// TestMetricsAndHealth: /metrics serves the coordinator's own registry with
// the fencing counters and the store gauges; /healthz answers while the
// process runs; /readyz fails once NATS is gone.
func TestMetricsAndHealth(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	store := openSQLite(t)
	c := startCoordinator(t, ns.ClientURL(), store, fastOptions(t, "c1"))
	a := coordtest.Start(t, coordtest.Options{ID: "pc-a", URL: ns.ClientURL(), Devices: []protocol.Device{phone("A1")}})
	submit(t, store, "j1", protocol.DeviceSelector{})
	submit(t, store, "j2", protocol.DeviceSelector{Serial: "none"})
	waitStatus(t, store, "j1", jobstore.StatusSucceeded, 5*time.Second)
	// A token the job does not hold (a resend of the accepted token would be
	// answered as accepted again) is refused and counted.
	tok := a.Assigns()[0]
	tok.Generation++
	_ = a.Request(context.Background(), protocol.VerbResult, protocol.Result{Token: tok, Result: []byte(`{}`)}, &protocol.ResultReply{})

	hs := httptest.NewServer(c.srv.Handler())
	defer hs.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`stale_token_rejected_total{verb="result"} 1`,
		`stale_token_rejected_total{verb="renew"} 0`,
		`commits_accepted_total 1`,
		`leases_reclaimed_total{reason="lease_expired"} 0`,
		`jobs{state="QUEUED"} 1`,
		`jobs{state="SUCCEEDED"} 1`,
		`jobs{state="IN_PROGRESS"} 0`,
		`agents_online 1`,
		`requests_total{code="409",verb="result"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	c.nc.Close()
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "nats: ") {
		t.Fatalf("/readyz without NATS: %d %q", code, body)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz without NATS: %d", code)
	}
}

// TestReadyzStorage: /readyz checks the storage bucket when presigned
// uploads are configured.
func TestReadyzStorage(t *testing.T) {
	t.Parallel()
	mio := testenv.MinIO(t)
	ns := testenv.NATS(t)
	store := openSQLite(t)
	p, err := coordinator.NewS3Presigner(coordinator.S3Options{
		Endpoint: mio.Endpoint, Region: "us-east-1", Bucket: "no-such-bucket", AccessKey: mio.AccessKey, SecretKey: mio.SecretKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := fastOptions(t, "c1")
	opts.Presigner = p
	c := startCoordinator(t, ns.ClientURL(), store, opts)
	failed := c.srv.Ready(context.Background())
	if len(failed) != 1 || failed["storage"] == nil {
		t.Fatalf("ready checks %v, want storage failing", failed)
	}
}
