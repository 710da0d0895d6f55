package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule"
	"github.com/edgeagent/edgeagent/protocol"
)

// schedule stores a schedule of project with the given timing, as POST
// /api/v1/schedules does, its job one screenshot.
func (e *env) schedule(project string, f schedule.Fields) jobstore.Schedule {
	e.t.Helper()
	req := api.ScheduleRequest{Fields: f, Job: api.JobRequest{Project: project, Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}}}
	sc, err := api.CreateSchedule(e.t.Context(), e.store, req, api.SubmitOptions{SubmittedBy: "alice", Projects: []string{project}}, schedule.Limits{})
	if err != nil {
		e.t.Fatalf("create schedule: %v", err)
	}
	return sc
}

// fire records, as the coordinator's schedule loop does, the slot at as
// fired with its job and the slots missed as missed; the schedule's next
// slot stays.
func (e *env) fire(sc jobstore.Schedule, at time.Time, missed ...time.Time) string {
	e.t.Helper()
	specs, _, err := api.SlotJobs(e.t.Context(), e.store, sc, at, api.SubmitOptions{})
	if err != nil || len(specs) != 1 {
		e.t.Fatalf("the jobs of slot %s: %d, %v", at, len(specs), err)
	}
	res, err := e.store.(jobstore.ScheduleStore).FireSlot(e.t.Context(), jobstore.SlotFire{ScheduleID: sc.ID, Slot: at, Jobs: specs,
		Overlap: schedule.OverlapAllow, Missed: missed, Next: sc.NextAt})
	if err != nil || len(res.Jobs) != 1 {
		e.t.Fatalf("fire slot %s: %+v, %v", at, res, err)
	}
	return res.Jobs[0].ID
}

