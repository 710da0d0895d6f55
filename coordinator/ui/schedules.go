package ui

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule"
)

// MaxSchedulesShown bounds the schedules page.
const MaxSchedulesShown = 200

// slotsShown is how many of each schedule's latest slots the page shows.
const slotsShown = 5

// scheduleRow is one schedule on the schedules page.
type scheduleRow struct {
	ID, Project, When, Overlap, State string
	Paused                            bool
	Next                              *api.FireTime
	Slots                             []api.SlotView // newest first
	Missed                            int64          // missed slots among the recorded ones shown
	MissedPhones                      int            // jobs of the shown slots that missed their slot
}

type schedulesData struct {
	Schedules []scheduleRow
	More      bool // more schedules than shown
}

// schedules is GET /ui/schedules: the schedules of the caller's projects
// with their next fire time, their latest slots, the missed ones, and
// pause and resume for tokens with scope operate (docs/schedules.md).
func (h *Handler) schedules(w http.ResponseWriter, r *http.Request, c *caller) {
	ss, ok := h.store.(jobstore.ScheduleStore)
	if !ok {
		h.message(w, r, c, http.StatusNotImplemented, "No schedules", "This coordinator's store keeps no schedules.")
		return
	}
	list, err := ss.Schedules(r.Context(), jobstore.ScheduleFilter{Projects: c.Projects})
	if err != nil {
		h.internal(w, r, c, err)
		return
	}
	d := schedulesData{}
	if len(list) > MaxSchedulesShown {
		list, d.More = list[:MaxSchedulesShown], true
	}
	for _, sc := range list {
		slots, err := ss.ScheduleSlots(r.Context(), sc.ID, slotsShown)
		if err != nil {
			h.internal(w, r, c, err)
			return
		}
		v, err := api.NewScheduleView(sc, slots)
		if err != nil {
			h.internal(w, r, c, err)
			return
		}
		row := scheduleRow{ID: v.ID, Project: v.Project, When: v.When(), Overlap: cmp.Or(v.Schedule.Overlap, schedule.OverlapSkip),
			Paused: v.Paused, State: v.State(), Slots: v.Slots}
		if len(v.Next) > 0 {
			row.Next = &v.Next[0]
		}
		for _, s := range v.Slots {
			if s.Outcome == jobstore.SlotMissed {
				row.Missed += s.Count
			}
			for _, p := range s.Phones {
				if p.Missed {
					row.MissedPhones++
				}
			}
		}
		d.Schedules = append(d.Schedules, row)
	}
	h.render(w, r, http.StatusOK, "schedules", view{Title: "Schedules", Caller: c, Data: d})
}

var scheduleIDPattern = regexp.MustCompile(`^sch-[0-9a-f]{12}$`)

// visibleSchedule reads the schedule of the path, or writes the page
// saying why not: 404 for an unknown one and, recorded, for another
// project's, as for jobs.
func (h *Handler) visibleSchedule(w http.ResponseWriter, r *http.Request, c *caller) (jobstore.Schedule, bool) {
	id := r.PathValue("id")
	ss, ok := h.store.(jobstore.ScheduleStore)
	if !ok || !scheduleIDPattern.MatchString(id) {
		h.message(w, r, c, http.StatusNotFound, "Not found", "No such schedule.")
		return jobstore.Schedule{}, false
	}
	sc, err := ss.GetSchedule(r.Context(), id)
	if err == nil && !c.Sees(sc.Project) {
		h.deny(r, c, "", sc.Project)
		err = jobstore.ErrScheduleNotFound
	}
	if errors.Is(err, jobstore.ErrScheduleNotFound) {
		h.message(w, r, c, http.StatusNotFound, "Not found", fmt.Sprintf("No schedule %s among the projects of token %s.", id, c.Name))
		return jobstore.Schedule{}, false
	}
	if err != nil {
		h.internal(w, r, c, err)
		return jobstore.Schedule{}, false
	}
	return sc, true
}

// confirmPauseSchedule is GET /ui/schedules/{id}/pause and .../resume.
func (h *Handler) confirmPauseSchedule(pause bool) func(w http.ResponseWriter, r *http.Request, c *caller) {
	return func(w http.ResponseWriter, r *http.Request, c *caller) {
		sc, ok := h.visibleSchedule(w, r, c)
		if !ok {
			return
		}
		d := confirmData{Action: "/ui/schedules/" + url.PathEscape(sc.ID) + "/resume", Button: "Resume", Back: "/ui/schedules",
			Question: fmt.Sprintf("Resume schedule %s?", sc.ID), Detail: "It fires again from its first slot after now; the slots of the pause are not caught up."}
		if pause {
			d.Action, d.Button = "/ui/schedules/"+url.PathEscape(sc.ID)+"/pause", "Pause"
			d.Question = fmt.Sprintf("Pause schedule %s?", sc.ID)
			d.Detail = "No slot fires, and none is recorded missed, until it is resumed. Jobs it queued already go on."
		}
		h.confirm(w, r, c, d.Button+" "+sc.ID, d)
	}
}

// pauseSchedule is POST /ui/schedules/{id}/pause and .../resume: what
// POST /api/v1/schedules/{id}/pause and /resume do.
func (h *Handler) pauseSchedule(pause bool) func(w http.ResponseWriter, r *http.Request, c *caller) {
	return func(w http.ResponseWriter, r *http.Request, c *caller) {
		sc, ok := h.visibleSchedule(w, r, c)
		if !ok {
			return
		}
		if _, err := api.PauseSchedule(r.Context(), h.store, sc, pause); err != nil {
			h.internal(w, r, c, err)
			return
		}
		act := jobstore.UIActionResumeSchedule
		if pause {
			act = jobstore.UIActionPauseSchedule
		}
		h.record(r, c, jobstore.UIAction{Action: act, Target: sc.ID})
		http.Redirect(w, r, "/ui/schedules", http.StatusSeeOther)
	}
}

// fireUTC formats a fire time in UTC for the page.
func fireUTC(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }
