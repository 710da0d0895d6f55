package firing_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule"
	"github.com/edgeagent/edgeagent/coordinator/schedule/firing"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// store is one of the two stores.
type store interface {
	jobstore.Store
	jobstore.ScheduleStore
}

// eachStore runs fn on a fresh PostgreSQL store and a fresh SQLite one.
func eachStore(t *testing.T, fn func(t *testing.T, s store)) {
	t.Run("postgres", func(t *testing.T) {
		s, err := pgstore.Open(t.Context(), testenv.Postgres(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		fn(t, s)
	})
	t.Run("sqlite", func(t *testing.T) {
		s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		fn(t, s)
	})
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// create stores the schedule of the file text with its first slot after
// from.
func create(t *testing.T, s store, id, file string, from time.Time) schedule.Spec {
	t.Helper()
	return createFirst(t, s, id, file, func(spec schedule.Spec, _ time.Time) time.Time { return spec.Next(from) })
}

// createFirst stores the schedule of the file text with first(spec, now)
// as its first slot, now the database clock.
func createFirst(t *testing.T, s store, id, file string, first func(spec schedule.Spec, now time.Time) time.Time) schedule.Spec {
	t.Helper()
	var req api.ScheduleRequest
	if err := api.ParseScheduleFile([]byte(file), &req); err != nil {
		t.Fatal(err)
	}
	spec, project, err := req.Check(api.SubmitOptions{}, schedule.Limits{MinEvery: schedule.MinEveryFloor})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSchedule(t.Context(), jobstore.Schedule{ID: id, Project: project, Spec: doc, CreatedBy: "test"}, 0,
		func(now time.Time) time.Time { return first(spec, now) }); err != nil {
		t.Fatal(err)
	}
	return spec
}

func newLoop(t *testing.T, s store, reg prometheus.Registerer) *firing.Loop {
	t.Helper()
	l, err := firing.New(firing.Options{Store: s, Registerer: reg, Log: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// evaluate evaluates schedule id at now, as the loop does with the
// database clock.
func evaluate(t *testing.T, l *firing.Loop, s store, id string, now time.Time) {
	t.Helper()
	sc, err := s.GetSchedule(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Evaluate(t.Context(), sc, now); err != nil {
		t.Fatalf("evaluate %s at %s: %v", id, now, err)
	}
}

// slotsOfJobs lists the slots of the jobs of schedule id, as UTC
// RFC 3339, in the order they were queued.
func slotsOfJobs(t *testing.T, s store, id string) []string {
	t.Helper()
	jobs, err := s.ListJobs(t.Context(), jobstore.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range jobs {
		if j.ScheduleID == id {
			out = append(out, j.ScheduledAt.UTC().Format(time.RFC3339))
		}
	}
	return out
}

func outcomes(t *testing.T, s store, id string) []string {
	t.Helper()
	sl, err := s.ScheduleSlots(t.Context(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(sl) - 1; i >= 0; i-- {
		out = append(out, sl[i].ScheduledAt.UTC().Format(time.RFC3339)+" "+sl[i].Outcome)
	}
	return out
}

// fires reads schedule_fires_total{outcome} from reg.
func fires(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "schedule_fires_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "outcome" && lp.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no schedule_fires_total{outcome=%q}", outcome)
	return 0
}

// lagCount is the number of fires schedule_lag_seconds observed in reg.
func lagCount(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "schedule_lag_seconds" {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatal("no schedule_lag_seconds")
	return 0
}

const job = `
job:
  steps:
    - op: screenshot
      name: s.png
`

// Evaluated every five minutes through two days around each clock change
// of New York and Berlin, a daily schedule at a local time the change
// skips or repeats queues one job per day, at the rule's instant: after a
// spring-forward gap at its first instant, in a repeated hour at the first
// occurrence only. Every instant differs from what a zone without clock
// changes would give that day.
func TestClockChangesThroughTheStore(t *testing.T) {
	cases := []struct {
		name, cron, zone, from string
		want                   []string
	}{
		{"new york spring forward", "30 2 * * *", "America/New_York", "2026-03-07T00:00:00Z",
			[]string{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"new york fall back", "30 1 * * *", "America/New_York", "2026-10-31T00:00:00Z",
			[]string{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"berlin spring forward", "30 2 * * *", "Europe/Berlin", "2026-03-28T00:00:00Z",
			[]string{"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"berlin fall back", "30 2 * * *", "Europe/Berlin", "2026-10-24T00:00:00Z",
			[]string{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
	}
	eachStore(t, func(t *testing.T, s store) {
		l := newLoop(t, s, nil)
		for i, c := range cases {
			id := fmt.Sprintf("sch-dst%d", i)
			from := utc(c.from)
			create(t, s, id, fmt.Sprintf("cron: %q\ntime_zone: %s\ncatch_up: 1m\noverlap: allow\n%s", c.cron, c.zone, job), from)
			for now := from; now.Before(from.Add(72 * time.Hour)); now = now.Add(5 * time.Minute) {
				evaluate(t, l, s, id, now)
			}
			if got := slotsOfJobs(t, s, id); !slices.Equal(got, c.want) {
				t.Errorf("%s: jobs of the slots %v, want %v", c.name, got, c.want)
			}
			var fired []string
			for _, w := range c.want {
				fired = append(fired, w+" fired")
			}
			if got := outcomes(t, s, id); !slices.Equal(got, fired) {
				t.Errorf("%s: slots %v, want %v", c.name, got, fired)
			}
		}
	})
}

// A coordinator down for three slots of a schedule with catch_up 1h:
// when it is back, the latest slot fires once and the two older ones are
// recorded as missed; evaluating again changes nothing.
func TestDownForThreeSlots(t *testing.T) {
	eachStore(t, func(t *testing.T, s store) {
		reg := prometheus.NewRegistry()
		l := newLoop(t, s, reg)
		start := utc("2026-12-05T10:00:00Z")
		create(t, s, "sch-down", "every: 20m\ncatch_up: 1h\noverlap: allow\n"+job, start.Add(-time.Second))
		evaluate(t, l, s, "sch-down", start.Add(2*time.Second))
		// Down from 10:05 until 11:00:30: the slots 10:20, 10:40 and 11:00 pass.
		back := start.Add(60*time.Minute + 30*time.Second)
		evaluate(t, l, s, "sch-down", back)
		evaluate(t, l, s, "sch-down", back.Add(time.Second))
		want := []string{"2026-12-05T10:00:00Z fired", "2026-12-05T10:20:00Z missed", "2026-12-05T10:40:00Z missed", "2026-12-05T11:00:00Z fired"}
		if got := outcomes(t, s, "sch-down"); !slices.Equal(got, want) {
			t.Errorf("slots %v, want %v", got, want)
		}
		if got := slotsOfJobs(t, s, "sch-down"); !slices.Equal(got, []string{"2026-12-05T10:00:00Z", "2026-12-05T11:00:00Z"}) {
			t.Errorf("jobs of the slots %v", got)
		}
		for outcome, want := range map[string]float64{jobstore.SlotMissed: 2, jobstore.SlotFired: 2} {
			if n := fires(t, reg, outcome); n != want {
				t.Errorf("schedule_fires_total{outcome=%q} = %v, want %v", outcome, n, want)
			}
		}
		if n := lagCount(t, reg); n != 2 {
			t.Errorf("schedule_lag_seconds counts %d fires, want 2", n)
		}
	})
}

// Overlap cancel_previous: the next slot cancels the running job of the
// earlier one, revoking its token, and fires; overlap buffer_one holds a
// slot while the earlier job is queued and fires it once that job ended.
func TestOverlapThroughTheLoop(t *testing.T) {
	eachStore(t, func(t *testing.T, s store) {
		ctx := t.Context()
		var revoked []fencing.Token
		l, err := firing.New(firing.Options{Store: s, Revoke: func(tok fencing.Token, reason string) { revoked = append(revoked, tok) },
			Log: zerolog.New(zerolog.NewTestWriter(t))})
		if err != nil {
			t.Fatal(err)
		}
		start := utc("2026-12-05T10:00:00Z")
		create(t, s, "sch-cancel", "every: 10m\noverlap: cancel_previous\n"+job, start.Add(-time.Second))
		evaluate(t, l, s, "sch-cancel", start)
		first := api.SlotJobID("sch-cancel", start)
		lease, err := s.(sqlstore.Lab).Claim(ctx, first, "pc-1/boot-1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		evaluate(t, l, s, "sch-cancel", start.Add(10*time.Minute))
		if j, _ := s.Get(ctx, first); j.Status != jobstore.StatusCancelled || len(revoked) != 1 || revoked[0] != lease.Token {
			t.Fatalf("earlier job %s %s, revoked %v (its token %v)", j.ID, j.Status, revoked, lease.Token)
		}
		if got := slotsOfJobs(t, s, "sch-cancel"); len(got) != 2 {
			t.Fatalf("jobs of the slots %v", got)
		}

		create(t, s, "sch-buffer", "every: 10m\noverlap: buffer_one\n"+job, start.Add(-time.Second))
		evaluate(t, l, s, "sch-buffer", start)
		evaluate(t, l, s, "sch-buffer", start.Add(10*time.Minute))
		evaluate(t, l, s, "sch-buffer", start.Add(20*time.Minute))
		if got := outcomes(t, s, "sch-buffer"); !slices.Equal(got, []string{"2026-12-05T10:00:00Z fired", "2026-12-05T10:10:00Z buffered", "2026-12-05T10:20:00Z skipped"}) {
			t.Fatalf("slots while the first job is queued: %v", got)
		}
		if _, err := s.Cancel(ctx, api.SlotJobID("sch-buffer", start), "test"); err != nil {
			t.Fatal(err)
		}
		evaluate(t, l, s, "sch-buffer", start.Add(21*time.Minute))
		if got := slotsOfJobs(t, s, "sch-buffer"); !slices.Equal(got, []string{"2026-12-05T10:00:00Z", "2026-12-05T10:10:00Z"}) {
			t.Fatalf("jobs after the first ended: %v", got)
		}
	})
}

// Jitter: a fan-out over 40 phones queues one job per phone, each pinned
// to its phone, not before its share of the window: the first and the
// last at least 80% of the window apart.
func TestJitterSpreadsAFanOut(t *testing.T) {
	eachStore(t, func(t *testing.T, s store) {
		ctx := t.Context()
		var devices []protocol.Device
		for i := range 40 {
			devices = append(devices, protocol.Device{Serial: fmt.Sprintf("phone-%02d", i), State: protocol.DeviceReady})
		}
		if _, _, err := s.AgentHello(ctx, jobstore.AgentHello{AgentID: "pc-1", BootID: "boot-1", Devices: devices, Slots: 40}); err != nil {
			t.Fatal(err)
		}
		l := newLoop(t, s, nil)
		start := utc("2026-12-05T09:00:00Z")
		create(t, s, "sch-jitter", "every: 1h\njitter: 10m\n"+job+"  fan_out: true\n", start.Add(-time.Second))
		evaluate(t, l, s, "sch-jitter", start)
		jobs, err := s.ListJobs(ctx, jobstore.JobFilter{})
		if err != nil {
			t.Fatal(err)
		}
		serials := map[string]bool{}
		var first, last time.Time
		for _, j := range jobs {
			if serials[j.Task.Device.Serial] || j.NotBefore.Before(start) || !j.NotBefore.Before(start.Add(10*time.Minute)) {
				t.Fatalf("job %s on %s not before %s", j.ID, j.Task.Device.Serial, j.NotBefore)
			}
			serials[j.Task.Device.Serial] = true
			if first.IsZero() || j.NotBefore.Before(first) {
				first = j.NotBefore
			}
			if j.NotBefore.After(last) {
				last = j.NotBefore
			}
		}
		if len(serials) != 40 || last.Sub(first) < 8*time.Minute {
			t.Fatalf("%d phones, spread %s", len(serials), last.Sub(first))
		}
	})
}