func (e *env) storedSchedule(id string) jobstore.Schedule {
	e.t.Helper()
	sc, err := e.store.(jobstore.ScheduleStore).GetSchedule(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return sc
}

// TestSchedules: the list shows the visitor's schedules only, each with
// its next fire time in its time zone and in UTC, its latest slots with
// their outcome and its missed slots; the schedule's page shows its next
// five fire times and its slots with their jobs, and a job fired by it
// links back. A read-only token sees no pause or resume and its POST is
// refused; an operate token pauses from the list and resumes from the
// schedule's page through the confirmation form, which the store shows
// and ui_actions records; another project's schedule is a 404 to it.
func TestSchedules(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		e := newEnv(t, kind, nil)
		ctx := t.Context()
		tokyo := e.schedule("p1", schedule.Fields{Cron: "0 9 * * *", TimeZone: "Asia/Tokyo"})
		other := e.schedule("p2", schedule.Fields{Every: "2h"})
		day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) // 09:00 in Tokyo
		job := e.fire(tokyo, day.Add(48*time.Hour), day, day.Add(24*time.Hour))

		reader := e.login(e.token("rita", []string{"p1"}, "read"))
		list := e.get(reader, "/ui/schedules")
		if list.status != http.StatusOK {
			t.Fatalf("list: %s", list)
		}
		if n := len(list.all(`table#schedules tbody tr`)); n != 1 {
			t.Fatalf("the list shows %d schedules, want p1's one\n%s", n, list.body)
		}
		row := `tr[data-schedule=` + tokyo.ID + `]`
		if got := text(list.one(t, row+` td.when`)); got != "0 9 * * * Asia/Tokyo" {
			t.Errorf("when %q", got)
		}
		if got := text(list.one(t, row+` td.state`)); got != "active" {
			t.Errorf("state %q", got)
		}
		next := tokyo.NextAt
		if local, utc := text(list.one(t, row+` td.next span.local`)), text(list.one(t, row+` td.next span.utc`)); !strings.HasPrefix(local, next.In(time.FixedZone("JST", 9*3600)).Format("2006-01-02 15:04:05")+" JST (+09:00)") ||
			utc != next.UTC().Format("2006-01-02 15:04:05Z") || !strings.Contains(local, " 09:00:00 ") {
			t.Errorf("next fire %q / %q, want %s in Tokyo and UTC", local, utc, next)
		}
		var outcomes []string
		for _, li := range list.all(row + ` td.slots li.slot`) {
			outcomes = append(outcomes, attr(li, "data-outcome")+" "+text(li.FirstChild))
		}
		if want := "fired 2026-12-03 09:00:00 missed 2026-12-02 09:00:00 missed 2026-12-01 09:00:00"; strings.Join(outcomes, " ") != want {
			t.Errorf("latest slots %q, want %s", outcomes, want)
		}
		// The fired slot's job never started before the next slot came.
		if got := text(list.one(t, row+` td.slots li[data-outcome=fired] span.phones-missed`)); got != "(1 job missed)" {
			t.Errorf("the fired slot's missed jobs %q", got)
		}
		if got := text(list.one(t, row+` td.missed`)); !strings.HasPrefix(got, "2") || !strings.Contains(got, "2026-12-02 09:00:00") {
			t.Errorf("missed %q, want 2, the latest 2026-12-02", got)
		}
		if n := len(list.all(`a.action-pause-schedule`)) + len(list.all(`a.action-resume-schedule`)); n != 0 {
			t.Errorf("the read-only token is offered %d actions", n)
		}

		page := e.get(reader, "/ui/schedules/"+tokyo.ID)
		if n := len(page.all(`table#next tbody tr`)); n != 5 {
			t.Errorf("the schedule's page shows %d next fire times, want 5", n)
		}
		if local, utc := text(page.all(`table#next td.local`)[0]), text(page.all(`table#next td.utc`)[0]); local != next.In(time.FixedZone("JST", 9*3600)).Format("2006-01-02 15:04:05")+" JST (+09:00)" ||
			utc != next.UTC().Format("2006-01-02 15:04:05Z") {
			t.Errorf("the schedule's page: next fire %q / %q, want %s in Tokyo and UTC", local, utc, next)
		}
		if got := text(page.one(t, `table#slots tr[data-outcome=fired] td.at`)); got != "2026-12-03 09:00:00 JST (+09:00)" {
			t.Errorf("the fired slot in Tokyo %q", got)
		}
		slot := page.one(t, `table#slots tr[data-outcome=fired]`)
		if attr(slot, "data-slot") != "2026-12-03 00:00:00Z" {
			t.Errorf("fired slot %v", slot.Attr)
		}
		if a := page.one(t, `table#slots tr[data-outcome=fired] td.jobs a.job`); attr(a, "href") != "/ui/jobs/"+job {
			t.Errorf("the slot's job links %q, want /ui/jobs/%s", attr(a, "href"), job)
		}
		if got := text(page.one(t, `table#slots tr[data-outcome=fired] td.jobs span.status`)); got != jobstore.StatusQueued {
			t.Errorf("the slot's job is shown %q", got)
		}
		page.one(t, `table#slots tr[data-outcome=fired] div.slot-job.missed b.phone-missed`)
		if n := len(page.all(`table#live-jobs tr[data-job=` + job + `]`)); n != 1 {
			t.Errorf("the queued job is not among the live jobs")
		}
		if len(page.all(`a.action-pause-schedule`)) != 0 {
			t.Error("the read-only token is offered a pause on the schedule's page")
		}
		jp := e.get(reader, "/ui/jobs/"+job)
		if a := jp.one(t, `td#job-schedule a.schedule`); attr(a, "href") != "/ui/schedules/"+tokyo.ID {
			t.Errorf("the job links its schedule at %q", attr(a, "href"))
		}
		if got := text(jp.one(t, `td#job-scheduled-at`)); got != "2026-12-03 00:00:00Z" {
			t.Errorf("the job's slot %q", got)
		}

		// The read-only token: no confirmation page, its POST refused.
		if r := e.get(reader, "/ui/schedules/"+tokyo.ID+"/pause"); r.status != http.StatusForbidden {
			t.Errorf("read token's pause confirmation: %d", r.status)
		}
		if r := e.do(reader, http.MethodPost, "/ui/schedules/"+tokyo.ID+"/pause", url.Values{"csrf": {list.csrf(t)}}, nil); r.status != http.StatusForbidden {
			t.Errorf("read token's pause: %s", r)
		}
		if e.storedSchedule(tokyo.ID).Paused {
			t.Fatal("a refused pause paused the schedule")
		}
		// Another project's schedule is not there for it.
		for _, p := range []string{"/ui/schedules/" + other.ID, "/ui/schedules/sch-000000000000"} {
			if r := e.get(reader, p); r.status != http.StatusNotFound {
				t.Errorf("%s: %d", p, r.status)
			}
		}
		if r := e.get(reader, "/ui/schedules/nope"); r.status != http.StatusBadRequest {
			t.Errorf("a malformed id: %d", r.status)
		}

		// Operate: pause from the list, back to the list.
		ops := e.login(e.token("ops", []string{"p1"}, "read", "operate"))
		list = e.get(ops, "/ui/schedules")
		confirm := e.get(ops, attr(list.one(t, `a.action-pause-schedule[data-schedule=`+tokyo.ID+`]`), "href"))
		form := confirm.one(t, `form#confirm`)
		f := url.Values{}
		for _, in := range confirm.all(`form#confirm input[type=hidden]`) {
			f.Set(attr(in, "name"), attr(in, "value"))
		}
		if r := e.do(ops, http.MethodPost, attr(form, "action"), url.Values{"csrf": {"x" + f.Get("csrf")}}, nil); r.status != http.StatusForbidden {
			t.Errorf("pause with a wrong csrf value: %d", r.status)
		}
		if e.storedSchedule(tokyo.ID).Paused {
			t.Fatal("a forged pause paused the schedule")
		}
		r := e.do(ops, http.MethodPost, attr(form, "action"), f, nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/schedules" {
			t.Fatalf("pause: %s", r)
		}
		if sc := e.storedSchedule(tokyo.ID); !sc.Paused {
			t.Fatal("the schedule is not paused after the pause")
		}
		list = e.get(ops, "/ui/schedules")
		if got := text(list.one(t, row+` td.state`)); got != "paused" {
			t.Errorf("state %q after the pause", got)
		}
		list.one(t, `a.action-resume-schedule[data-schedule=`+tokyo.ID+`]`)
		if r := e.do(ops, http.MethodPost, attr(form, "action"), f, nil); r.status != http.StatusConflict {
			t.Errorf("a second pause: %d", r.status)
		}
		page = e.get(ops, "/ui/schedules/"+tokyo.ID)
		page.one(t, `p#no-next`)

		// Resume from the schedule's page, back to it.
		confirm = e.get(ops, attr(page.one(t, `a.action-resume-schedule`), "href"))
		r = e.do(ops, http.MethodPost, attr(confirm.one(t, `form#confirm`), "action"), url.Values{"csrf": {f.Get("csrf")}}, nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/schedules/"+tokyo.ID {
			t.Fatalf("resume: %s", r)
		}
		if sc := e.storedSchedule(tokyo.ID); sc.Paused || !sc.NextAt.After(time.Now().Add(-time.Minute)) {
			t.Errorf("after the resume: paused %v, next %s", sc.Paused, sc.NextAt)
		}
		if r := e.do(ops, http.MethodPost, "/ui/schedules/"+other.ID+"/pause", url.Values{"csrf": {f.Get("csrf")}}, nil); r.status != http.StatusNotFound {
			t.Errorf("pause of another project's schedule: %d", r.status)
		}
		if e.storedSchedule(other.ID).Paused {
			t.Error("another project's schedule was paused")
		}
		if d, err := e.store.APIDenials(ctx); err != nil || len(d) != 2 || d[0].Project != "p2" || d[1].Project != "p2" {
			t.Errorf("denials %+v, %v: want the reader's look and the operator's pause at p2's schedule", d, err)
		}
		acts, err := e.store.UIActions(ctx, jobstore.UIActionFilter{Target: tokyo.ID})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, a := range acts {
			got = append(got, a.TokenName+":"+a.Action)
		}
		if want := "ops:pause_schedule ops:resume_schedule"; strings.Join(got, " ") != want {
			t.Errorf("recorded actions %v, want %s", got, want)
		}
		if !strings.Contains(text(e.get(ops, "/ui/schedules/"+tokyo.ID).one(t, `ul#actions`)), "pause_schedule by ops") {
			t.Error("the schedule's page does not say who paused it")
		}
	})
}

