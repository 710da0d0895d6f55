package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule"
)

// ScheduleView is a schedule as the API and `edgecoord schedule show
// --json` give it.
type ScheduleView struct {
	ID         string     `json:"id"`
	Project    string     `json:"project"`
	CreatedBy  string     `json:"created_by"`
	CreatedAt  time.Time  `json:"created_at"`
	Paused     bool       `json:"paused"`
	NextAt     *time.Time `json:"next_at,omitempty"`
	BufferedAt *time.Time `json:"buffered_at,omitempty"`
	// Next are the next fire times (up to five; none while paused or
	// ended), in UTC and in the schedule's time zone.
	Next     []FireTime      `json:"next"`
	Schedule ScheduleRequest `json:"schedule"`
	// Slots are the latest recorded slots, newest first (GET of one
	// schedule only).
	Slots []SlotView `json:"slots,omitempty"`
}

// When describes the schedule's timing: "0 9 * * * Asia/Tokyo",
// "every 2h".
func (v ScheduleView) When() string {
	f := v.Schedule.Fields
	if f.Every != "" {
		return "every " + f.Every
	}
	zone := f.TimeZone
	if zone == "" {
		zone = "UTC"
	}
	return f.Cron + " " + zone
}

// State is "paused", "ended" (no slot left) or "active".
func (v ScheduleView) State() string {
	switch {
	case v.Paused:
		return "paused"
	case v.NextAt == nil:
		return "ended"
	}
	return "active"
}

// FireTime is one fire time of a schedule.
type FireTime struct {
	At    time.Time `json:"at"`    // UTC
	Local string    `json:"local"` // in the schedule's time zone, RFC 3339
}

// SlotView is the outcome of one slot (or a run of missed slots).
type SlotView struct {
	ScheduledAt time.Time  `json:"scheduled_at"`
	Outcome     string     `json:"outcome"`
	Count       int64      `json:"count"`
	Through     *time.Time `json:"through,omitempty"`
	RecordedAt  time.Time  `json:"recorded_at"`
	Jobs        []string   `json:"jobs"`
	// Phones are the slot's jobs phone by phone: whether each ran, and how
	// late.
	Phones []SlotPhone `json:"phones"`
	Detail string      `json:"detail,omitempty"`
}

// SlotPhone is one job of a slot as a researcher reads a series: the
// phone, the job's state, and whether it ran late or not at all.
type SlotPhone struct {
	Job       string     `json:"job"`
	Phone     string     `json:"phone,omitempty"`
	Status    string     `json:"status"`
	StartedAt *time.Time `json:"started_at,omitempty"` // its first grant
	// LateSeconds is from when the job was due (its slot, plus its
	// jitter share) to its first grant.
	LateSeconds *float64 `json:"late_seconds,omitempty"`
	// Missed: the job did not start before the schedule's next slot came,
	// or ended without starting.
	Missed bool `json:"missed,omitempty"`
}

