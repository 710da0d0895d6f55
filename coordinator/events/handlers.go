package events

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// AllProjects, in the projects a caller may see, stands for every project.
const AllProjects = "*"

// Store is what the handlers read: a jobstore.Store.
type Store interface {
	Source
	ArtifactStore
}

// Handlers serve the event streams and the artifact list (docs/api.md, "Events").
// They authenticate nobody: Projects says which projects the caller of a
// request may see, and the server that mounts them checks the token.
type Handlers struct {
	Broker *Broker
	Store  Store
	// Presigner makes the artifacts' GET URLs; nil answers the artifact
	// list with 503.
	Presigner coordinator.Presigner
	// URLExpiry is the validity of those URLs (DefaultURLExpiry when zero).
	URLExpiry time.Duration
	// Projects returns the projects the caller may see (AllProjects for
	// every one); ok false answers 401.
	Projects func(*http.Request) (projects []string, ok bool)
	// Forbidden, when set, is told of every request refused with 403 (to
	// record it).
	Forbidden func(r *http.Request, jobID, project string)
	// Heartbeat is the interval of the comment lines that keep an idle
	// stream open through proxies (default 15s).
	Heartbeat time.Duration
	Log       zerolog.Logger
}

// Register mounts the routes on mux:
//
//	GET /api/v1/jobs/{id}/events     SSE of one job
//	GET /api/v1/events?project=P     SSE of the caller's projects (or P's)
//	GET /api/v1/jobs/{id}/artifacts  artifact list with presigned URLs
func (h *Handlers) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/jobs/{id}/events", h.JobEvents)
	mux.HandleFunc("GET /api/v1/events", h.ProjectEvents)
	mux.HandleFunc("GET /api/v1/jobs/{id}/artifacts", h.Artifacts)
}

// fail answers r with the API's problem document (docs/api.md, "Errors"),
// so that the errors of these routes look like every other route's: the
// type of status, field naming the parameter at fault ("" for none).
func fail(w http.ResponseWriter, r *http.Request, status int, field, detail string) {
	api.WriteProblem(w, r, api.NewProblem(status, problemType(status), field, detail))
}

// problemType is the API's problem type of an HTTP status.
func problemType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return api.ProblemInvalidRequest
	case http.StatusUnauthorized:
		return api.ProblemUnauthorized
	case http.StatusForbidden:
		return api.ProblemForbidden
	case http.StatusNotFound:
		return api.ProblemNotFound
	case http.StatusServiceUnavailable:
		return api.ProblemUnavailable
	}
	return api.ProblemInternal
}

// visible returns the caller's projects, nil for all; it answers 401 and
// returns false when there is no caller.
func (h *Handlers) visible(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	if h.Projects == nil {
		fail(w, r, http.StatusUnauthorized, "", "no caller")
		return nil, false
	}
	ps, ok := h.Projects(r)
	if !ok {
		fail(w, r, http.StatusUnauthorized, "", "no valid token")
		return nil, false
	}
	if slices.Contains(ps, AllProjects) {
		return nil, true
	}
	if ps == nil {
		ps = []string{}
	}
	return ps, true
}

// job reads the job of the route and checks that the caller may see it.
func (h *Handlers) job(w http.ResponseWriter, r *http.Request) (jobstore.Job, bool) {
	ps, ok := h.visible(w, r)
	if !ok {
		return jobstore.Job{}, false
	}
	id := r.PathValue("id")
	// Mounted in the API, the job was read and checked already.
	j, err := jobstore.Job{}, error(nil)
	if got, ok := api.JobFrom(r.Context()); ok && got.ID == id {
		j = got
	} else {
		j, err = h.Store.Get(r.Context(), id)
	}
	if errors.Is(err, jobstore.ErrNotFound) {
		fail(w, r, http.StatusNotFound, "id", fmt.Sprintf("no job %s", id))
		return jobstore.Job{}, false
	}
	if err != nil {
		h.Log.Error().Err(err).Str("job_id", id).Msg("read job")
		fail(w, r, http.StatusInternalServerError, "", "reading the job failed; the coordinator's log has the cause")
		return jobstore.Job{}, false
	}
	if ps != nil && !slices.Contains(ps, j.Project) {
		if h.Forbidden != nil {
			h.Forbidden(r, j.ID, j.Project)
		}
		fail(w, r, http.StatusForbidden, "", fmt.Sprintf("job %s belongs to a project this token does not cover; the attempt is recorded", id))
		return jobstore.Job{}, false
	}
	return j, true
}

