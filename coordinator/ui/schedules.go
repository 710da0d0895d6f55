package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// The schedules pages (docs/ui.md, "Schedules"): the list of the
// visitor's schedules with their next fire time, latest slots and missed
// slots, one schedule's page, and pause and resume through a confirmation
// form, with the API's scope (operate).

const (
	// SchedulePageSize is how many schedules the list shows per page.
	SchedulePageSize = 50
	// listSlots is how many of a schedule's latest slots the list reads
	// (its missed count is over them) and shows (the newest listShown).
	listSlots = 20
	listShown = 5
	// detailSlots is how many latest slots a schedule's page shows, as the
	// API's GET of one schedule.
	detailSlots = 50
)

var scheduleIDRe = regexp.MustCompile(`^sch-[0-9a-f]{12}$`)

// fireTime is one fire time as the pages show it: in the schedule's time
// zone and in UTC.
type fireTime struct {
	Local string
	UTC   string
}

// slotRow is one recorded slot (or run of missed slots).
type slotRow struct {
	At      string // the slot's time in the schedule's zone
	Short   string // the same without the zone, for the list
	UTC     string
	Outcome string
	Count   int64
	Through string // the last slot of a run of missed slots, in the zone
	Jobs    []slotJob
	// PhonesMissed counts the jobs that missed the slot.
	PhonesMissed int
	Detail       string
	Recorded     string
}

// slotJob is a job a slot queued, as the API reports it phone by phone
// (api.SlotPhone): its phone and state, how late it started, or that it
// missed its slot.
type slotJob struct {
	ID     string
	Phone  string
	Status string
	Late   string // "" when it has not started
	Missed bool
}

// scheduleRow is a schedule as the pages show it.
type scheduleRow struct {
	ID        string
	Project   string
	When      string // api.ScheduleView.When: "0 9 * * * Asia/Tokyo", "every 2h"
	Zone      string
	InUTC     bool // the zone is UTC: the pages give each time once
	Overlap   string
	CatchUp   string
	Jitter    string
	End       string
	State     string // active, paused, ended
	Next      []fireTime
	Buffered  string
	Slots     []slotRow
	Missed    int64 // missed slots among those read
	MissedAt  string
	CreatedBy string
	CreatedAt time.Time
	job       api.JobRequest
}

// zoneTime formats t in loc: "2026-12-06 09:00:00 JST (+09:00)".
func zoneTime(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(loc).Format("2006-01-02 15:04:05 MST (-07:00)")
}

// newScheduleRow is the row of sc with its slots (newest first); next
// fire times, as many as the API gives (NewScheduleView), when next.
func newScheduleRow(sc jobstore.Schedule, slots []jobstore.Slot, next int) (scheduleRow, error) {
	v, err := api.NewScheduleView(sc, slots)
	if err != nil {
		return scheduleRow{}, err
	}
	_, spec, err := api.ScheduleFromStore(sc)
	if err != nil {
		return scheduleRow{}, err
	}
	f, loc := v.Schedule.Fields, spec.Zone
	row := scheduleRow{ID: sc.ID, Project: sc.Project, Zone: loc.String(), InUTC: loc.String() == "UTC", Overlap: f.Overlap, CatchUp: f.CatchUp, Jitter: f.Jitter,
		CreatedBy: sc.CreatedBy, CreatedAt: sc.CreatedAt, State: v.State(), When: v.When(), job: v.Schedule.Job}
	if !f.End.IsZero() {
		row.End = zoneTime(f.End, loc)
	}
	for i, ft := range v.Next {
		if i == next {
			break
		}
		row.Next = append(row.Next, fireTime{Local: zoneTime(ft.At, loc), UTC: stamp(ft.At)})
	}
	if !sc.BufferedAt.IsZero() {
		row.Buffered = zoneTime(sc.BufferedAt, loc)
	}
	for _, sl := range v.Slots {
		r := slotRow{At: zoneTime(sl.ScheduledAt, loc), Short: sl.ScheduledAt.In(loc).Format(time.DateTime), UTC: stamp(sl.ScheduledAt), Outcome: sl.Outcome, Count: max(sl.Count, 1),
			Detail: sl.Detail, Recorded: stamp(sl.RecordedAt)}
		if sl.Through != nil {
			r.Through = zoneTime(*sl.Through, loc)
		}
		for _, p := range sl.Phones {
			j := slotJob{ID: p.Job, Phone: p.Phone, Status: p.Status, Missed: p.Missed}
			if p.LateSeconds != nil {
				j.Late = (time.Duration(*p.LateSeconds*10) * time.Second / 10).String()
			}
			if p.Missed {
				r.PhonesMissed++
			}
			r.Jobs = append(r.Jobs, j)
		}
		if sl.Outcome == jobstore.SlotMissed {
			if row.Missed == 0 {
				row.MissedAt = r.Short
			}
			row.Missed += r.Count
		}
		row.Slots = append(row.Slots, r)
	}
	return row, nil
}

// readScheduleRow reads the latest slots of sc, at most slots, and
// returns its row with next fire times.
func readScheduleRow(ctx context.Context, ss jobstore.ScheduleStore, sc jobstore.Schedule, slots, next int) (scheduleRow, error) {
	sl, err := ss.ScheduleSlots(ctx, sc.ID, slots)
	if err != nil {
		return scheduleRow{}, err
	}
	return newScheduleRow(sc, sl, next)
}

type schedulesData struct {
	Rows    []scheduleRow
	NoStore bool
	// Read is how many latest slots of each schedule were read.
	Read  int
	Next  string // the URL of the next page, "" on the last one
	First bool
	Error string
}

// scheduleStore is the store's schedules, or the 501 page answered.
func (h *Handler) scheduleStore(w http.ResponseWriter, r *http.Request, c *caller) (jobstore.ScheduleStore, bool) {
	ss, ok := h.opts.Store.(jobstore.ScheduleStore)
	if !ok {
		h.render(w, r, http.StatusNotImplemented, "schedules", view{Title: "Schedules", Caller: c, Data: schedulesData{NoStore: true, First: true}})
	}
	return ss, ok
}

// schedules is GET /ui/schedules: the schedules of the visitor's
// projects by id, SchedulePageSize a page (after: the last id of the
// previous page), each with its next fire time and its latest slots.
func (h *Handler) schedules(w http.ResponseWriter, r *http.Request, c *caller) {
	ss, ok := h.scheduleStore(w, r, c)
	if !ok {
		return
	}
	d := schedulesData{Read: listSlots}
	after := r.URL.Query().Get("after")
	if after != "" && !scheduleIDRe.MatchString(after) {
		d.Error = fmt.Sprintf("after: %q is not a schedule id (sch- and 12 hex digits); follow the Next link as it is", trimText(after))
		h.render(w, r, http.StatusBadRequest, "schedules", view{Title: "Schedules", Caller: c, Data: d})
		return
	}
	d.First = after == ""
	projects := c.Projects
	if projects == nil {
		projects = []string{}
	}
	list, err := ss.Schedules(r.Context(), jobstore.ScheduleFilter{Projects: projects})
	if err != nil {
		h.internal(w, r, c, err)
		return
	}
	for _, sc := range list {
		if sc.ID <= after {
			continue
		}
		if len(d.Rows) == SchedulePageSize {
			d.Next = "/ui/schedules?" + url.Values{"after": {d.Rows[len(d.Rows)-1].ID}}.Encode()
			break
		}
		row, err := readScheduleRow(r.Context(), ss, sc, listSlots, 1)
		if err != nil {
			h.internal(w, r, c, err)
			return
		}
		d.Rows = append(d.Rows, row)
	}
	h.render(w, r, http.StatusOK, "schedules", view{Title: "Schedules", Caller: c, Data: d})
}

