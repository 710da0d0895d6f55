package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// Routes served by the Handler (docs/sessions.md, docs/openapi.yaml).
const (
	// PathPrefix is where the handler is mounted: PathPrefix and
	// PathPrefix + "/".
	PathPrefix = "/api/v1/sessions"
	// MaxBodyBytes bounds a request body unless Handler.MaxBodyBytes is
	// set.
	MaxBodyBytes = 1 << 20
)

// Caller is who makes a request, as the API's authentication found it.
type Caller struct {
	Name string
	// Projects the caller may touch; "*" stands for every project.
	Projects []string
	// CanOperate: the caller's token has the operate scope, which every
	// request but GET needs.
	CanOperate bool
}

func (c Caller) allowed(project string) bool {
	return slices.Contains(c.Projects, project) || slices.Contains(c.Projects, "*")
}

// Handler serves the sessions API. Build it with NewHandler.
type Handler struct {
	m    *Manager
	auth func(*http.Request) (Caller, bool)
	mux  *http.ServeMux
	// OnForbidden, when set, is told of every request refused with 403
	// (the caller, the project it asked for, "" for a missing scope, and
	// why), so that the attempt can be recorded. JobOf gives the job of
	// the request's session.
	OnForbidden func(r *http.Request, c Caller, project, detail string)
	// MaxBodyBytes bounds a request body; 0 means MaxBodyBytes. The
	// coordinator sets it to its api.max_body_bytes.
	MaxBodyBytes int64
}

// NewHandler returns the handler of the sessions routes under PathPrefix.
// auth authenticates a request; false answers 401.
func NewHandler(m *Manager, auth func(*http.Request) (Caller, bool)) *Handler {
	h := &Handler{m: m, auth: auth, mux: http.NewServeMux()}
	h.mux.HandleFunc("POST "+PathPrefix, h.open)
	h.mux.HandleFunc("GET "+PathPrefix+"/{id}", h.get)
	h.mux.HandleFunc("DELETE "+PathPrefix+"/{id}", h.close)
	h.mux.HandleFunc("POST "+PathPrefix+"/{id}/steps", h.steps)
	h.mux.HandleFunc(PathPrefix, h.noRoute)
	h.mux.HandleFunc(PathPrefix+"/", h.noRoute)
	return h
}

// ServeHTTP authenticates the request, then routes it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, ok := h.auth(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="edgecoord"`)
		writeProblem(w, r, &Problem{Type: api.ProblemUnauthorized, Status: http.StatusUnauthorized,
			Detail: "send an API token: Authorization: Bearer TOKEN"})
		return
	}
	if !c.CanOperate && r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.forbidden(w, r, c, "", "the token lacks the operate scope, which sessions need")
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
	h.mux.ServeHTTP(w, r)
}

type callerKey struct{}

func callerOf(r *http.Request) Caller {
	c, _ := r.Context().Value(callerKey{}).(Caller)
	return c
}

func (h *Handler) forbidden(w http.ResponseWriter, r *http.Request, c Caller, project, detail string) {
	if h.OnForbidden != nil {
		h.OnForbidden(r, c, project, detail)
	}
	writeProblem(w, r, &Problem{Type: api.ProblemForbidden, Status: http.StatusForbidden, Detail: detail})
}

func (h *Handler) noRoute(w http.ResponseWriter, r *http.Request) {
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, PathPrefix), "/")
	parts := strings.Split(rest, "/")
	known := rest == "" || len(parts) == 1 || len(parts) == 2 && parts[1] == "steps"
	if known {
		writeProblem(w, r, &Problem{Type: api.ProblemMethod, Status: http.StatusMethodNotAllowed,
			Detail: r.Method + " is not served on " + r.URL.Path})
		return
	}
	writeProblem(w, r, &Problem{Type: api.ProblemNotFound, Status: http.StatusNotFound, Detail: "no route " + r.URL.Path})
}

// OpenBody is the body of POST /api/v1/sessions.
type OpenBody struct {
	Project string                  `json:"project"`
	Device  protocol.DeviceSelector `json:"device"`
	// IdleTimeout and Wait are Go durations ("90s", "5m").
	IdleTimeout string `json:"idle_timeout"`
	Wait        string `json:"wait"`
}

// StepsBody is the body of POST /api/v1/sessions/{id}/steps.
type StepsBody struct {
	Steps []Step `json:"steps"`
}

// StepsReply is the reply to POST /api/v1/sessions/{id}/steps.
type StepsReply struct {
	Steps []StepResult `json:"steps"`
}