// resumeID reads the Last-Event-ID header or the after parameter; on an
// error it names the one at fault.
func resumeID(r *http.Request) (int64, string, error) {
	v, what := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if v == "" {
		v, what = r.URL.Query().Get("after"), "after"
	}
	if v == "" {
		return 0, "", nil
	}
	id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || id < 0 {
		return 0, what, fmt.Errorf("%s: %q is not an event id (a non-negative integer)", what, v)
	}
	return id, "", nil
}

// JobEvents serves GET /api/v1/jobs/{id}/events: the job's events as
// Server-Sent Events, from the start or after the Last-Event-ID header (or
// the after parameter). The stream ends after the event of an end state
// other than needs_decision.
func (h *Handlers) JobEvents(w http.ResponseWriter, r *http.Request) {
	after, field, err := resumeID(r)
	if err != nil {
		fail(w, r, http.StatusBadRequest, field, err.Error())
		return
	}
	j, ok := h.job(w, r)
	if !ok {
		return
	}
	h.serve(w, r, Filter{JobID: j.ID}, after, true)
}

// ProjectEvents serves GET /api/v1/events: the events of every job of the
// projects named by the project parameters (one or more), or of every
// project the caller may see without one.
func (h *Handlers) ProjectEvents(w http.ResponseWriter, r *http.Request) {
	after, field, err := resumeID(r)
	if err != nil {
		fail(w, r, http.StatusBadRequest, field, err.Error())
		return
	}
	ps, ok := h.visible(w, r)
	if !ok {
		return
	}
	want := r.URL.Query()["project"]
	for _, p := range want {
		if err := jobstore.CheckProject(p); err != nil {
			fail(w, r, http.StatusBadRequest, "project", fmt.Sprintf("project: %v", err))
			return
		}
		if ps != nil && !slices.Contains(ps, p) {
			if h.Forbidden != nil {
				h.Forbidden(r, "", p)
			}
			fail(w, r, http.StatusForbidden, "", fmt.Sprintf("project %s is not one this token covers; the attempt is recorded", p))
			return
		}
	}
	if len(want) > 0 {
		ps = want
	}
	h.serve(w, r, Filter{Projects: ps}, after, false)
}

// serve writes the stream until the client leaves (or, with endOnFinish,
// after an end event).
func (h *Handlers) serve(w http.ResponseWriter, r *http.Request, f Filter, after int64, endOnFinish bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	ctx := r.Context()
	s := h.Broker.Open(f, after)
	defer s.Close()
	// Subscribe before answering, so a broker that is not running is a 503.
	if err := s.Start(ctx); err != nil {
		fail(w, r, http.StatusServiceUnavailable, "", "the event broker is not running")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\n: stream open\n\n"); err != nil {
		return
	}
	if rc.Flush() != nil {
		return
	}
	beat := h.Heartbeat
	if beat <= 0 {
		beat = 15 * time.Second
	}
	t := time.NewTicker(beat)
	defer t.Stop()
	for {
		m, ok, err := s.NextMessage(ctx, t.C)
		if err != nil {
			if ctx.Err() == nil {
				h.Log.Warn().Err(err).Msg("event stream ended")
			}
			return
		}
		if !ok {
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil || rc.Flush() != nil {
				return
			}
			continue
		}
		e := m.Event
		if m.Frame == nil {
			m.Frame = Frame(e)
		}
		if _, err := w.Write(m.Frame); err != nil || rc.Flush() != nil {
			return
		}
		if endOnFinish && e.Status != "" && jobstore.Finished(e.Status) && e.Status != jobstore.StatusNeedsDecision {
			return
		}
	}
}

// Artifacts serves GET /api/v1/jobs/{id}/artifacts[?generations=all].
func (h *Handlers) Artifacts(w http.ResponseWriter, r *http.Request) {
	all := false
	switch g := r.URL.Query().Get("generations"); g {
	case "", "current":
	case "all":
		all = true
	default:
		fail(w, r, http.StatusBadRequest, "generations", fmt.Sprintf("generations: %q must be current or all", g))
		return
	}
	j, ok := h.job(w, r)
	if !ok {
		return
	}
	list, err := Artifacts(r.Context(), h.Store, h.Presigner, h.URLExpiry, j, all)
	if errors.Is(err, ErrNoStorage) {
		fail(w, r, http.StatusServiceUnavailable, "", err.Error())
		return
	}
	if err != nil {
		h.Log.Error().Err(err).Str("job_id", j.ID).Msg("list artifacts")
		fail(w, r, http.StatusInternalServerError, "", "listing the artifacts failed; the coordinator's log has the cause")
		return
	}
	api.WriteJSON(w, http.StatusOK, list)
}
