package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// scheduleTests are the cases of recurring schedules (ScheduleStore), not
// to be confused with the scheduler's grants (sched.go).
var scheduleTests = []struct {
	name string
	fn   func(t *testing.T, s sqlstore.Lab)
}{
	{"ScheduleCreateListDelete", testScheduleCreateListDelete},
	{"ScheduleOneJobSetPerSlot", testScheduleOneJobSetPerSlot},
	{"ScheduleFireRace", testScheduleFireRace},
	{"ScheduleMissedSlots", testScheduleMissedSlots},
	{"ScheduleOverlapSkip", testScheduleOverlapSkip},
	{"ScheduleOverlapBufferOne", testScheduleOverlapBufferOne},
	{"SchedulePauseResume", testSchedulePauseResume},
	{"ScheduleBackfill", testScheduleBackfill},
	{"ScheduleDueOnTheDatabaseClock", testScheduleDueOnTheDatabaseClock},
	{"ScheduleLimitPerProject", testScheduleLimitPerProject},
	{"ScheduleSlotJobs", testScheduleSlotJobs},
}

func scheduleStore(t *testing.T, s sqlstore.Lab) jobstore.ScheduleStore {
	t.Helper()
	ss, ok := s.(jobstore.ScheduleStore)
	if !ok {
		t.Fatalf("%T does not implement jobstore.ScheduleStore", s)
	}
	return ss
}

// slot0 is a slot time of the suite, in whole seconds as every store
// keeps them.
var slot0 = time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC)

// createSchedule stores a schedule of project p whose first slot is first.
func createSchedule(t *testing.T, ss jobstore.ScheduleStore, id, p string, first time.Time) jobstore.Schedule {
	t.Helper()
	sc, err := ss.CreateSchedule(t.Context(), jobstore.Schedule{ID: id, Project: p, Spec: []byte(`{"every": "1h", "job": {"steps": []}}`), CreatedBy: "alice"}, 0,
		func(time.Time) time.Time { return first })
	if err != nil {
		t.Fatalf("create schedule %s: %v", id, err)
	}
	return sc
}

// slotJobs are the jobs of one slot of schedule id: n jobs named after it.
func slotJobs(id string, at time.Time, n int) []jobstore.JobSpec {
	var specs []jobstore.JobSpec
	for i := range n {
		specs = append(specs, jobstore.JobSpec{ID: fmt.Sprintf("%s-%d-%d", id, at.Unix(), i+1), Task: testTask(), Project: "p"})
	}
	return specs
}

func slotsOf(t *testing.T, ss jobstore.ScheduleStore, id string) []jobstore.Slot {
	t.Helper()
	sl, err := ss.ScheduleSlots(t.Context(), id, 0)
	if err != nil {
		t.Fatalf("slots of %s: %v", id, err)
	}
	return sl
}

// outcomes renders slots as "HH:MM outcome[count]", oldest first.
func outcomes(sl []jobstore.Slot) []string {
	var out []string
	for i := len(sl) - 1; i >= 0; i-- {
		s := sl[i].ScheduledAt.UTC().Format("15:04") + " " + sl[i].Outcome
		if sl[i].Count > 1 {
			s += fmt.Sprintf("[%d]", sl[i].Count)
		}
		out = append(out, s)
	}
	return out
}

