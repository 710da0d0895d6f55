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
)

// TestSchedulesPage: the schedules of the token's projects with their next
// fire time, latest slots and missed ones; pause and resume behind a
// confirmation for scope operate only, recorded; another project's
// schedule is a recorded 404.
func TestSchedulesPage(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		e := newEnv(t, kind, nil)
		ctx := t.Context()
		create := func(project, file string) jobstore.Schedule {
			t.Helper()
			var req api.ScheduleRequest
			if err := api.ParseScheduleFile([]byte(file+"job:\n  project: "+project+"\n  steps:\n    - {op: screenshot, name: s.png}\n"), &req); err != nil {
				t.Fatal(err)
			}
			sc, err := api.CreateSchedule(ctx, e.store, req, api.SubmitOptions{SubmittedBy: "test"}, schedule.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			return sc
		}
		mine := create("p1", "cron: \"0 9 * * *\"\ntime_zone: Asia/Tokyo\n")
		theirs := create("p2", "every: 1h\n")
		ss := e.store.(jobstore.ScheduleStore)
		missed := time.Now().UTC().Truncate(time.Hour).Add(-48 * time.Hour)
		if _, err := ss.FireSlot(ctx, jobstore.SlotFire{ScheduleID: mine.ID, Missed: []time.Time{missed}, Next: mine.NextAt}); err != nil {
			t.Fatal(err)
		}

		reader := e.login(e.token("reader", []string{"p1"}, "read"))
		page := e.get(reader, "/ui/schedules")
		if page.status != http.StatusOK || len(page.all(`table#schedules tbody tr`)) != 1 {
			t.Fatalf("schedules page: %s", page)
		}
		row := `tr[data-schedule=` + mine.ID + `]`
		if got := text(page.one(t, row+` td.when`)); got != "0 9 * * * Asia/Tokyo" {
			t.Errorf("when %q", got)
		}
		if got := text(page.one(t, row+` td.next`)); !strings.Contains(got, "T09:00:00+09:00") || !strings.Contains(got, "00:00:00Z") {
			t.Errorf("next fire time %q", got)
		}
		if got := text(page.one(t, row+` td.missed`)); !strings.HasPrefix(got, "1 slots") || !strings.Contains(text(page.one(t, row+` td.slots`)), "missed") {
			t.Errorf("missed %q, slots %q", got, text(page.one(t, row+` td.slots`)))
		}
		if len(page.all(`a.pause`)) != 0 {
			t.Errorf("a read token is offered pause")
		}
		if r := e.get(reader, "/ui/schedules/"+mine.ID+"/pause"); r.status != http.StatusForbidden {
			t.Errorf("pause page for a read token: %d", r.status)
		}

		ops := e.login(e.token("ops", []string{"p1"}, "read", "operate"))
		page = e.get(ops, "/ui/schedules")
		csrf := page.csrf(t)
		confirm := e.get(ops, attr(page.one(t, row+` a.pause`), "href"))
		r := e.do(ops, http.MethodPost, attr(confirm.one(t, `form#confirm`), "action"), url.Values{"csrf": {csrf}}, nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/schedules" {
			t.Fatalf("pause: %s", r)
		}
		if sc, _ := ss.GetSchedule(ctx, mine.ID); !sc.Paused {
			t.Fatal("the schedule is not paused")
		}
		page = e.get(ops, "/ui/schedules")
		if got := text(page.one(t, row+` td.state`)); got != "paused" {
			t.Errorf("state after the pause %q", got)
		}
		confirm = e.get(ops, attr(page.one(t, row+` a.resume`), "href"))
		if r := e.do(ops, http.MethodPost, attr(confirm.one(t, `form#confirm`), "action"), url.Values{"csrf": {csrf}}, nil); r.status != http.StatusSeeOther {
			t.Fatalf("resume: %s", r)
		}
		if sc, _ := ss.GetSchedule(ctx, mine.ID); sc.Paused {
			t.Fatal("the schedule is still paused")
		}
		acts, err := e.store.UIActions(ctx, jobstore.UIActionFilter{})
		if err != nil || len(acts) != 2 || acts[0].Action != jobstore.UIActionPauseSchedule || acts[1].Action != jobstore.UIActionResumeSchedule || acts[0].TokenName != "ops" {
			t.Fatalf("recorded actions %+v, %v", acts, err)
		}

		// Another project's schedule: not listed, not pausable, recorded.
		if r := e.do(ops, http.MethodPost, "/ui/schedules/"+theirs.ID+"/pause", url.Values{"csrf": {csrf}}, nil); r.status != http.StatusNotFound {
			t.Errorf("pause of another project's schedule: %d", r.status)
		}
		if sc, _ := ss.GetSchedule(ctx, theirs.ID); sc.Paused {
			t.Error("another project's schedule was paused")
		}
		if d, err := e.store.APIDenials(ctx); err != nil || len(d) != 1 || d[0].Project != "p2" {
			t.Errorf("denials %+v, %v", d, err)
		}
	})
}
