package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule"
)

const scheduleBody = `{"cron": "0 9 * * *", "time_zone": "Asia/Tokyo", "catch_up": "1h", "overlap": "allow",
	"job": {"project": "lab", "steps": [{"op": "screenshot", "name": "s.png"}]}}`

// Create, list, show, pause, resume, backfill and delete a schedule
// through the API, with the scopes and projects of jobs.
func TestSchedulesRoutes(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token("alice", []string{"lab"}, jobstore.ScopeRead, jobstore.ScopeSubmit, jobstore.ScopeOperate)
	reader := e.token("reader", []string{"lab"}, jobstore.ScopeRead)
	other := e.token("bob", []string{"other"}, jobstore.ScopeRead, jobstore.ScopeSubmit, jobstore.ScopeOperate)

	if r := e.do("POST", "/api/v1/schedules", reader, scheduleBody); r.status != http.StatusForbidden {
		t.Fatalf("create with scope read: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/api/v1/schedules", other, scheduleBody); r.status != http.StatusForbidden {
		t.Fatalf("create in another project: %d %s", r.status, r.body)
	}
	r := e.do("POST", "/api/v1/schedules", tok, scheduleBody)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var sc api.ScheduleView
	r.decode(t, &sc)
	if sc.Project != "lab" || sc.CreatedBy != "alice" || len(sc.Next) != 5 || r.header.Get("Location") != "/api/v1/schedules/"+sc.ID {
		t.Fatalf("created %+v (Location %q)", sc, r.header.Get("Location"))
	}
	for _, n := range sc.Next {
		if !strings.HasSuffix(n.Local, "T09:00:00+09:00") || n.At.Hour() != 0 {
			t.Fatalf("next fire time %+v, want 09:00 in Tokyo, 00:00 UTC", n)
		}
	}

	var list api.ScheduleList
	e.do("GET", "/api/v1/schedules", reader, "").decode(t, &list)
	if len(list.Schedules) != 1 || list.Schedules[0].ID != sc.ID {
		t.Fatalf("list: %+v", list)
	}
	e.do("GET", "/api/v1/schedules", other, "").decode(t, &list)
	if len(list.Schedules) != 0 {
		t.Fatalf("another project's list: %+v", list)
	}
	if r := e.do("GET", "/api/v1/schedules/"+sc.ID, other, ""); r.status != http.StatusForbidden || strings.Contains(string(r.body), "lab") {
		t.Fatalf("another project's schedule: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/schedules/sch-000000000000", tok, ""); r.status != http.StatusNotFound {
		t.Fatalf("unknown schedule: %d", r.status)
	}
	if r := e.do("GET", "/api/v1/schedules/..%2fjobs", tok, ""); r.status != http.StatusBadRequest && r.status != http.StatusNotFound {
		t.Fatalf("malformed id: %d", r.status)
	}

	// Pause needs operate; a paused schedule has no next fire time.
	if r := e.do("POST", "/api/v1/schedules/"+sc.ID+"/pause", reader, ""); r.status != http.StatusForbidden {
		t.Fatalf("pause with scope read: %d", r.status)
	}
	e.do("POST", "/api/v1/schedules/"+sc.ID+"/pause", tok, "").decode(t, &sc)
	if !sc.Paused || len(sc.Next) != 0 {
		t.Fatalf("paused: %+v", sc)
	}
	e.do("POST", "/api/v1/schedules/"+sc.ID+"/resume", tok, "").decode(t, &sc)
	if sc.Paused || len(sc.Next) != 5 {
		t.Fatalf("resumed: %+v", sc)
	}

	// Backfill two past days: two slots with one job each, named after
	// the slot; again, both kept.
	from := time.Now().UTC().AddDate(0, 0, -3).Truncate(24 * time.Hour)
	body := `{"from": "` + from.Format(time.RFC3339) + `", "to": "` + from.Add(47*time.Hour).Format(time.RFC3339) + `"}`
	var bf api.BackfillReply
	r = e.do("POST", "/api/v1/schedules/"+sc.ID+"/backfill", tok, body)
	if r.status != http.StatusOK {
		t.Fatalf("backfill: %d %s", r.status, r.body)
	}
	r.decode(t, &bf)
	if len(bf.Slots) != 2 || bf.Slots[0].Outcome != jobstore.SlotBackfilled || len(bf.Slots[0].Jobs) != 1 || bf.Slots[0].Jobs[0] != api.SlotJobID(sc.ID, bf.Slots[0].ScheduledAt) {
		t.Fatalf("backfill: %+v", bf)
	}
	first, firstSlot := bf.Slots[0].Jobs[0], bf.Slots[0].ScheduledAt
	e.do("POST", "/api/v1/schedules/"+sc.ID+"/backfill", tok, body).decode(t, &bf)
	if len(bf.Slots) != 2 || !bf.Slots[0].Taken || !bf.Slots[1].Taken {
		t.Fatalf("backfill again: %+v", bf)
	}
	if r := e.do("POST", "/api/v1/schedules/"+sc.ID+"/backfill", tok, `{"from": "2030-01-01T00:00:00Z", "to": "2030-01-02T00:00:00Z"}`); r.status != http.StatusUnprocessableEntity || r.problem(t).Field != "to" {
		t.Fatalf("backfill of the future: %d %s", r.status, r.body)
	}
	long := `{"from": "` + from.AddDate(0, 0, -api.MaxBackfill).Format(time.RFC3339) + `", "to": "` + from.Format(time.RFC3339) + `"}`
	if r := e.do("POST", "/api/v1/schedules/"+sc.ID+"/backfill", tok, long); r.status != http.StatusUnprocessableEntity || r.problem(t).Field != "to" {
		t.Fatalf("backfill of more than %d slots: %d %s", api.MaxBackfill, r.status, r.body)
	}

	// The backfilled job names its schedule and slot in the job view.
	var jv api.JobView
	e.do("GET", "/api/v1/jobs/"+first, tok, "").decode(t, &jv)
	if jv.ScheduleID != sc.ID || jv.ScheduledAt == nil || !jv.ScheduledAt.Equal(firstSlot) {
		t.Fatalf("job view %+v", jv)
	}
	var shown api.ScheduleView
	e.do("GET", "/api/v1/schedules/"+sc.ID, reader, "").decode(t, &shown)
	if len(shown.Slots) != 2 || shown.Slots[0].Outcome != jobstore.SlotBackfilled || !shown.Slots[0].ScheduledAt.After(shown.Slots[1].ScheduledAt) {
		t.Fatalf("show: %+v", shown.Slots)
	}
	// Days after their slots, the backfilled jobs have not run: missed,
	// phone by phone; one granted now ran late by days, after the next
	// slot: missed too, with when it started.
	if p := shown.Slots[1].Phones; len(p) != 1 || p[0].Job != first || p[0].Status != jobstore.StatusQueued || !p[0].Missed || p[0].StartedAt != nil {
		t.Fatalf("phones of a slot whose job never ran: %+v", p)
	}
	if _, err := e.store.Claim(t.Context(), first, "pc-1/boot-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	e.do("GET", "/api/v1/schedules/"+sc.ID, reader, "").decode(t, &shown)
	if p := shown.Slots[1].Phones; len(p) != 1 || p[0].StartedAt == nil || p[0].LateSeconds == nil || *p[0].LateSeconds < 24*3600 || !p[0].Missed {
		t.Fatalf("phones of a slot whose job started days late: %+v", p)
	}

	if r := e.do("DELETE", "/api/v1/schedules/"+sc.ID, tok, ""); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/schedules/"+sc.ID, tok, ""); r.status != http.StatusNotFound {
		t.Fatalf("deleted schedule: %d", r.status)
	}
}

// A schedule the coordinator refuses is a 422 naming the field, and
// nothing is stored.
func TestScheduleRefusedNamesTheField(t *testing.T) {
	e := newEnv(t, func(o *api.Options) { o.Schedules = schedule.Limits{MinEvery: time.Minute} })
	tok := e.token("alice", []string{"lab"}, jobstore.ScopeRead, jobstore.ScopeSubmit)
	steps := `"job": {"steps": [{"op": "screenshot", "name": "s.png"}]}`
	for _, c := range []struct{ body, field string }{
		{`{"cron": "0 25 * * *", ` + steps + `}`, "cron"},
		{`{"cron": "0 9 * * *", "time_zone": "Asia/Atlantis", ` + steps + `}`, "time_zone"},
		{`{"every": "10s", ` + steps + `}`, "every"},
		{`{"every": "1h", "overlap": "queue", ` + steps + `}`, "overlap"},
		{`{"every": "1h", "job": {"steps": [{"op": "fly"}]}}`, "job.steps[0].op"},
		{`{"every": "1h", "job": {"id": "fixed", "steps": [{"op": "screenshot", "name": "s.png"}]}}`, "job.id"},
	} {
		r := e.do("POST", "/api/v1/schedules", tok, c.body)
		if r.status != http.StatusUnprocessableEntity || r.problem(t).Field != c.field {
			t.Errorf("%s: %d %s, want 422 naming %s", c.body, r.status, r.body, c.field)
		}
	}
	// A schedule file as it is, in YAML, with an unknown key.
	if r := e.do("POST", "/api/v1/schedules", tok, "every: 1h\nevry: 2h\n", "Content-Type", "application/yaml"); r.status != http.StatusBadRequest {
		t.Errorf("unknown key: %d %s", r.status, r.body)
	}
	var list api.ScheduleList
	e.do("GET", "/api/v1/schedules", tok, "").decode(t, &list)
	if len(list.Schedules) != 0 {
		t.Fatalf("a refused schedule was stored: %+v", list)
	}
	if r := e.do("POST", "/api/v1/schedules", tok, "every: 1h\njob:\n  steps:\n    - {op: screenshot, name: s.png}\n", "Content-Type", "application/yaml"); r.status != http.StatusCreated {
		t.Errorf("yaml schedule file: %d %s", r.status, r.body)
	}
}