func testScheduleCreateListDelete(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	ss := scheduleStore(t, s)
	a := createSchedule(t, ss, "sch-a", "p1", slot0)
	createSchedule(t, ss, "sch-b", "p2", slot0)
	if a.ID != "sch-a" || a.Project != "p1" || a.CreatedBy != "alice" || !a.NextAt.Equal(slot0) || a.Paused || a.CreatedAt.IsZero() || !jsonEqual(a.Spec, []byte(`{"every": "1h", "job": {"steps": []}}`)) {
		t.Fatalf("created %+v", a)
	}
	got, err := ss.GetSchedule(ctx, "sch-a")
	if err != nil || !got.NextAt.Equal(slot0) {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if _, err := ss.CreateSchedule(ctx, jobstore.Schedule{ID: "sch-a", Project: "p1", Spec: []byte(`{}`)}, 0, func(time.Time) time.Time { return slot0 }); err == nil {
		t.Fatal("a second schedule with one id was stored")
	}
	for _, c := range []struct {
		projects []string
		want     []string
	}{{nil, []string{"sch-a", "sch-b"}}, {[]string{"p2"}, []string{"sch-b"}}, {[]string{}, nil}} {
		list, err := ss.Schedules(ctx, jobstore.ScheduleFilter{Projects: c.projects})
		var ids []string
		for _, sc := range list {
			ids = append(ids, sc.ID)
		}
		if err != nil || !slices.Equal(ids, c.want) {
			t.Errorf("schedules of %v: %v, %v; want %v", c.projects, ids, err, c.want)
		}
	}
	if _, err := ss.FireSlot(ctx, jobstore.SlotFire{ScheduleID: "sch-a", Slot: slot0, Jobs: slotJobs("sch-a", slot0, 1), Next: slot0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := ss.DeleteSchedule(ctx, "sch-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.GetSchedule(ctx, "sch-a"); !errors.Is(err, jobstore.ErrScheduleNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if sl := slotsOf(t, ss, "sch-a"); len(sl) != 0 {
		t.Fatalf("slots of a deleted schedule: %+v", sl)
	}
	// The jobs it fired stay.
	if j := get(t, s, fmt.Sprintf("sch-a-%d-1", slot0.Unix())); j.ScheduleID != "sch-a" {
		t.Fatalf("job of the deleted schedule: %+v", j)
	}
	if err := ss.DeleteSchedule(ctx, "sch-a"); !errors.Is(err, jobstore.ErrScheduleNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := ss.FireSlot(ctx, jobstore.SlotFire{ScheduleID: "nope", Slot: slot0}); !errors.Is(err, jobstore.ErrScheduleNotFound) {
		t.Fatalf("fire unknown schedule: %v", err)
	}
}

// A slot fired twice queues its jobs once: the second attempt writes
// nothing and says the slot is taken. The jobs name their schedule and
// slot, and the slot lists them.
func testScheduleOneJobSetPerSlot(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	ss := scheduleStore(t, s)
	createSchedule(t, ss, "sch", "p", slot0)
	res, err := ss.FireSlot(ctx, jobstore.SlotFire{ScheduleID: "sch", Slot: slot0, Jobs: slotJobs("sch", slot0, 3), Next: slot0.Add(time.Hour)})
	if err != nil || res.Outcome != jobstore.SlotFired || len(res.Jobs) != 3 {
		t.Fatalf("fire: %+v, %v", res, err)
	}
	for _, j := range res.Jobs {
		if j.ScheduleID != "sch" || !j.ScheduledAt.Equal(slot0) || j.Status != jobstore.StatusQueued {
			t.Fatalf("fired job %+v", j)
		}
		if g := get(t, s, j.ID); g.ScheduleID != "sch" || !g.ScheduledAt.Equal(slot0) {
			t.Fatalf("stored job %+v", g)
		}
	}
	// Another evaluation of the same slot, with other job ids: nothing.
	again := slotJobs("sch-other", slot0, 3)
	if _, err := ss.FireSlot(ctx, jobstore.SlotFire{ScheduleID: "sch", Slot: slot0, Jobs: again, Overlap: "allow", Next: slot0.Add(time.Hour)}); !errors.Is(err, jobstore.ErrSlotTaken) {
		t.Fatalf("fire the slot again: %v, want ErrSlotTaken", err)
	}
	if _, err := s.Get(ctx, again[0].ID); !errors.Is(err, jobstore.ErrNotFound) {
		t.Fatalf("a job of the second fire exists: %v", err)
	}
	sl := slotsOf(t, ss, "sch")
	if len(sl) != 1 || sl[0].Outcome != jobstore.SlotFired || !sl[0].ScheduledAt.Equal(slot0) || sl[0].RecordedAt.IsZero() || len(sl[0].Jobs) != 3 || sl[0].Jobs[0].ID != res.Jobs[0].ID || sl[0].Jobs[0].Status != jobstore.StatusQueued || !sl[0].Jobs[0].GrantedAt.IsZero() {
		t.Fatalf("slots %+v", sl)
	}
	sc, err := ss.GetSchedule(ctx, "sch")
	if err != nil || !sc.NextAt.Equal(slot0.Add(time.Hour)) {
		t.Fatalf("schedule after the fire: %+v, %v", sc, err)
	}
}

// Many evaluations of one slot at once, as coordinators sharing the store
// make them: exactly one queues jobs.
func testScheduleFireRace(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	ss := scheduleStore(t, s)
	createSchedule(t, ss, "sch", "p", slot0)
	const n = 8
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fired int
	)
	for i := range n {
		wg.Go(func() {
			res, err := ss.FireSlot(ctx, jobstore.SlotFire{ScheduleID: "sch", Slot: slot0, Jobs: slotJobs(fmt.Sprintf("sch%d", i), slot0, 2), Overlap: "allow", Next: slot0.Add(time.Hour)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && res.Outcome == jobstore.SlotFired:
				fired++
			case !errors.Is(err, jobstore.ErrSlotTaken):
				t.Errorf("fire %d: %+v, %v", i, res, err)
			}
		})
	}
	wg.Wait()
	jobs, err := s.ListJobs(ctx, jobstore.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if fired != 1 || len(jobs) != 2 {
		t.Fatalf("%d evaluations fired, %d jobs queued; want 1 and 2", fired, len(jobs))
	}
}

// Missed slots are recorded one by one, a folded run as one row with its
// count; a slot with an outcome keeps it. The next slot never moves back.
func testScheduleMissedSlots(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	ss := scheduleStore(t, s)
	createSchedule(t, ss, "sch", "p", slot0)
	at := func(m int) time.Time { return slot0.Add(time.Duration(m) * time.Minute) }
	res, err := ss.FireSlot(ctx, jobstore.SlotFire{
		ScheduleID: "sch", Slot: at(40), Jobs: slotJobs("sch", at(40), 1),
		Missed: []time.Time{at(20), at(30)},
		Folded: jobstore.Slot{ScheduledAt: at(0), Through: at(10), Count: 2},
		Next:   at(50),
	})
	if err != nil || res.Outcome != jobstore.SlotFired {
		t.Fatalf("fire: %+v, %v", res, err)
	}
	sl := slotsOf(t, ss, "sch")
	if got, want := outcomes(sl), []string{"05:30 missed[2]", "05:50 missed", "06:00 missed", "06:10 fired"}; !slices.Equal(got, want) {
		t.Fatalf("slots %v, want %v", got, want)
	}
	if run := sl[len(sl)-1]; !run.Through.Equal(at(10)) || run.Detail == "" {
		t.Fatalf("folded run %+v", run)
	}
	// A late evaluation that thinks 06:10 was missed and 05:40 is next.
	if _, err := ss.FireSlot(ctx, jobstore.SlotFire{ScheduleID: "sch", Missed: []time.Time{at(40)}, Next: at(10)}); err != nil {
		t.Fatal(err)
	}
	if got := outcomes(slotsOf(t, ss, "sch")); got[len(got)-1] != "06:10 fired" {
		t.Fatalf("the fired slot was overwritten: %v", got)
	}
	if sc, _ := ss.GetSchedule(ctx, "sch"); !sc.NextAt.Equal(at(50)) {
		t.Fatalf("next slot moved back to %s", sc.NextAt)
	}
	// An evaluation that finds no slot after the end ends the schedule.
	if _, err := ss.FireSlot(ctx, jobstore.SlotFire{ScheduleID: "sch"}); err != nil {
		t.Fatal(err)
	}
	if sc, _ := ss.GetSchedule(ctx, "sch"); !sc.NextAt.IsZero() {
		t.Fatalf("ended schedule's next slot %s", sc.NextAt)
	}
}

// Overlap skip: a slot due while the jobs of the previous one are live is
// skipped, saying why; allow fires regardless; once the jobs end the next
// slot fires.
func testScheduleOverlapSkip(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	ss := scheduleStore(t, s)
	createSchedule(t, ss, "sch", "p", slot0)
	at := func(h int) time.Time { return slot0.Add(time.Duration(h) * time.Hour) }
	fire := func(h int, overlap string) jobstore.SlotResult {
		t.Helper()
		res, err := ss.FireSlot(ctx, jobstore.SlotFire{ScheduleID: "sch", Slot: at(h), Jobs: slotJobs("sch", at(h), 1), Overlap: overlap, Next: at(h + 1)})
		if err != nil {
			t.Fatalf("fire slot %d: %v", h, err)
		}
		return res
	}
	first := fire(0, "skip")
	if res := fire(1, "skip"); res.Outcome != jobstore.SlotSkipped || len(res.Jobs) != 0 {
		t.Fatalf("slot while the first's job is queued: %+v", res)
	}
	if sl := slotsOf(t, ss, "sch"); sl[0].Detail == "" || len(sl[0].Jobs) != 0 {
		t.Fatalf("skipped slot %+v", sl[0])
	}
	if res := fire(2, "allow"); res.Outcome != jobstore.SlotFired {
		t.Fatalf("allow: %+v", res)
	}
	for _, id := range []string{first.Jobs[0].ID, slotJobs("sch", at(2), 1)[0].ID} {
		if _, err := s.Cancel(ctx, id, "test"); err != nil {
			t.Fatal(err)
		}
	}
	live, err := ss.LiveScheduleJobs(ctx, "sch")
	if err != nil || len(live) != 0 {
		t.Fatalf("live jobs after cancel: %+v, %v", live, err)
	}
	if res := fire(3, "skip"); res.Outcome != jobstore.SlotFired {
		t.Fatalf("slot after the jobs ended: %+v", res)
	}
	if live, _ := ss.LiveScheduleJobs(ctx, "sch"); len(live) != 1 || !live[0].ScheduledAt.Equal(at(3)) {
		t.Fatalf("live jobs: %+v", live)
	}
	if got, want := outcomes(slotsOf(t, ss, "sch")), []string{"05:30 fired", "06:30 skipped", "07:30 fired", "08:30 fired"}; !slices.Equal(got, want) {
		t.Fatalf("slots %v, want %v", got, want)
	}
}

// Overlap buffer_one: the first slot due while jobs are live is held, a
// second one skipped; the held slot fires once the jobs end, once.
func testScheduleOverlapBufferOne(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	ss := scheduleStore(t, s)
	createSchedule(t, ss, "sch", "p", slot0)
	at := func(h int) time.Time { return slot0.Add(time.Duration(h) * time.Hour) }
	fire := func(f jobstore.SlotFire) (jobstore.SlotResult, error) {
		f.ScheduleID, f.Overlap = "sch", "buffer_one"
		f.Jobs = slotJobs("sch", f.Slot, 1)
		return ss.FireSlot(ctx, f)
	}
	first, err := fire(jobstore.SlotFire{Slot: at(0), Next: at(1)})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := fire(jobstore.SlotFire{Slot: at(1), Next: at(2)}); err != nil || res.Outcome != jobstore.SlotBuffered {
		t.Fatalf("second slot: %+v, %v", res, err)
	}
	if res, err := fire(jobstore.SlotFire{Slot: at(2), Next: at(3)}); err != nil || res.Outcome != jobstore.SlotSkipped {
		t.Fatalf("third slot: %+v, %v", res, err)
	}
	sc, err := ss.GetSchedule(ctx, "sch")
	if err != nil || !sc.BufferedAt.Equal(at(1)) {
		t.Fatalf("schedule %+v, %v", sc, err)
	}
	// Held while the first slot's job is live; due all the while.
	if res, err := fire(jobstore.SlotFire{Slot: at(1), Buffered: true}); err != nil || res.Outcome != jobstore.SlotBuffered {
		t.Fatalf("buffered slot while live: %+v, %v", res, err)
	}
	if _, due, err := ss.DueSchedules(ctx, 10); err != nil || len(due) != 1 {
		t.Fatalf("due with a buffered slot: %+v, %v", due, err)
	}
	if _, err := s.Cancel(ctx, first.Jobs[0].ID, "test"); err != nil {
		t.Fatal(err)
	}
	res, err := fire(jobstore.SlotFire{Slot: at(1), Buffered: true})
	if err != nil || res.Outcome != jobstore.SlotFired || len(res.Jobs) != 1 || !res.Jobs[0].ScheduledAt.Equal(at(1)) {
		t.Fatalf("buffered slot after the job ended: %+v, %v", res, err)
	}
	if _, err := fire(jobstore.SlotFire{Slot: at(1), Buffered: true}); !errors.Is(err, jobstore.ErrSlotTaken) {
		t.Fatalf("buffered slot fired twice: %v", err)
	}
	if got, want := outcomes(slotsOf(t, ss, "sch")), []string{"05:30 fired", "06:30 fired", "07:30 skipped"}; !slices.Equal(got, want) {
		t.Fatalf("slots %v, want %v", got, want)
	}
	if sc, _ := ss.GetSchedule(ctx, "sch"); !sc.BufferedAt.IsZero() {
		t.Fatalf("still buffered: %+v", sc)
	}
}

// A paused schedule is not due and fires nothing; resuming sets its next
// slot from the database clock.
func testSchedulePauseResume(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	ss := scheduleStore(t, s)
	createSchedule(t, ss, "sch", "p", slot0)
	sc, err := ss.PauseSchedule(ctx, "sch", true, nil)
	if err != nil || !sc.Paused {
		t.Fatalf("pause: %+v, %v", sc, err)
	}
	if _, due, err := ss.DueSchedules(ctx, 10); err != nil || len(due) != 0 {
		t.Fatalf("due while paused: %+v, %v", due, err)
	}
	res, err := ss.FireSlot(ctx, jobstore.SlotFire{ScheduleID: "sch", Slot: slot0, Jobs: slotJobs("sch", slot0, 1), Missed: []time.Time{slot0.Add(-time.Hour)}, Next: slot0.Add(time.Hour)})
	if err != nil || res.Outcome != "" || len(slotsOf(t, ss, "sch")) != 0 {
		t.Fatalf("fire while paused: %+v, %v", res, err)
	}
	var clock time.Time
	sc, err = ss.PauseSchedule(ctx, "sch", false, func(now time.Time) time.Time { clock = now; return now.Add(time.Hour).Truncate(time.Second) })
	if err != nil || sc.Paused || clock.IsZero() || !sc.NextAt.Equal(clock.Add(time.Hour).Truncate(time.Second)) {
		t.Fatalf("resume: %+v, %v (clock %s)", sc, err, clock)
	}
	if _, err := ss.PauseSchedule(ctx, "nope", true, nil); !errors.Is(err, jobstore.ErrScheduleNotFound) {
		t.Fatalf("pause unknown: %v", err)
	}
}

// A backfill fires a past slot whatever the pause and the live jobs, once,
// and leaves the next slot alone.
func testScheduleBackfill(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	ss := scheduleStore(t, s)
	createSchedule(t, ss, "sch", "p", slot0)
	if _, err := ss.FireSlot(ctx, jobstore.SlotFire{ScheduleID: "sch", Slot: slot0, Jobs: slotJobs("sch", slot0, 1), Next: slot0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.PauseSchedule(ctx, "sch", true, nil); err != nil {
		t.Fatal(err)
	}
	past := slot0.Add(-24 * time.Hour)
	res, err := ss.FireSlot(ctx, jobstore.SlotFire{ScheduleID: "sch", Slot: past, Jobs: slotJobs("sch", past, 2), Backfill: true})
	if err != nil || res.Outcome != jobstore.SlotBackfilled || len(res.Jobs) != 2 {
		t.Fatalf("backfill: %+v, %v", res, err)
	}
	if _, err := ss.FireSlot(ctx, jobstore.SlotFire{ScheduleID: "sch", Slot: past, Jobs: slotJobs("sch", past, 2), Backfill: true}); !errors.Is(err, jobstore.ErrSlotTaken) {
		t.Fatalf("backfill twice: %v", err)
	}
	if _, err := ss.FireSlot(ctx, jobstore.SlotFire{ScheduleID: "sch", Slot: slot0, Jobs: slotJobs("sch", slot0.Add(time.Second), 1), Backfill: true}); !errors.Is(err, jobstore.ErrSlotTaken) {
		t.Fatalf("backfill a fired slot: %v", err)
	}
	sc, err := ss.GetSchedule(ctx, "sch")
	if err != nil || !sc.NextAt.Equal(slot0.Add(time.Hour)) {
		t.Fatalf("schedule after backfill: %+v, %v", sc, err)
	}
	if got, want := outcomes(slotsOf(t, ss, "sch")), []string{"05:30 backfilled", "05:30 fired"}; !slices.Equal(got, want) {
		t.Fatalf("slots %v, want %v", got, want)
	}
}

// Due is judged by the database clock: a schedule whose next slot passed
// is due, one whose next slot is ahead is not, an ended one never is.
func testScheduleDueOnTheDatabaseClock(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	ss := scheduleStore(t, s)
	var clock time.Time
	if _, err := ss.CreateSchedule(ctx, jobstore.Schedule{ID: "past", Project: "p", Spec: []byte(`{}`)}, 0, func(now time.Time) time.Time {
		clock = now
		return now.Add(-time.Second)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.CreateSchedule(ctx, jobstore.Schedule{ID: "ahead", Project: "p", Spec: []byte(`{}`)}, 0, func(now time.Time) time.Time { return now.Add(time.Hour) }); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.CreateSchedule(ctx, jobstore.Schedule{ID: "ended", Project: "p", Spec: []byte(`{}`)}, 0, func(time.Time) time.Time { return time.Time{} }); err != nil {
		t.Fatal(err)
	}
	now, due, err := ss.DueSchedules(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if now.Before(clock) || len(due) != 1 || due[0].ID != "past" {
		t.Fatalf("due at %s (created at %s): %+v", now, clock, due)
	}
}

// A project holds at most the limit given to CreateSchedule; other
// projects are not counted against it.
func testScheduleLimitPerProject(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	ss := scheduleStore(t, s)
	create := func(id, project string) error {
		_, err := ss.CreateSchedule(ctx, jobstore.Schedule{ID: id, Project: project, Spec: []byte(`{}`)}, 2, func(time.Time) time.Time { return slot0 })
		return err
	}
	for _, id := range []string{"a1", "a2"} {
		if err := create(id, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if err := create("a3", "a"); !errors.Is(err, jobstore.ErrScheduleLimit) {
		t.Fatalf("a third schedule of a project limited to two: %v", err)
	}
	if err := create("b1", "b"); err != nil {
		t.Fatalf("another project: %v", err)
	}
	if _, err := ss.GetSchedule(ctx, "a3"); !errors.Is(err, jobstore.ErrScheduleNotFound) {
		t.Fatalf("the refused schedule was stored: %v", err)
	}
}

// A slot lists its jobs as they are now: phone, state, jitter share and
// first grant.
func testScheduleSlotJobs(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	ss := scheduleStore(t, s)
	createSchedule(t, ss, "sch", "p", slot0)
	specs := slotJobs("sch", slot0, 2)
	specs[0].Task.Device = protocol.DeviceSelector{Serial: "phone-1"}
	specs[0].NotBefore = slot0.Add(30 * time.Second)
	if _, err := ss.FireSlot(ctx, jobstore.SlotFire{ScheduleID: "sch", Slot: slot0, Jobs: specs, Next: slot0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	l := claim(t, s, specs[0].ID, ownerA, long)
	sl := slotsOf(t, ss, "sch")
	if len(sl) != 1 || len(sl[0].Jobs) != 2 {
		t.Fatalf("slots %+v", sl)
	}
	got, other := sl[0].Jobs[0], sl[0].Jobs[1]
	if got.ID != specs[0].ID || got.Phone != "phone-1" || got.Status != jobstore.StatusInProgress || !got.NotBefore.Equal(slot0.Add(30*time.Second)) ||
		got.GrantedAt.IsZero() || got.GrantedAt.After(l.ExpiresAt) {
		t.Fatalf("granted job of the slot %+v (lease until %s)", got, l.ExpiresAt)
	}
	if other.ID != specs[1].ID || other.Status != jobstore.StatusQueued || !other.GrantedAt.IsZero() || !other.NotBefore.IsZero() {
		t.Fatalf("queued job of the slot %+v", other)
	}
}