// slotPhones reports the jobs of slot sl, whose next slot is next (zero:
// none), at now.
func slotPhones(sl jobstore.Slot, next, now time.Time) []SlotPhone {
	out := []SlotPhone{}
	for _, j := range sl.Jobs {
		p := SlotPhone{Job: j.ID, Phone: j.Phone, Status: j.Status}
		if !j.GrantedAt.IsZero() {
			t := j.GrantedAt
			p.StartedAt = &t
			late := t.Sub(maxTime(sl.ScheduledAt, j.NotBefore)).Round(time.Millisecond).Seconds()
			p.LateSeconds = &late
			if !next.IsZero() && !t.Before(next) {
				p.Missed = true
			}
		} else {
			p.Missed = jobstore.Finished(j.Status) || !next.IsZero() && !now.Before(next)
		}
		out = append(out, p)
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// NewScheduleView returns the view of sc with its slots (newest first).
func NewScheduleView(sc jobstore.Schedule, slots []jobstore.Slot) (ScheduleView, error) {
	req, spec, err := ScheduleFromStore(sc)
	if err != nil {
		return ScheduleView{}, err
	}
	v := ScheduleView{ID: sc.ID, Project: sc.Project, CreatedBy: sc.CreatedBy, CreatedAt: sc.CreatedAt, Paused: sc.Paused,
		NextAt: timePtr(sc.NextAt), BufferedAt: timePtr(sc.BufferedAt), Next: []FireTime{}, Schedule: req}
	if !sc.Paused && !sc.NextAt.IsZero() {
		for _, t := range append([]time.Time{sc.NextAt}, spec.Upcoming(sc.NextAt, 4)...) {
			v.Next = append(v.Next, FireTime{At: t.UTC(), Local: t.In(spec.Zone).Format(time.RFC3339)})
		}
	}
	now := time.Now()
	for _, sl := range slots {
		jobs := []string{}
		for _, j := range sl.Jobs {
			jobs = append(jobs, j.ID)
		}
		v.Slots = append(v.Slots, SlotView{ScheduledAt: sl.ScheduledAt.UTC(), Outcome: sl.Outcome, Count: sl.Count,
			Through: timePtr(sl.Through), RecordedAt: sl.RecordedAt, Jobs: jobs, Detail: sl.Detail,
			Phones: slotPhones(sl, spec.Next(sl.ScheduledAt), now)})
	}
	return v, nil
}

// CreateSchedule checks req (ScheduleRequest.Check, with o's projects,
// and what an iPhone cannot do on the iPhones its job would run on now)
// and stores it as a new schedule whose first slot is the first after the
// database clock. Errors are *SubmitError for a schedule refused.
func CreateSchedule(ctx context.Context, store jobstore.Store, req ScheduleRequest, o SubmitOptions, lim schedule.Limits) (jobstore.Schedule, error) {
	ss, ok := store.(jobstore.ScheduleStore)
	if !ok {
		return jobstore.Schedule{}, fmt.Errorf("create schedule: the store %T keeps no schedules", store)
	}
	spec, project, err := req.Check(o, lim)
	if err != nil {
		return jobstore.Schedule{}, err
	}
	if err := req.Job.checkIPhones(ctx, store, o, project); err != nil {
		return jobstore.Schedule{}, err
	}
	if spec.Next(time.Now()).IsZero() {
		return jobstore.Schedule{}, submitErr("end", "the schedule has no slot after now")
	}
	req.Job.Project = project
	doc, err := json.Marshal(req)
	if err != nil {
		return jobstore.Schedule{}, err
	}
	sc, err := ss.CreateSchedule(ctx, jobstore.Schedule{ID: NewScheduleID(), Project: project, Spec: doc, CreatedBy: o.SubmittedBy},
		jobstore.MaxSchedulesPerProject, func(now time.Time) time.Time { return spec.Next(now) })
	if errors.Is(err, jobstore.ErrScheduleLimit) {
		return jobstore.Schedule{}, submitErr("job.project", "project %s has %d schedules, the most it may have: delete one first", project, jobstore.MaxSchedulesPerProject)
	}
	return sc, err
}

// MaxBackfill is the most slots one backfill fires.
const MaxBackfill = 100

// BackfillSlot is what a backfill did with one slot: backfilled with its
// jobs, or the outcome the slot had already (Taken).
type BackfillSlot struct {
	ScheduledAt time.Time `json:"scheduled_at"`
	Outcome     string    `json:"outcome,omitempty"`
	Taken       bool      `json:"taken,omitempty"`
	Jobs        []string  `json:"jobs"`
	Detail      string    `json:"detail,omitempty"`
}

// Backfill fires every slot of sc from from to to (both included, not
// after now), at most MaxBackfill, whatever its pause and overlap policy:
// slots that have an outcome already keep it (Taken). Errors about the
// range are *SubmitError naming "from" or "to".
func Backfill(ctx context.Context, store jobstore.Store, sc jobstore.Schedule, from, to time.Time, o SubmitOptions) ([]BackfillSlot, error) {
	ss, ok := store.(jobstore.ScheduleStore)
	if !ok {
		return nil, fmt.Errorf("backfill: the store %T keeps no schedules", store)
	}
	_, spec, err := ScheduleFromStore(sc)
	if err != nil {
		return nil, err
	}
	switch {
	case from.IsZero():
		return nil, submitErr("from", "required: the first time of the range (RFC 3339)")
	case to.IsZero():
		return nil, submitErr("to", "required: the last time of the range (RFC 3339)")
	case to.Before(from):
		return nil, submitErr("to", "%s is before from (%s)", to.Format(time.RFC3339), from.Format(time.RFC3339))
	case to.After(time.Now()):
		return nil, submitErr("to", "%s is in the future: backfill fires past slots only", to.Format(time.RFC3339))
	}
	var slots []time.Time
	for t := spec.Next(from.Add(-time.Nanosecond)); !t.IsZero() && !t.After(to); t = spec.Next(t) {
		if len(slots) == MaxBackfill {
			return nil, submitErr("to", "more than %d slots from %s to %s: backfill a shorter range", MaxBackfill, from.Format(time.RFC3339), to.Format(time.RFC3339))
		}
		slots = append(slots, t)
	}
	out := []BackfillSlot{}
	for _, t := range slots {
		specs, detail, err := SlotJobs(ctx, store, sc, t, o)
		if err != nil {
			return out, err
		}
		res, err := ss.FireSlot(ctx, jobstore.SlotFire{ScheduleID: sc.ID, Slot: t, Jobs: specs, Detail: detail, Backfill: true})
		if errors.Is(err, jobstore.ErrSlotTaken) {
			out = append(out, BackfillSlot{ScheduledAt: t, Taken: true, Jobs: []string{}, Detail: "the slot has an outcome already"})
			continue
		}
		if err != nil {
			return out, err
		}
		b := BackfillSlot{ScheduledAt: t, Outcome: res.Outcome, Jobs: []string{}, Detail: detail}
		for _, j := range res.Jobs {
			b.Jobs = append(b.Jobs, j.ID)
		}
		out = append(out, b)
	}
	return out, nil
}

// BackfillRequest is the body of POST /api/v1/schedules/{id}/backfill.
type BackfillRequest struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// BackfillReply answers a backfill.
type BackfillReply struct {
	Slots []BackfillSlot `json:"slots"`
}

// ScheduleList is the answer of GET /api/v1/schedules.
type ScheduleList struct {
	Schedules []ScheduleView `json:"schedules"`
}

var scheduleIDRe = regexp.MustCompile(`^sch-[0-9a-f]{12}$`)

func (h *Handler) scheduleRoutes() {
	h.handle("/api/v1/schedules", route{
		http.MethodGet:  {jobstore.ScopeRead, h.listSchedules},
		http.MethodPost: {jobstore.ScopeSubmit, h.createSchedule},
	})
	h.handle("/api/v1/schedules/{id}", route{
		http.MethodGet:    {jobstore.ScopeRead, h.showSchedule},
		http.MethodDelete: {jobstore.ScopeOperate, h.deleteSchedule},
	})
	h.handle("/api/v1/schedules/{id}/pause", route{http.MethodPost: {jobstore.ScopeOperate, h.pauseSchedule(true)}})
	h.handle("/api/v1/schedules/{id}/resume", route{http.MethodPost: {jobstore.ScopeOperate, h.pauseSchedule(false)}})
	h.handle("/api/v1/schedules/{id}/backfill", route{http.MethodPost: {jobstore.ScopeSubmit, h.backfillSchedule}})
}

// scheduleStore is the store's schedules, or the 501 answered.
func (h *Handler) scheduleStore(w http.ResponseWriter, r *http.Request) (jobstore.ScheduleStore, bool) {
	ss, ok := h.store.(jobstore.ScheduleStore)
	if !ok {
		WriteProblem(w, r, problem(http.StatusNotImplemented, ProblemNotImplemented, "", "this coordinator's store keeps no schedules"))
	}
	return ss, ok
}

// schedule reads the schedule of the path and checks that the caller's
// token covers its project: 400 for a malformed id, 404 when unknown, 403
// (recorded) for another project's schedule.
func (h *Handler) schedule(w http.ResponseWriter, r *http.Request, c Caller) (jobstore.Schedule, bool) {
	ss, ok := h.scheduleStore(w, r)
	if !ok {
		return jobstore.Schedule{}, false
	}
	id := r.PathValue("id")
	if !scheduleIDRe.MatchString(id) {
		WriteProblem(w, r, problem(http.StatusBadRequest, ProblemInvalidRequest, "id", "id: %q is not a schedule id (sch- and 12 hex digits)", trimID(id)))
		return jobstore.Schedule{}, false
	}
	sc, err := ss.GetSchedule(r.Context(), id)
	if errors.Is(err, jobstore.ErrScheduleNotFound) {
		WriteProblem(w, r, problem(http.StatusNotFound, ProblemNotFound, "id", "no schedule %s", id))
		return jobstore.Schedule{}, false
	}
	if err != nil {
		h.internal(w, r, err)
		return jobstore.Schedule{}, false
	}
	if !c.Sees(sc.Project) {
		h.recordDenial(r, c, "", sc.Project)
		WriteProblem(w, r, problem(http.StatusForbidden, ProblemForbidden, "", "token %s does not cover the project of schedule %s; the attempt is recorded", c.Name, id))
		return jobstore.Schedule{}, false
	}
	return sc, true
}

func trimID(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// listSchedules is GET /api/v1/schedules: the schedules of the caller's
// projects.
func (h *Handler) listSchedules(w http.ResponseWriter, r *http.Request, c Caller) {
	ss, ok := h.scheduleStore(w, r)
	if !ok {
		return
	}
	projects := c.Projects
	if projects == nil {
		projects = []string{}
	}
	list, err := ss.Schedules(r.Context(), jobstore.ScheduleFilter{Projects: projects})
	if err != nil {
		h.internal(w, r, err)
		return
	}
	out := ScheduleList{Schedules: []ScheduleView{}}
	for _, sc := range list {
		v, err := NewScheduleView(sc, nil)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		out.Schedules = append(out.Schedules, v)
	}
	WriteJSON(w, http.StatusOK, out)
}

// createSchedule is POST /api/v1/schedules.
func (h *Handler) createSchedule(w http.ResponseWriter, r *http.Request, c Caller) {
	var req ScheduleRequest
	if p := h.decodeFileBody(w, r, &req, "schedule", func(data []byte) error { return ParseScheduleFile(data, &req) }); p != nil {
		WriteProblem(w, r, p)
		return
	}
	projects := c.Projects
	if projects == nil {
		projects = []string{}
	}
	o := SubmitOptions{SubmittedBy: c.Name, Projects: projects, Jobs: h.opts.Jobs}
	sc, err := CreateSchedule(r.Context(), h.store, req, o, h.opts.Schedules)
	var se *SubmitError
	switch {
	case errors.As(err, &se) && errors.Is(err, errForbiddenProject):
		h.deny(w, r, c, "", req.Job.Project)
		return
	case errors.As(err, &se):
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidJob, se.Field, "%s", se.Err.Error()))
		return
	case err != nil:
		h.internal(w, r, err)
		return
	}
	v, err := NewScheduleView(sc, nil)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	w.Header().Set("Location", Prefix+"schedules/"+sc.ID)
	WriteJSON(w, http.StatusCreated, v)
}

// showSchedule is GET /api/v1/schedules/{id}, with its latest slots.
func (h *Handler) showSchedule(w http.ResponseWriter, r *http.Request, c Caller) {
	sc, ok := h.schedule(w, r, c)
	if !ok {
		return
	}
	slots, err := h.store.(jobstore.ScheduleStore).ScheduleSlots(r.Context(), sc.ID, 50)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	v, err := NewScheduleView(sc, slots)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, v)
}

