package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// JobView is a job as the API shows it (docs/openapi.yaml, schema Job).
type JobView struct {
	ID             string                  `json:"id"`
	Status         string                  `json:"status"`
	Project        string                  `json:"project"`
	SubmittedBy    string                  `json:"submitted_by"`
	Priority       int                     `json:"priority"`
	NotBefore      *time.Time              `json:"not_before,omitempty"`
	MaxAttempts    int                     `json:"max_attempts"`
	Attempts       int                     `json:"attempts"`
	DeadlineAt     *time.Time              `json:"deadline_at,omitempty"`
	Generation     int64                   `json:"generation"`
	Owner          string                  `json:"owner,omitempty"`
	Phone          string                  `json:"phone,omitempty"`
	Selector       protocol.DeviceSelector `json:"selector"`
	Waiting        string                  `json:"waiting,omitempty"`
	LeaseExpiresAt *time.Time              `json:"lease_expires_at,omitempty"`
	CompletedBy    string                  `json:"completed_by,omitempty"`
	FailReason     string                  `json:"fail_reason,omitempty"`
	Result         json.RawMessage         `json:"result,omitempty"`
	CreatedAt      time.Time               `json:"created_at"`
	UpdatedAt      time.Time               `json:"updated_at"`
	// ScheduleID and ScheduledAt name the schedule and the slot that fired
	// the job (docs/schedules.md); absent for a job submitted otherwise.
	ScheduleID  string     `json:"schedule_id,omitempty"`
	ScheduledAt *time.Time `json:"scheduled_at,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// NewJobView returns the view of j.
func NewJobView(j jobstore.Job) JobView {
	return JobView{
		ID: j.ID, Status: j.Status, Project: j.Project, SubmittedBy: j.SubmittedBy, Priority: j.Priority,
		NotBefore: timePtr(j.NotBefore), MaxAttempts: j.MaxAttempts, Attempts: j.Attempts, DeadlineAt: timePtr(j.DeadlineAt),
		Generation: j.Generation, Owner: j.WorkerID, Phone: j.Device, Selector: j.Task.Device,
		LeaseExpiresAt: timePtr(j.LeaseExpiresAt), CompletedBy: j.CompletedBy, FailReason: j.FailReason,
		Result: j.Result, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt,
		ScheduleID: j.ScheduleID, ScheduledAt: timePtr(j.ScheduledAt),
	}
}

// Generation is one grant of a job, rebuilt from its accepted write events.
type Generation struct {
	Generation int64      `json:"generation"`
	Owner      string     `json:"owner"`
	GrantedBy  string     `json:"granted_by"` // claim or reassign
	GrantedAt  time.Time  `json:"granted_at"`
	Ended      string     `json:"ended,omitempty"` // succeeded, failed, reclaimed, reassigned, cancelled, timed out
	EndedAt    *time.Time `json:"ended_at,omitempty"`
	Detail     string     `json:"detail,omitempty"` // why it ended, as recorded
	Class      string     `json:"class,omitempty"`  // protocol.FailClass* of a failed or reclaimed attempt
	Cause      string     `json:"cause,omitempty"`  // protocol.Cause*
	Artifacts  []string   `json:"artifacts"`        // names registered under this generation
}

// Generations rebuilds the grants of a job from its write events, oldest
// first: who held each generation, how it was granted and how it ended.
func Generations(evs []jobstore.WriteEvent) []Generation {
	out := []Generation{}
	end := func(gen int64, how string, e jobstore.WriteEvent) {
		for i := range out {
			if out[i].Generation == gen && out[i].Ended == "" {
				at := e.At
				out[i].Ended, out[i].EndedAt, out[i].Detail, out[i].Class, out[i].Cause = how, &at, e.Detail, e.Class, e.Cause
			}
		}
	}
	for _, e := range evs {
		if !e.Accepted {
			continue
		}
		switch e.Verb {
		case "claim", "reassign":
			for i := range out {
				if out[i].Ended == "" {
					at := e.At
					out[i].Ended, out[i].EndedAt = "reassigned", &at
				}
			}
			out = append(out, Generation{Generation: e.Generation, Owner: e.Owner, GrantedBy: e.Verb, GrantedAt: e.At, Artifacts: []string{}})
		case "reclaim":
			end(e.Generation, "reclaimed", e)
		case "result":
			end(e.Generation, "succeeded", e)
		case "fail":
			end(e.Generation, "failed", e)
		case "cancel":
			end(e.Generation, "cancelled", e)
		case "timeout":
			end(e.Generation, "timed out", e)
		}
	}
	return out
}

// WriteEventView is one recorded write attempt.
type WriteEventView struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Verb       string    `json:"verb"`
	Owner      string    `json:"owner"`
	Generation int64     `json:"generation"`
	Accepted   bool      `json:"accepted"`
	Detail     string    `json:"detail,omitempty"`
	Class      string    `json:"class,omitempty"`
	Cause      string    `json:"cause,omitempty"`
}

// JobDetail is GET /api/v1/jobs/{id}: the job, its task, every generation
// and every recorded write attempt.
type JobDetail struct {
	JobView
	Task        protocol.Task    `json:"task"`
	Generations []Generation     `json:"generations"`
	WriteEvents []WriteEventView `json:"write_events"`
}

// job reads the job of the path and checks that the caller's token covers
// its project: 400 for a malformed id, 404 when unknown, 403 (recorded)
// for another project's job.
func (h *Handler) job(w http.ResponseWriter, r *http.Request, c Caller) (jobstore.Job, bool) {
	id := r.PathValue("id")
	if err := protocol.CheckJobID(id); err != nil {
		WriteProblem(w, r, problem(http.StatusBadRequest, ProblemInvalidRequest, "id", "id: %v", err))
		return jobstore.Job{}, false
	}
	j, err := h.store.Get(r.Context(), id)
	if errors.Is(err, jobstore.ErrNotFound) {
		WriteProblem(w, r, problem(http.StatusNotFound, ProblemNotFound, "id", "no job %s", id))
		return jobstore.Job{}, false
	}
	if err != nil {
		h.internal(w, r, err)
		return jobstore.Job{}, false
	}
	if !c.Sees(j.Project) {
		h.deny(w, r, c, j.ID, j.Project)
		return jobstore.Job{}, false
	}
	return j, true
}

// deny records a request for another project's job (or list) and answers
// 403. For a job, the answer does not name its project, nor say anything
// else of it: only the record has it (docs/api.md, "Tokens").
func (h *Handler) deny(w http.ResponseWriter, r *http.Request, c Caller, jobID, project string) {
	h.recordDenial(r, c, jobID, project)
	if jobID != "" {
		WriteProblem(w, r, problem(http.StatusForbidden, ProblemForbidden, "", "token %s does not cover the project of job %s; the attempt is recorded", c.Name, jobID))
		return
	}
	WriteProblem(w, r, problem(http.StatusForbidden, ProblemForbidden, "", "token %s does not cover project %s of jobs; the attempt is recorded", c.Name, project))
}

// RecordDenial records that the caller of r (CallerFrom) was refused
// jobID (or, "" for it, the jobs of project) because its token does not
// cover the project, as the API's own routes record it: a handler mounted
// in the API calls it for the refusals it makes itself, then answers 403.
func (h *Handler) RecordDenial(r *http.Request, jobID, project string) {
	c, _ := CallerFrom(r.Context())
	h.recordDenial(r, c, jobID, project)
}

func (h *Handler) recordDenial(r *http.Request, c Caller, jobID, project string) {
	if err := h.store.RecordAPIDenial(r.Context(), jobstore.APIDenial{
		TokenName: c.Name, Method: r.Method, Route: r.URL.Path, JobID: jobID, Project: project,
	}); err != nil {
		h.log.Error().Err(err).Msg("api: record denial")
	}
	h.log.Warn().Str("token_name", c.Name).Str("method", r.Method).Str("path", r.URL.Path).Str("project", project).Msg("api: refused a request for another project")
}

// showJob is GET /api/v1/jobs/{id}, with the long poll ?wait=.
func (h *Handler) showJob(w http.ResponseWriter, r *http.Request, c Caller) {
	var wait time.Duration
	if s := r.URL.Query().Get("wait"); s != "" {
		d, err := parseWait(s)
		if err != nil {
			WriteProblem(w, r, badParam("wait", "%v", err))
			return
		}
		wait = d
	}
	j, ok := h.job(w, r, c)
	if !ok {
		return
	}
	if wait > 0 && !jobstore.Finished(j.Status) {
		if h.opts.Waiter == nil {
			WriteProblem(w, r, problem(http.StatusNotImplemented, ProblemNotImplemented, "wait", "this coordinator does not serve the long poll ?wait="))
			return
		}
		orig := r.Context()
		release, done := h.openStream(w, r, c)
		if done {
			return
		}
		err := h.opts.Waiter.Wait(r.Context(), j.ID, wait)
		revoked := errors.Is(context.Cause(r.Context()), ErrTokenRevoked)
		release()
		*r = *r.WithContext(orig) // the stream's context ended with its slot
		if err != nil {
			if revoked {
				WriteProblem(w, r, problem(http.StatusUnauthorized, ProblemUnauthorized, "", "token %s was revoked", c.Name))
				return
			}
			if r.Context().Err() != nil {
				return
			}
			h.internal(w, r, fmt.Errorf("wait for job %s: %w", j.ID, err))
			return
		}
	}
	d, err := h.detail(r, j.ID)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, d)
}

// parseWait reads ?wait=: a Go duration ("30s") or whole seconds, at most
// MaxWait.
func parseWait(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		n, nerr := strconv.Atoi(s)
		if nerr != nil {
			return 0, fmt.Errorf("%q is not a duration such as 30s", s)
		}
		d = time.Duration(n) * time.Second
	}
	if d < 0 || d > MaxWait {
		return 0, fmt.Errorf("%s: want 0 to %s", d, MaxWait)
	}
	return d, nil
}

// detail reads a job with its history.
func (h *Handler) detail(r *http.Request, id string) (JobDetail, error) {
	ctx := r.Context()
	j, err := h.store.Get(ctx, id)
	if err != nil {
		return JobDetail{}, err
	}
	evs, err := h.store.WriteEvents(ctx, id)
	if err != nil {
		return JobDetail{}, err
	}
	gens := Generations(evs)
	for i := range gens {
		arts, err := h.store.Artifacts(ctx, j.ID, gens[i].Generation)
		if err != nil {
			return JobDetail{}, err
		}
		for _, a := range arts {
			gens[i].Artifacts = append(gens[i].Artifacts, a.Name)
		}
	}
	views := make([]WriteEventView, 0, len(evs))
	for _, e := range evs {
		views = append(views, WriteEventView{ID: e.ID, At: e.At, Verb: e.Verb, Owner: e.Owner, Generation: e.Generation,
			Accepted: e.Accepted, Detail: e.Detail, Class: e.Class, Cause: e.Cause})
	}
	v := NewJobView(j)
	if j.Status == jobstore.StatusQueued {
		agents, err := h.store.Agents(ctx)
		if err != nil {
			return JobDetail{}, err
		}
		running, err := h.store.ListJobs(ctx, jobstore.JobFilter{Statuses: []string{jobstore.StatusInProgress}})
		if err != nil {
			return JobDetail{}, err
		}
		v.Waiting = coordinator.WaitReasonFor(j.Task, agents, running, h.opts.OfflineAfter)
	}
	return JobDetail{JobView: v, Task: j.Task, Generations: gens, WriteEvents: views}, nil
}

// JobList is GET /api/v1/jobs.
type JobList struct {
	Jobs []JobView `json:"jobs"`
	// NextCursor continues the list; absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

const (
	defaultLimit = 50
	maxLimit     = 500
)

func encodeCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("j1:" + strconv.FormatInt(seq, 10)))
}

func decodeCursor(s string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		if rest, ok := strings.CutPrefix(string(b), "j1:"); ok {
			if n, err := strconv.ParseInt(rest, 10, 64); err == nil && n > 0 {
				return n, nil
			}
		}
	}
	return 0, errors.New("not a cursor of this API: pass next_cursor of the previous page as it is")
}

// listJobs is GET /api/v1/jobs.
func (h *Handler) listJobs(w http.ResponseWriter, r *http.Request, c Caller) {
	q := r.URL.Query()
	for name := range q {
		switch name {
		case "project", "status", "agent", "phone", "limit", "cursor":
		default:
			WriteProblem(w, r, badParam(name, "unknown parameter (project, status, agent, phone, limit, cursor)"))
			return
		}
	}
	f := jobstore.JobPageFilter{Projects: c.Projects, AgentID: q.Get("agent"), Phone: q.Get("phone"), Limit: defaultLimit}
	if f.Projects == nil {
		f.Projects = []string{}
	}
	if p := q.Get("project"); p != "" {
		if err := jobstore.CheckProject(p); err != nil {
			WriteProblem(w, r, badParam("project", "%v", err))
			return
		}
		if !c.Sees(p) {
			h.deny(w, r, c, "", p)
			return
		}
		f.Projects = []string{p}
	}
	for st := range strings.SplitSeq(q.Get("status"), ",") {
		if st = strings.ToUpper(strings.TrimSpace(st)); st == "" {
			continue
		}
		if !slices.Contains(jobstore.Statuses, st) {
			WriteProblem(w, r, badParam("status", "unknown status %q (want %s)", st, strings.Join(jobstore.Statuses, ", ")))
			return
		}
		f.Statuses = append(f.Statuses, st)
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLimit {
			WriteProblem(w, r, badParam("limit", "%q: want an integer from 1 to %d", s, maxLimit))
			return
		}
		f.Limit = n
	}
	if s := q.Get("cursor"); s != "" {
		n, err := decodeCursor(s)
		if err != nil {
			WriteProblem(w, r, badParam("cursor", "%v", err))
			return
		}
		f.After = n
	}
	page, err := h.store.ListJobPage(r.Context(), f)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	out := JobList{Jobs: make([]JobView, 0, len(page.Jobs))}
	for _, j := range page.Jobs {
		out.Jobs = append(out.Jobs, NewJobView(j))
	}
	if page.Next > 0 {
		out.NextCursor = encodeCursor(page.Next)
	}
	WriteJSON(w, http.StatusOK, out)
}

// BatchView is the reply of a fan-out submit.
type BatchView struct {
	Batch string    `json:"batch"`
	Jobs  []JobView `json:"jobs"`
}

// maxKeyLen bounds an Idempotency-Key.
const maxKeyLen = 255

// submitJobs is POST /api/v1/jobs.
func (h *Handler) submitJobs(w http.ResponseWriter, r *http.Request, c Caller) {
	key := r.Header.Get("Idempotency-Key")
	if len(key) > maxKeyLen || strings.ContainsFunc(key, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		WriteProblem(w, r, problem(http.StatusBadRequest, ProblemInvalidRequest, "Idempotency-Key", "Idempotency-Key: want 1 to %d printable ASCII characters without spaces", maxKeyLen))
		return
	}
	var req JobRequest
	if p := h.decodeJobBody(w, r, &req); p != nil {
		WriteProblem(w, r, p)
		return
	}
	ctx := r.Context()
	if key != "" {
		rec, err := h.store.Idempotent(ctx, c.TokenID, key)
		switch {
		case err == nil:
			h.replay(w, r, rec, req.RequestHash())
			return
		case !errors.Is(err, jobstore.ErrNotFound):
			h.internal(w, r, err)
			return
		}
	}
	opts := SubmitOptions{SubmittedBy: c.Name, Projects: c.Projects, OfflineAfter: h.opts.OfflineAfter, Jobs: h.opts.Jobs, Phones: h.opts.Phones}
	if opts.Projects == nil {
		opts.Projects = []string{}
	}
	specs, batch, err := req.Specs(ctx, h.store, opts)
	if err != nil {
		h.submitProblem(w, r, c, req, err)
		return
	}
	reply := func(jobs []jobstore.Job) (json.RawMessage, error) {
		views := make([]JobView, 0, len(jobs))
		for _, j := range jobs {
			views = append(views, NewJobView(j))
		}
		if batch == "" {
			return json.Marshal(views[0])
		}
		return json.Marshal(BatchView{Batch: batch, Jobs: views})
	}
	var body json.RawMessage
	if key != "" {
		rec, err := h.store.SubmitIdempotent(ctx, jobstore.Idempotent{TokenID: c.TokenID, Key: key, RequestHash: req.RequestHash()}, specs, reply)
		// A concurrent submit with the same key committed first: this
		// answer is a replay of it, not a create.
		if (err == nil && rec.Replayed) || errors.Is(err, jobstore.ErrIdempotencyMismatch) {
			h.replay(w, r, rec, req.RequestHash())
			return
		}
		if err != nil {
			h.submitProblem(w, r, c, req, err)
			return
		}
		body = rec.Reply
	} else {
		jobs, err := h.store.SubmitAll(ctx, specs)
		if err != nil {
			h.submitProblem(w, r, c, req, err)
			return
		}
		if body, err = reply(jobs); err != nil {
			h.internal(w, r, err)
			return
		}
	}
	if batch == "" && len(specs) == 1 {
		w.Header().Set("Location", Prefix+"jobs/"+jobIDOf(body))
	}
	writeRaw(w, http.StatusCreated, body)
}

// replay answers a submit whose Idempotency-Key is stored: the stored
// reply when the request is the same, 422 otherwise.
func (h *Handler) replay(w http.ResponseWriter, r *http.Request, rec jobstore.Idempotent, hash string) {
	if rec.RequestHash != hash {
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemIdempotency, "Idempotency-Key",
			"Idempotency-Key %q was used at %s for a different request; use a new key for a new request", rec.Key, rec.CreatedAt.UTC().Format(time.RFC3339)))
		return
	}
	w.Header().Set("Idempotent-Replayed", "true")
	writeRaw(w, http.StatusCreated, rec.Reply)
}

func jobIDOf(body json.RawMessage) string {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &v)
	return v.ID
}

func writeRaw(w http.ResponseWriter, status int, body json.RawMessage) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// idInUse is the 409 of a submit whose id (or, for a fan-out, the id of
// a job of its batch) is taken. Job ids are one namespace across all
// projects, so the job holding it may be another project's: the answer is
// the same whoever holds it and says nothing of that job (docs/api.md,
// "Job ids").
func idInUse(req JobRequest) *Problem {
	what := "the job id"
	switch {
	case req.ID != "" && req.FanOut:
		what = fmt.Sprintf("a job id of batch %q (%s-1, %s-2, …)", req.ID, req.ID, req.ID)
	case req.ID != "":
		what = fmt.Sprintf("id %q", req.ID)
	}
	return problem(http.StatusConflict, ProblemConflict, "id",
		"%s is in use: job ids are shared by all projects, and nothing is said of the job holding it; choose another id, or leave id out for a random one", what)
}

// submitProblem answers a submit that failed.
func (h *Handler) submitProblem(w http.ResponseWriter, r *http.Request, c Caller, req JobRequest, err error) {
	var se *SubmitError
	switch {
	case errors.As(err, &se) && errors.Is(err, errForbiddenProject):
		h.deny(w, r, c, "", req.Project)
	case errors.As(err, &se):
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidJob, se.Field, "%s", se.Err.Error()))
	case errors.Is(err, jobstore.ErrConflict):
		WriteProblem(w, r, idInUse(req))
	default:
		if field, _ := splitField(strings.TrimPrefix(err.Error(), "submit job: ")); field != "" {
			WriteProblem(w, r, invalidJob(errors.New(strings.TrimPrefix(err.Error(), "submit job: "))))
			return
		}
		h.internal(w, r, err)
	}
}

// CancelRequest is the optional body of POST /api/v1/jobs/{id}/cancel.
type CancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

// cancelJob is POST /api/v1/jobs/{id}/cancel.
func (h *Handler) cancelJob(w http.ResponseWriter, r *http.Request, c Caller) {
	var req CancelRequest
	if p := h.decodeBody(w, r, &req, true); p != nil {
		WriteProblem(w, r, p)
		return
	}
	if len(req.Reason) > 500 {
		WriteProblem(w, r, problem(http.StatusBadRequest, ProblemInvalidRequest, "reason", "reason: at most 500 bytes"))
		return
	}
	j, ok := h.job(w, r, c)
	if !ok {
		return
	}
	reason := req.Reason
	if reason == "" {
		reason = "cancelled through the API by " + c.Name
	}
	tok, err := h.store.Cancel(r.Context(), j.ID, reason)
	switch {
	case errors.Is(err, jobstore.ErrConflict):
		WriteProblem(w, r, problem(http.StatusConflict, ProblemConflict, "", "job %s is %s already: nothing to cancel", j.ID, currentStatus(r, h, j)))
		return
	case err != nil:
		h.internal(w, r, err)
		return
	}
	if tok != (fencing.Token{}) && h.opts.Revoke != nil {
		// The token is stale in the store already; the revoke only makes
		// the agent stop sooner than its next fenced call.
		if err := h.opts.Revoke(tok, "cancelled: "+reason); err != nil {
			h.log.Warn().Err(err).Str("job", j.ID).Msg("api: revoke after cancel not sent; the agent stops at its next fenced call")
		}
	}
	j, err = h.store.Get(r.Context(), j.ID)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, NewJobView(j))
}

func currentStatus(r *http.Request, h *Handler, j jobstore.Job) string {
	if cur, err := h.store.Get(r.Context(), j.ID); err == nil {
		return cur.Status
	}
	return j.Status
}

// AgentView is an agent as the API shows it.
type AgentView struct {
	ID            string            `json:"id"`
	Online        bool              `json:"online"`
	Draining      bool              `json:"draining"`
	AgentDraining bool              `json:"agent_draining"`
	Version       string            `json:"version,omitempty"`
	Slots         int               `json:"slots"`
	Phones        []protocol.Device `json:"phones"`
	LastSeen      *time.Time        `json:"last_seen,omitempty"`
}

func (h *Handler) agentView(a jobstore.Agent) AgentView {
	phones := a.Devices
	if phones == nil {
		phones = []protocol.Device{}
	}
	return AgentView{ID: a.ID, Online: a.Online(h.opts.OfflineAfter), Draining: a.Draining, AgentDraining: a.AgentDraining,
		Version: a.Version, Slots: a.Slots, Phones: phones, LastSeen: timePtr(a.LastSeen)}
}

// AgentList is GET /api/v1/agents.
type AgentList struct {
	Agents []AgentView `json:"agents"`
}

// listAgents is GET /api/v1/agents.
func (h *Handler) listAgents(w http.ResponseWriter, r *http.Request, c Caller) {
	agents, err := h.store.Agents(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	out := AgentList{Agents: make([]AgentView, 0, len(agents))}
	for _, a := range agents {
		out.Agents = append(out.Agents, h.agentView(a))
	}
	WriteJSON(w, http.StatusOK, out)
}

// drainAgent is POST /api/v1/agents/{id}/drain and .../resume.
func (h *Handler) drainAgent(drain bool) func(w http.ResponseWriter, r *http.Request, c Caller) {
	return func(w http.ResponseWriter, r *http.Request, c Caller) {
		id := r.PathValue("id")
		a, err := h.store.SetAgentDraining(r.Context(), id, drain)
		if errors.Is(err, jobstore.ErrAgentNotFound) {
			WriteProblem(w, r, problem(http.StatusNotFound, ProblemNotFound, "id", "no agent %s", id))
			return
		}
		if err != nil {
			h.internal(w, r, err)
			return
		}
		h.log.Info().Str("agent", id).Bool("draining", drain).Str("token_name", c.Name).Msg("api: agent drain changed")
		if h.opts.PushControl != nil {
			ctl := protocol.Control{Command: protocol.ControlResume}
			if drain {
				ctl.Command = protocol.ControlDrain
			}
			if err := h.opts.PushControl(r.Context(), id, ctl); err != nil {
				h.log.Warn().Err(err).Str("agent", id).Msg("api: agent not told of its drain; the coordinator holds it all the same")
			}
		}
		WriteJSON(w, http.StatusOK, h.agentView(a))
	}
}