// Doc is a session as the API shows it.
type Doc struct {
	ID          string     `json:"id"`
	JobID       string     `json:"job_id"`
	Project     string     `json:"project"`
	SubmittedBy string     `json:"submitted_by,omitempty"`
	Agent       string     `json:"agent,omitempty"`
	Phone       Phone      `json:"phone"`
	Status      string     `json:"status"`
	IdleTimeout string     `json:"idle_timeout"`
	LastStep    int        `json:"last_step"`
	OpenedAt    time.Time  `json:"opened_at"`
	Reason      string     `json:"reason,omitempty"`
	Lost        *LostError `json:"lost,omitempty"`
	// Artifacts: on close, the job's artifacts (the operation log among
	// them), each with a presigned GET URL.
	Artifacts []Capture `json:"artifacts,omitempty"`
}

func docOf(i Info) Doc {
	return Doc{ID: i.ID, JobID: i.JobID, Project: i.Project, SubmittedBy: i.SubmittedBy, Agent: i.Agent, Phone: i.Phone,
		Status: i.Status, IdleTimeout: i.IdleTimeout.String(), LastStep: i.LastStep, OpenedAt: i.OpenedAt.UTC(),
		Reason: i.Reason, Lost: i.Lost}
}

func (h *Handler) open(w http.ResponseWriter, r *http.Request) {
	var b OpenBody
	if !h.decodeBody(w, r, &b) {
		return
	}
	c := callerOf(r)
	project := b.Project
	if project == "" {
		own := slices.DeleteFunc(slices.Clone(c.Projects), func(p string) bool { return p == "*" })
		if len(own) != 1 {
			writeError(w, r, inputErr("project", "required: the token has %d projects", len(own)), nil)
			return
		}
		project = own[0]
	}
	if err := jobstore.CheckProject(project); err != nil {
		writeError(w, r, inputErr("project", "%v", err), nil)
		return
	}
	if !c.allowed(project) {
		h.forbidden(w, r, c, project, fmt.Sprintf("project %q is not among the token's projects", project))
		return
	}
	req := OpenRequest{Project: project, SubmittedBy: c.Name, Device: b.Device}
	for _, d := range []struct {
		field, v string
		into     *time.Duration
	}{{"idle_timeout", b.IdleTimeout, &req.IdleTimeout}, {"wait", b.Wait, &req.Wait}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v <= 0 {
			writeError(w, r, inputErr(d.field, "%q is not a positive duration such as 30s or 5m", d.v), nil)
			return
		}
		*d.into = v
	}
	info, err := h.m.Open(r.Context(), req)
	if err != nil {
		writeError(w, r, err, nil)
		return
	}
	w.Header().Set("Location", PathPrefix+"/"+info.ID)
	writeJSON(w, http.StatusCreated, docOf(info))
}

// authorize answers whether the caller may touch session id, writing the
// problem when not.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, id string) bool {
	project, err := h.m.Project(r.Context(), id)
	if err != nil {
		writeError(w, r, err, nil)
		return false
	}
	c := callerOf(r)
	if !c.allowed(project) {
		h.forbidden(w, r, c, project, fmt.Sprintf("session %s belongs to a project not among the token's projects", id))
		return false
	}
	return true
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !h.authorize(w, r, id) {
		return
	}
	info, err := h.m.Get(r.Context(), id)
	if err != nil {
		writeError(w, r, err, nil)
		return
	}
	writeJSON(w, http.StatusOK, docOf(info))
}

func (h *Handler) steps(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var b StepsBody
	if !h.decodeBody(w, r, &b) {
		return
	}
	if err := CheckSteps(b.Steps); err != nil {
		writeError(w, r, err, nil)
		return
	}
	if !h.authorize(w, r, id) {
		return
	}
	res, err := h.m.Step(r.Context(), id, b.Steps)
	if err != nil {
		writeError(w, r, err, res)
		return
	}
	writeJSON(w, http.StatusOK, StepsReply{Steps: res})
}

func (h *Handler) close(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !h.authorize(w, r, id) {
		return
	}
	info, arts, err := h.m.Close(r.Context(), id)
	if err != nil {
		writeError(w, r, err, nil)
		return
	}
	d := docOf(info)
	d.Artifacts = arts
	writeJSON(w, http.StatusOK, d)
}

// Problem is the API's RFC 9457 problem document (api.Problem, its types
// the api.Problem* constants) with the sessions' extension members, set
// where they apply (docs/api.md, "Errors").
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Field names the request member that was wrong (400).
	Field string `json:"field,omitempty"`
	// JobID, Generation and LastStep describe a lost session (409).
	JobID      string `json:"job_id,omitempty"`
	Generation *int64 `json:"generation,omitempty"`
	LastStep   *int   `json:"last_step,omitempty"`
	// SessionStatus is the status of a session that is over (410).
	SessionStatus string `json:"session_status,omitempty"`
	// MayHaveRun: the step sent last got no reply; it may have run (504).
	MayHaveRun bool `json:"may_have_run,omitempty"`
	// Steps are the results of the steps of this call that ran before the
	// error.
	Steps []StepResult `json:"steps,omitempty"`
}

