package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/api/apitest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// scheduleExtra lowers the shortest interval for second-scale schedules
// and evaluates them often.
const scheduleExtra = `
schedules:
  interval: 100ms
  min_every: 1s
`

// dbNow reads the database clock, the slot clock.
func dbNow(t *testing.T, st *pgstore.Store) time.Time {
	t.Helper()
	now, _, err := st.DueSchedules(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// scheduleShow runs schedule show --json.
func scheduleShow(t *testing.T, c *e2e.Coordinator, id string) api.ScheduleView {
	t.Helper()
	out, errOut, code := c.CLI(t, "schedule", "show", id, "--json")
	if code != 0 {
		t.Fatalf("schedule show %s: exit %d: %s", id, code, errOut)
	}
	var v api.ScheduleView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("schedule show --json: %v\n%s", err, out)
	}
	return v
}

// createSchedule runs schedule create -f with the file text and returns
// the schedule's id.
func createSchedule(t *testing.T, c *e2e.Coordinator, file string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "schedule.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := c.CLI(t, "schedule", "create", "-f", path, "--json")
	if code != 0 {
		t.Fatalf("schedule create: exit %d: %s", code, errOut)
	}
	var v api.ScheduleView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	return v.ID
}

const scheduleJob = `job:
  project: lab
  steps:
    - {op: screenshot, name: s.png}
`

// TestScheduleCommands drives edgecoord schedule through the real binary:
// a refused file exits 2 naming the key and stores nothing; create, list,
// show (the next five fire times in Tokyo and UTC), pause, resume,
// backfill (jobs named after their slots, which job show names) and
// delete; /metrics serves the metrics docs/schedules.md documents, which
// docs/operations.md lists too.
func TestScheduleCommands(t *testing.T) {
	t.Parallel()
	env := e2e.NewEnv(t)
	c := env.StartCoordinator(e2e.CoordinatorOptions{ID: "sched-cli", Extra: scheduleExtra})

	for _, bad := range []struct{ file, want string }{
		{"cron: \"0 9 * *\"\n" + scheduleJob, "cron: "},
		{"cron: \"0 9 * * *\"\ntime_zone: Asia/Atlantis\n" + scheduleJob, "time_zone: unknown time zone"},
		{"every: 500ms\n" + scheduleJob, "every: 500ms is shorter than the minimum interval 1s"},
		{"every: 1h\njob:\n  steps:\n    - {op: fly}\n", "job: steps[0]: op: unknown op"},
		{"every: 1h\nevery_day: true\n" + scheduleJob, "unknown field"},
	} {
		path := filepath.Join(t.TempDir(), "bad.yaml")
		if err := os.WriteFile(path, []byte(bad.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := c.CLI(t, "schedule", "create", "-f", path)
		if code != exitUsage || !strings.Contains(errOut, bad.want) {
			t.Errorf("schedule create of %q: exit %d, stderr %q; want %d mentioning %q", bad.file, code, errOut, exitUsage, bad.want)
		}
	}
	if out, _, _ := c.CLI(t, "schedule", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("a refused schedule was stored: %s", out)
	}

	id := createSchedule(t, c, "cron: \"0 9 * * *\"\ntime_zone: Asia/Tokyo\noverlap: allow\ncatch_up: 1h\n"+scheduleJob)
	out, _, code := c.CLI(t, "schedule", "list")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "0 9 * * * Asia/Tokyo") || !strings.Contains(out, "T09:00:00+09:00") {
		t.Fatalf("schedule list: %s", out)
	}
	out, _, code = c.CLI(t, "schedule", "show", id)
	local := regexp.MustCompile(`(?m)^\s+(\d{4}-\d\d-\d\dT09:00:00\+09:00)\s+(\d{4}-\d\d-\d\dT00:00:00Z)$`)
	if m := local.FindAllStringSubmatch(out, -1); code != 0 || len(m) != 5 || m[0][1][:10] != m[0][2][:10] {
		t.Fatalf("schedule show: the next five fire times in Tokyo and UTC:\n%s", out)
	}

	if out, _, code := c.CLI(t, "schedule", "pause", id); code != 0 || !strings.Contains(out, "paused") || !scheduleShow(t, c, id).Paused {
		t.Fatalf("schedule pause: %s", out)
	}
	if out, _, code := c.CLI(t, "schedule", "resume", id); code != 0 || !strings.Contains(out, "resumed") || len(scheduleShow(t, c, id).Next) != 5 {
		t.Fatalf("schedule resume: %s", out)
	}

	// Backfill the last two days: two slots, one job each.
	now := dbNow(t, c.Store())
	from, to := now.Add(-48*time.Hour).Format(time.RFC3339), now.Format(time.RFC3339)
	out, errOut, code := c.CLI(t, "schedule", "backfill", id, "--from", from, "--to", to, "--json")
	var bf api.BackfillReply
	if code != 0 || json.Unmarshal([]byte(out), &bf) != nil || len(bf.Slots) != 2 || len(bf.Slots[1].Jobs) != 1 {
		t.Fatalf("schedule backfill: exit %d %s %s", code, out, errOut)
	}
	jobID := bf.Slots[1].Jobs[0]
	if jobID != api.SlotJobID(id, bf.Slots[1].ScheduledAt) {
		t.Fatalf("backfilled job %s is not named after its slot %s", jobID, bf.Slots[1].ScheduledAt)
	}
	if _, errOut, code := c.CLI(t, "schedule", "backfill", id, "--from", to, "--to", from); code != exitUsage || !strings.Contains(errOut, "to") {
		t.Fatalf("backfill of a reversed range: exit %d %s", code, errOut)
	}
	out, _, _ = c.CLI(t, "job", "show", jobID, "--json")
	var jv jobView
	if err := json.Unmarshal([]byte(out), &jv); err != nil || jv.ScheduleID != id || jv.ScheduledAt == nil || !jv.ScheduledAt.Equal(bf.Slots[1].ScheduledAt) {
		t.Fatalf("job show --json of a scheduled job: %s", out)
	}
	out, _, _ = c.CLI(t, "schedule", "show", id)
	if !strings.Contains(out, "backfilled") || !strings.Contains(out, jobID) {
		t.Fatalf("schedule show after the backfill:\n%s", out)
	}
	// The older backfilled slot's job never ran before the next slot.
	if !regexp.MustCompile(regexp.QuoteMeta(bf.Slots[0].Jobs[0]) + `\s+QUEUED\s+missed \(not yet\)`).MatchString(out) {
		t.Fatalf("schedule show does not report the job of a past slot missed:\n%s", out)
	}

	checkScheduleMetrics(t, c.MetricsAddr)

	if out, _, code := c.CLI(t, "schedule", "delete", id); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("schedule delete: %s", out)
	}
	if _, _, code := c.CLI(t, "schedule", "show", id); code == 0 {
		t.Fatal("schedule show of a deleted schedule succeeded")
	}
	c.MustCleanShutdown(t)
}

// documentedTable returns the backquoted metric names and labels of the
// table rows under the heading section of docs/doc.
func documentedTable(t *testing.T, doc, section string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", doc))
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile("^\\| `([a-z_]+)(\\{[a-z_,]*\\})?`")
	out := map[string]string{}
	in := false
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			in = strings.TrimLeft(line, "# ") == section
			continue
		}
		if m := name.FindStringSubmatch(line); in && m != nil {
			out[m[1]] = m[2]
		}
	}
	return out
}