func trimText(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// visibleSchedule reads the schedule of the path; it answers 404 (and
// records the denial) for a schedule of a project the caller does not
// see, as for an unknown one, as the job pages do.
func (h *Handler) visibleSchedule(w http.ResponseWriter, r *http.Request, c *caller) (jobstore.ScheduleStore, jobstore.Schedule, bool) {
	ss, ok := h.scheduleStore(w, r, c)
	if !ok {
		return nil, jobstore.Schedule{}, false
	}
	id := r.PathValue("id")
	if !scheduleIDRe.MatchString(id) {
		h.message(w, r, c, http.StatusBadRequest, "Bad request", fmt.Sprintf("id: %q is not a schedule id (sch- and 12 hex digits)", trimText(id)))
		return nil, jobstore.Schedule{}, false
	}
	sc, err := ss.GetSchedule(r.Context(), id)
	if err == nil && !c.Sees(sc.Project) {
		h.deny(r, c, "", sc.Project)
		err = jobstore.ErrScheduleNotFound
	}
	if errors.Is(err, jobstore.ErrScheduleNotFound) {
		h.message(w, r, c, http.StatusNotFound, "Not found", fmt.Sprintf("No schedule %s among the projects of token %s.", id, c.Name))
		return nil, jobstore.Schedule{}, false
	}
	if err != nil {
		h.internal(w, r, c, err)
		return nil, jobstore.Schedule{}, false
	}
	return ss, sc, true
}

type scheduleData struct {
	scheduleRow
	Job     string // the job file, as JSON
	Live    []jobRow
	Actions []jobstore.UIAction
}

// schedule is GET /ui/schedules/{id}: the schedule, its next five fire
// times, its latest slots with their jobs, its queued and running jobs.
func (h *Handler) schedule(w http.ResponseWriter, r *http.Request, c *caller) {
	ss, sc, ok := h.visibleSchedule(w, r, c)
	if !ok {
		return
	}
	ctx := r.Context()
	row, err := readScheduleRow(ctx, ss, sc, detailSlots, 5)
	if err != nil {
		h.internal(w, r, c, err)
		return
	}
	d := scheduleData{scheduleRow: row}
	job, _ := json.MarshalIndent(row.job, "", "  ")
	d.Job = string(job)
	live, err := ss.LiveScheduleJobs(ctx, sc.ID)
	if err != nil {
		h.internal(w, r, c, err)
		return
	}
	for _, j := range live {
		d.Live = append(d.Live, newJobRow(j))
	}
	if d.Actions, err = h.store.UIActions(ctx, jobstore.UIActionFilter{Target: sc.ID}); err != nil {
		h.internal(w, r, c, err)
		return
	}
	h.render(w, r, http.StatusOK, "schedule", view{Title: "Schedule " + sc.ID, Caller: c, Data: d})
}

// confirmPause is GET /ui/schedules/{id}/pause and .../resume.
func (h *Handler) confirmPause(pause bool) func(w http.ResponseWriter, r *http.Request, c *caller) {
	return func(w http.ResponseWriter, r *http.Request, c *caller) {
		_, sc, ok := h.visibleSchedule(w, r, c)
		if !ok {
			return
		}
		base := "/ui/schedules/" + url.PathEscape(sc.ID)
		if sc.Paused == pause {
			h.render(w, r, http.StatusConflict, "message", view{Title: "Nothing to do", Caller: c,
				Data: messageData{Text: fmt.Sprintf("Schedule %s is %s already.", sc.ID, pausedWord(pause)), Back: base}})
			return
		}
		d := confirmData{Action: base + "/resume", Button: "Resume", Back: back(r, base),
			Question: fmt.Sprintf("Resume schedule %s (project %s)?", sc.ID, sc.Project),
			Detail:   "It fires again from its first slot after now; the slots of the pause are not caught up."}
		if pause {
			d.Action, d.Button = base+"/pause", "Pause"
			d.Question = fmt.Sprintf("Pause schedule %s (project %s)?", sc.ID, sc.Project)
			d.Detail = "Nothing fires and nothing is recorded missed until it is resumed; the jobs it queued already stay."
		}
		d.Hidden = map[string]string{"back": d.Back}
		h.confirm(w, r, c, d.Button+" "+sc.ID, d)
	}
}

func pausedWord(p bool) string {
	if p {
		return "paused"
	}
	return "active"
}

// back is the page an action returns to: the list when the form says so
// (query or form field back=/ui/schedules), else the schedule's page.
func back(r *http.Request, page string) string {
	b := r.URL.Query().Get("back")
	if r.Method == http.MethodPost {
		b = r.PostForm.Get("back")
	}
	if b == "/ui/schedules" {
		return b
	}
	return page
}

// pause is POST /ui/schedules/{id}/pause and .../resume: the API's
// pause and resume (api.PauseSchedule), recorded with the token's name.
func (h *Handler) pause(pause bool) func(w http.ResponseWriter, r *http.Request, c *caller) {
	return func(w http.ResponseWriter, r *http.Request, c *caller) {
		_, sc, ok := h.visibleSchedule(w, r, c)
		if !ok {
			return
		}
		to := back(r, "/ui/schedules/"+url.PathEscape(sc.ID))
		if sc.Paused == pause {
			h.render(w, r, http.StatusConflict, "message", view{Title: "Nothing to do", Caller: c,
				Data: messageData{Text: fmt.Sprintf("Schedule %s is %s already.", sc.ID, pausedWord(pause)), Back: to}})
			return
		}
		_, err := api.PauseSchedule(r.Context(), h.opts.Store, sc, pause)
		if errors.Is(err, jobstore.ErrScheduleNotFound) {
			h.message(w, r, c, http.StatusNotFound, "Not found", fmt.Sprintf("No schedule %s among the projects of token %s.", sc.ID, c.Name))
			return
		}
		if err != nil {
			h.internal(w, r, c, err)
			return
		}
		a := jobstore.UIAction{Action: jobstore.UIActionResumeSchedule, Target: sc.ID, Detail: "project " + sc.Project}
		if pause {
			a.Action = jobstore.UIActionPauseSchedule
		}
		h.record(r, c, a)
		http.Redirect(w, r, to, http.StatusSeeOther)
	}
}