// writeError answers err as a problem document; steps are the results of
// the call so far.
func writeError(w http.ResponseWriter, r *http.Request, err error, steps []StepResult) {
	p := &Problem{Steps: steps}
	var (
		ie *InputError
		le *LostError
		ee *EndedError
		be *BusyError
		ue *UnavailableError
	)
	switch {
	case errors.As(err, &ie):
		p.Type, p.Status, p.Field, p.Detail = api.ProblemInvalidRequest, http.StatusBadRequest, ie.Field, ie.Error()
	case errors.As(err, &le):
		gen, last := le.Generation, le.LastStep
		p.Type, p.Status, p.Detail = api.ProblemSessionLost, http.StatusConflict, err.Error()
		p.JobID, p.Generation, p.LastStep = le.JobID, &gen, &last
	case errors.As(err, &ee):
		p.Type, p.Status, p.Detail, p.SessionStatus = api.ProblemSessionOver, http.StatusGone, err.Error(), ee.Status
	case errors.Is(err, jobstore.ErrObservationLimit):
		p.Type, p.Status, p.Detail = api.ProblemConflict, http.StatusConflict, err.Error()
	case errors.Is(err, ErrNoObservations):
		p.Type, p.Status, p.Detail = api.ProblemNotImplemented, http.StatusNotImplemented, err.Error()
	case errors.As(err, &be):
		w.Header().Set("Retry-After", "5")
		p.Type, p.Status, p.Detail = api.ProblemNoPhone, http.StatusServiceUnavailable, be.Error()
	case errors.As(err, &ue):
		p.Type, p.Detail, p.MayHaveRun = api.ProblemAgentUnavailable, ue.Error(), ue.MayHaveRun
		p.Status = http.StatusServiceUnavailable
		if ue.MayHaveRun {
			p.Status = http.StatusGatewayTimeout
		}
	case errors.Is(err, ErrNotFound):
		p.Type, p.Status, p.Detail = api.ProblemNotFound, http.StatusNotFound, "no session "+r.PathValue("id")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		p.Type, p.Status, p.Detail = api.ProblemAgentUnavailable, http.StatusServiceUnavailable, err.Error()
	default:
		p.Type, p.Status, p.Detail = api.ProblemInternal, http.StatusInternalServerError, err.Error()
	}
	writeProblem(w, r, p)
}

func writeProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	p.Instance = r.URL.Path
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeBody decodes a JSON body strictly into v (unknown members, wrong
// types and trailing data are refused, naming the member); it writes the
// problem and returns false when it cannot.
func (h *Handler) decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	limit := h.MaxBodyBytes
	if limit <= 0 {
		limit = MaxBodyBytes
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		writeProblem(w, r, &Problem{Type: api.ProblemUnsupported, Status: http.StatusUnsupportedMediaType,
			Detail: fmt.Sprintf("Content-Type %q: send application/json", ct)})
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("trailing data after the JSON object")
		}
	}
	if err == nil {
		return true
	}
	var (
		mbe *http.MaxBytesError
		ute *json.UnmarshalTypeError
		se  *json.SyntaxError
	)
	switch {
	case errors.As(err, &mbe):
		writeProblem(w, r, &Problem{Type: api.ProblemTooLarge, Status: http.StatusRequestEntityTooLarge,
			Detail: fmt.Sprintf("request body is larger than the limit of %d bytes (api.max_body_bytes)", limit)})
	case errors.As(err, &ute):
		// A step's members are those of the protocol.Step it embeds: the
		// path names them without the embedded field ("steps.x").
		field := strings.ReplaceAll(ute.Field, ".Step.", ".")
		if field == "" {
			field = "body"
		}
		writeError(w, r, inputErr(field, "want %s, got JSON %s", ute.Type, ute.Value), nil)
	case errors.As(err, &se):
		writeError(w, r, inputErr("body", "invalid JSON at byte %d: %v", se.Offset, err), nil)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		if f == "" {
			writeError(w, r, inputErr("body", `unknown member ""`), nil)
			return false
		}
		writeError(w, r, inputErr(f, "unknown member"), nil)
	case errors.Is(err, io.EOF):
		writeError(w, r, inputErr("body", "empty: send a JSON object"), nil)
	default:
		writeError(w, r, inputErr("body", "%v", err), nil)
	}
	return false
}