// TestSchedulesPages: the list shows SchedulePageSize schedules a page,
// by id; Next leads to the rest and a bad cursor is a 400 naming it.
func TestSchedulesPages(t *testing.T) {
	e := newEnv(t, "sqlite", nil)
	seen := map[string]bool{}
	for range 52 {
		seen[e.schedule("p1", schedule.Fields{Every: "1h"}).ID] = false
	}
	c := e.login(e.token("rita", []string{"p1"}, "read"))
	path := "/ui/schedules"
	pages := 0
	for path != "" {
		r := e.get(c, path)
		pages++
		for _, tr := range r.all(`table#schedules tbody tr`) {
			id := attr(tr, "data-schedule")
			if done, ok := seen[id]; !ok || done {
				t.Fatalf("page %d lists %q (known %v, listed before %v)", pages, id, ok, done)
			}
			seen[id] = true
		}
		path = ""
		if a := r.all(`a.next`); len(a) == 1 {
			path = attr(a[0], "href")
		}
	}
	if pages != 2 {
		t.Errorf("%d pages, want 2", pages)
	}
	for id, done := range seen {
		if !done {
			t.Errorf("%s is on no page", id)
		}
	}
	if r := e.get(c, "/ui/schedules?after=x"); r.status != http.StatusBadRequest || !strings.Contains(text(r.one(t, `p.error`)), "after") {
		t.Errorf("a bad cursor: %s", r)
	}
}