// checkScheduleMetrics: every metric of docs/schedules.md is in
// docs/operations.md's table with the same labels and served on /metrics
// with them.
func checkScheduleMetrics(t *testing.T, addr string) {
	t.Helper()
	documented := documentedTable(t, "schedules.md", "Metrics")
	ops := documentedTable(t, "operations.md", "Metrics and health")
	if len(documented) != 2 {
		t.Fatalf("docs/schedules.md documents %v", documented)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for name, labels := range documented {
		if l, ok := ops[name]; !ok || l != labels {
			t.Errorf("docs/operations.md lists %s as %q, docs/schedules.md as %q", name, l, labels)
		}
		if !strings.Contains(string(body), "# TYPE "+name+" ") {
			t.Errorf("/metrics lacks %s", name)
		}
		for _, label := range strings.Split(strings.Trim(labels, "{}"), ",") {
			if label != "" && !regexp.MustCompile(`(?m)^`+name+`\{`+label+`="`).Match(body) {
				t.Errorf("/metrics has no %s with label %s", name, label)
			}
		}
	}
}

// A coordinator down for three slots of a schedule with catch_up 1h: on
// restart the latest slot fires once, and schedule show and the API show
// the two older ones as missed.
func TestScheduleCatchUpAfterOutage(t *testing.T) {
	t.Parallel() // waits on slots and timeouts most of its time; its servers are its own
	// The slot interval: the coordinator is killed within one interval of
	// the first slot and is back within one interval of the third after
	// it (a restart takes well under a second).
	const every = 3 * time.Second
	env := e2e.NewEnv(t)
	c := env.NewCoordinator(e2e.CoordinatorOptions{ID: "sched-outage", API: true, Extra: scheduleExtra})
	c.Start()
	tok := c.Token(t, "alice", "lab", "read")
	id := createSchedule(t, c, fmt.Sprintf("every: %s\ncatch_up: 1h\noverlap: allow\n", every)+scheduleJob)
	st := c.Store()
	var fired jobstore.Slot
	testenv.Eventually(t, e2e.WaitTimeout, "a first slot fired", func() bool {
		sl, err := st.ScheduleSlots(t.Context(), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(sl) > 0 {
			fired = sl[0]
		}
		return len(sl) > 0
	})
	c.Kill()
	if fired.Outcome != jobstore.SlotFired {
		t.Fatalf("first slot %+v", fired)
	}
	// Down until the third slot after it came.
	third := fired.ScheduledAt.Add(3 * every)
	testenv.Eventually(t, time.Minute, "three slots to pass", func() bool { return !dbNow(t, st).Before(third) })
	c.Start()
	testenv.Eventually(t, e2e.WaitTimeout, "the latest slot to fire after the restart", func() bool {
		sl, err := st.ScheduleSlots(t.Context(), id, 0)
		return err == nil && len(sl) >= 4
	})
	v := scheduleShow(t, c, id)
	var got []string
	for i := len(v.Slots) - 1; i >= 0 && len(got) < 4; i-- {
		s := v.Slots[i]
		got = append(got, fmt.Sprintf("+%s %s %d", s.ScheduledAt.Sub(fired.ScheduledAt), s.Outcome, len(s.Jobs)))
	}
	want := []string{"+0s fired 1", fmt.Sprintf("+%s missed 0", every), fmt.Sprintf("+%s missed 0", 2*every), fmt.Sprintf("+%s fired 1", 3*every)}
	if !slices.Equal(got, want) {
		t.Fatalf("slots after the outage: %v, want %v", got, want)
	}
	out, _, _ := c.CLI(t, "schedule", "show", id)
	for _, s := range []time.Time{fired.ScheduledAt.Add(every), fired.ScheduledAt.Add(2 * every)} {
		if !regexp.MustCompile(regexp.QuoteMeta(s.UTC().Format(time.RFC3339)) + `\s+missed`).MatchString(out) {
			t.Errorf("schedule show does not show %s missed:\n%s", s.UTC().Format(time.RFC3339), out)
		}
	}
	b := &apiBinary{Coordinator: c, client: apitest.Client(t)}
	var av api.ScheduleView
	b.call(t, "GET", "/api/v1/schedules/"+id, tok, "").into(t, &av)
	missed := 0
	for _, s := range av.Slots {
		if s.Outcome == jobstore.SlotMissed && s.ScheduledAt.After(fired.ScheduledAt) && !s.ScheduledAt.After(third) {
			missed++
		}
	}
	if missed != 2 {
		t.Fatalf("the API shows %d missed slots: %+v", missed, av.Slots)
	}
	// Exactly one job set for the latest slot.
	jobs, err := st.ListJobs(t.Context(), jobstore.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, j := range jobs {
		if j.ScheduleID == id && j.ScheduledAt.Equal(third) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d jobs for the latest slot, want 1", n)
	}
}

// Two coordinators on one PostgreSQL evaluate 80 schedules firing every
// second while one of them is killed and restarted: every slot from the
// first to the last recorded has exactly one outcome, every fired slot
// exactly one job and no other slot any, and no slot is missing.
func TestSchedulesTwoCoordinatorsOneJobSetPerSlot(t *testing.T) {
	t.Parallel() // waits on slots and timeouts most of its time; its servers are its own
	env := e2e.NewEnv(t)
	extra := scheduleExtra + "log:\n  level: warn\n"
	c1 := env.StartCoordinator(e2e.CoordinatorOptions{ID: "sched-1", Extra: extra})
	c2 := env.StartCoordinator(e2e.CoordinatorOptions{ID: "sched-2", Extra: extra})
	st := c1.Store()
	// The phases below last a few slots each, and the schedules are many,
	// so that the phases still hold hundreds of slots: about 640 that both
	// coordinators evaluate and 240 that one evaluates alone.
	const n = 80
	ids := make([]string, 0, n)
	for range n {
		var req api.ScheduleRequest
		if err := api.ParseScheduleFile([]byte("every: 1s\ncatch_up: 1h\noverlap: allow\n"+scheduleJob), &req); err != nil {
			t.Fatal(err)
		}
		sc, err := api.CreateSchedule(t.Context(), st, req, api.SubmitOptions{SubmittedBy: "test"}, schedule.Limits{MinEvery: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sc.ID)
	}
	// Slots a while after the start, after the kill and after the
	// restart, all while both coordinators evaluate or one is down.
	waitSlots := func(what string, after time.Time) {
		t.Helper()
		testenv.Eventually(t, time.Minute, what, func() bool {
			for _, id := range ids {
				sl, err := st.ScheduleSlots(t.Context(), id, 1)
				if err != nil {
					t.Fatal(err)
				}
				if len(sl) == 0 || !sl[0].ScheduledAt.After(after) {
					return false
				}
			}
			return true
		})
	}
	waitSlots("every schedule to fire with two coordinators", dbNow(t, st).Add(3*time.Second))
	c2.Kill()
	waitSlots("every schedule to fire with one coordinator", dbNow(t, st).Add(2*time.Second))
	c2.Start()
	waitSlots("every schedule to fire after the restart", dbNow(t, st).Add(3*time.Second))
	c1.MustCleanShutdown(t)
	c2.MustCleanShutdown(t)

	jobs, err := st.ListJobs(t.Context(), jobstore.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	perSlot := map[string]int{}
	for _, j := range jobs {
		perSlot[j.ScheduleID+" "+j.ScheduledAt.UTC().Format(time.RFC3339)]++
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, id := range ids {
		wg.Go(func() {
			sl, err := st.ScheduleSlots(context.WithoutCancel(t.Context()), id, 1000)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			slices.Reverse(sl)
			next := sl[0].ScheduledAt
			for _, s := range sl {
				key := id + " " + s.ScheduledAt.UTC().Format(time.RFC3339)
				switch {
				case s.ScheduledAt.Before(next):
					t.Errorf("%s: slot %s has two outcomes", id, s.ScheduledAt)
					continue
				case s.ScheduledAt.After(next):
					t.Errorf("%s: slot %s is missing", id, next)
				}
				want := 0
				if s.Outcome == jobstore.SlotFired {
					want = 1
				}
				if perSlot[key] != want {
					t.Errorf("%s: %s slot %s has %d jobs, want %d", id, s.Outcome, s.ScheduledAt, perSlot[key], want)
				}
				delete(perSlot, key)
				next = s.ScheduledAt.Add(time.Duration(s.Count) * time.Second)
			}
		})
	}
	wg.Wait()
	for key, k := range perSlot {
		t.Errorf("%d jobs of %s, a slot with no outcome", k, key)
	}
}