// deleteSchedule is DELETE /api/v1/schedules/{id}: the schedule and its
// slots go, the jobs it queued stay.
func (h *Handler) deleteSchedule(w http.ResponseWriter, r *http.Request, c Caller) {
	sc, ok := h.schedule(w, r, c)
	if !ok {
		return
	}
	err := h.store.(jobstore.ScheduleStore).DeleteSchedule(r.Context(), sc.ID)
	if errors.Is(err, jobstore.ErrScheduleNotFound) {
		WriteProblem(w, r, problem(http.StatusNotFound, ProblemNotFound, "id", "no schedule %s", sc.ID))
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pauseSchedule is POST /api/v1/schedules/{id}/pause and /resume.
func (h *Handler) pauseSchedule(paused bool) func(w http.ResponseWriter, r *http.Request, c Caller) {
	return func(w http.ResponseWriter, r *http.Request, c Caller) {
		sc, ok := h.schedule(w, r, c)
		if !ok {
			return
		}
		sc, err := PauseSchedule(r.Context(), h.store, sc, paused)
		if errors.Is(err, jobstore.ErrScheduleNotFound) {
			WriteProblem(w, r, problem(http.StatusNotFound, ProblemNotFound, "id", "no schedule %s", r.PathValue("id")))
			return
		}
		if err != nil {
			h.internal(w, r, err)
			return
		}
		v, err := NewScheduleView(sc, nil)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		WriteJSON(w, http.StatusOK, v)
	}
}

// PauseSchedule pauses sc, or resumes it with the first slot after the
// database clock as its next one.
func PauseSchedule(ctx context.Context, store jobstore.Store, sc jobstore.Schedule, paused bool) (jobstore.Schedule, error) {
	_, spec, err := ScheduleFromStore(sc)
	if err != nil {
		return jobstore.Schedule{}, err
	}
	ss, ok := store.(jobstore.ScheduleStore)
	if !ok {
		return jobstore.Schedule{}, fmt.Errorf("pause schedule: the store %T keeps no schedules", store)
	}
	return ss.PauseSchedule(ctx, sc.ID, paused, func(now time.Time) time.Time { return spec.Next(now) })
}

// backfillSchedule is POST /api/v1/schedules/{id}/backfill.
func (h *Handler) backfillSchedule(w http.ResponseWriter, r *http.Request, c Caller) {
	var req BackfillRequest
	if p := h.decodeBody(w, r, &req, false); p != nil {
		WriteProblem(w, r, p)
		return
	}
	sc, ok := h.schedule(w, r, c)
	if !ok {
		return
	}
	o := SubmitOptions{Jobs: h.opts.Jobs, OfflineAfter: h.opts.OfflineAfter, Phones: h.opts.Phones}
	slots, err := Backfill(r.Context(), h.store, sc, req.From, req.To, o)
	var se *SubmitError
	switch {
	case errors.As(err, &se):
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidJob, se.Field, "%s", se.Err.Error()))
		return
	case err != nil:
		h.internal(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, BackfillReply{Slots: slots})
}
