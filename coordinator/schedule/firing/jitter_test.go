package firing_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule"
	"github.com/edgeagent/edgeagent/coordinator/schedule/firing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// A slot of a schedule with jitter: 4s fans out over the 40 phones of
// four PCs. The coordinator grants its 40 jobs one to each phone, none
// before the slot, spread over the window: on the database clock the
// first and the last grant are at least 80% of the window apart.
func TestJitterSpreadsTheFanOut(t *testing.T) {
	const (
		pcs, perPC = 4, 10
		window     = 4 * time.Second
	)
	eachStore(t, func(t *testing.T, s store) {
		ns := testenv.NATS(t)
		log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
		opts := coordinator.Options{
			ID: "c1", LeaseTTL: 3 * time.Second, ReapInterval: 200 * time.Millisecond,
			ScheduleInterval: 50 * time.Millisecond, HeartbeatEvery: 200 * time.Millisecond,
			OfflineAfter: 2 * time.Second, AssignTimeout: 2 * time.Second, Log: log,
		}
		nc, err := nats.Connect(ns.ClientURL(), nats.CustomInboxPrefix(coordinator.InboxPrefix))
		if err != nil {
			t.Fatal(err)
		}
		srv := coordinator.New(nc, s, opts)
		l, err := firing.New(firing.Options{Store: s, Interval: 100 * time.Millisecond, Log: log,
			Submit: api.SubmitOptions{OfflineAfter: opts.OfflineAfter, Phones: srv.Phones()}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := srv.Run(ctx); err != nil {
				t.Errorf("coordinator: %v", err)
			}
		})
		wg.Go(func() { _ = l.Run(ctx) })
		t.Cleanup(func() { cancel(); wg.Wait(); nc.Close() })
		testenv.Eventually(t, 30*time.Second, "the coordinator to answer", func() bool {
			_, err := nc.Request("$SRV.PING."+coordinator.ServiceName, nil, 200*time.Millisecond)
			return err == nil
		})

		for i := range pcs {
			var phones []protocol.Device
			for k := range perPC {
				phones = append(phones, protocol.Device{Serial: fmt.Sprintf("P%d-%02d", i, k), State: protocol.DeviceReady, Model: "Pixel 7", Tags: []string{"shop"}})
			}
			coordtest.Start(t, coordtest.Options{ID: fmt.Sprintf("pc-%d", i), URL: ns.ClientURL(), Devices: phones, Slots: perPC})
		}
		testenv.Eventually(t, 30*time.Second, "the 40 phones to be registered", func() bool {
			agents, err := s.Agents(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, a := range agents {
				n += len(protocol.ReadyDevices(a.Devices))
			}
			return n == pcs*perPC
		})

		var slot time.Time
		createFirst(t, s, "sch-jitter", fmt.Sprintf(`every: 1h
jitter: %s
job:
  device: {tags: [shop]}
  fan_out: true
  steps:
    - op: screenshot
      name: s.png
`, window), func(_ schedule.Spec, now time.Time) time.Time {
			slot = now.Add(500 * time.Millisecond)
			return slot
		})

		var jobs []jobstore.Job
		testenv.Eventually(t, 2*time.Minute, "the 40 jobs of the slot to be granted", func() bool {
			all, err := s.ListJobs(t.Context(), jobstore.JobFilter{})
			if err != nil {
				t.Fatal(err)
			}
			jobs = jobs[:0]
			for _, j := range all {
				if j.ScheduleID == "sch-jitter" && j.Attempts > 0 {
					jobs = append(jobs, j)
				}
			}
			return len(jobs) == pcs*perPC
		})

		phones := map[string]string{}
		var first, last time.Time
		for _, j := range jobs {
			if !j.ScheduledAt.Equal(slot) {
				t.Errorf("job %s names the slot %s, want %s", j.ID, j.ScheduledAt, slot)
			}
			if other, ok := phones[j.Device]; ok {
				t.Errorf("phone %q got %s and %s", j.Device, other, j.ID)
			}
			phones[j.Device] = j.ID
			granted := grantedAt(t, s, j.ID)
			if granted.Before(slot) {
				t.Errorf("job %s granted at %s, before its slot %s", j.ID, granted, slot)
			}
			if first.IsZero() || granted.Before(first) {
				first = granted
			}
			if granted.After(last) {
				last = granted
			}
		}
		if len(phones) != pcs*perPC {
			t.Errorf("the jobs went to %d phones, want %d", len(phones), pcs*perPC)
		}
		if spread := last.Sub(first); spread < window*8/10 {
			t.Errorf("first grant %s, last %s: %s apart, want at least 80%% of the %s window", first, last, spread, window)
		}
	})
}

// grantedAt is when the store first granted job id (database clock).
func grantedAt(t *testing.T, s store, id string) time.Time {
	t.Helper()
	es, ok := s.(jobstore.EventStore)
	if !ok {
		t.Fatalf("%T keeps no events", s)
	}
	evs, err := es.Events(t.Context(), jobstore.EventQuery{JobID: id})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == jobstore.EventGranted {
			return e.At
		}
	}
	t.Fatalf("job %s has no grant event", id)
	return time.Time{}
}
