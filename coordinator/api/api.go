// Package api is the coordinator's HTTP JSON API for researchers' programs
// (docs/api.md): jobs submitted, listed, shown and cancelled over HTTP,
// agents listed, drained and resumed, with API tokens that carry scopes and
// projects. Its OpenAPI document is docs/openapi.yaml, served at
// GET /api/v1/openapi.json. Bad input is answered with an RFC 9457 problem
// document naming the field.
//
// Other packages mount their handlers in it (Options.Events, Artifacts,
// Sessions, MCP); they run after authentication, with the caller in the
// request's context (CallerFrom).
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule"
	"github.com/edgeagent/edgeagent/docs"
	"github.com/edgeagent/edgeagent/fencing"
	enrollwire "github.com/edgeagent/edgeagent/internal/enroll"
	"github.com/edgeagent/edgeagent/protocol"
)

// Prefix is the path every route of the API starts with.
const Prefix = "/api/v1/"

// Defaults of Options.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultRate         = 20
	DefaultBurst        = 40
	// MaxWait bounds the ?wait= of a job show.
	MaxWait = 5 * time.Minute
)

// Waiter waits for a job to end: Wait returns when the job is in an end
// state or when timeout passed (nil error either way), or with ctx's
// error. GET /api/v1/jobs/{id}?wait=D calls it before answering
// (docs/api.md, "Waiting for the end"); edgecoord serve mounts one on its
// event broker.
type Waiter interface {
	Wait(ctx context.Context, jobID string, timeout time.Duration) error
}

// Options configures the API handler.
type Options struct {
	// Store is the job store; it must implement jobstore.APIStore.
	Store jobstore.Store
	// Revoke tells a job's agent to stop after a cancel took its lease
	// away; nil: the agent stops at its next fenced call.
	Revoke func(tok fencing.Token, reason string) error
	// PushControl sends a control command to an agent (drain, resume) so
	// that it shows its state at once; nil: the store's flag alone holds
	// it, which the scheduler obeys anyway.
	PushControl func(ctx context.Context, agentID string, ctl protocol.Control) error
	// OfflineAfter judges which agents are online (fan-out, agent list).
	OfflineAfter time.Duration
	// Phones is the coordinator's rule of which phones a project may use
	// (coordinator.Server.Phones): a fan-out makes jobs only for phones
	// its project may use. Nil: every phone.
	Phones *coordinator.PhoneRule
	// Jobs gives what a submitted job leaves unset (deadline, attempts),
	// as for edgecoord job submit.
	Jobs config.CoordinatorJobs
	// Schedules bounds the schedules created (schedules.min_every).
	Schedules schedule.Limits
	// MaxBodyBytes bounds request bodies; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Rate and Burst bound each token's requests (per second, at once);
	// defaults DefaultRate and DefaultBurst.
	Rate  float64
	Burst int
	// Log receives one debug line per request (method, path, status,
	// token name; never a token) and the errors answered 500.
	Log zerolog.Logger
	// Now is the clock of the rate limiter; default time.Now.
	Now func() time.Time

	// Events, when set, serves GET /api/v1/jobs/{id}/events (after the
	// job's project was checked; JobFrom gives the job) and
	// GET /api/v1/events (after ?project=, when given, was checked against
	// the caller's projects; without it the stream is of all the caller's
	// projects).
	Events http.Handler
	// Waiter, when set, serves the ?wait= of GET /api/v1/jobs/{id}.
	Waiter Waiter
	// Artifacts, when set, serves GET /api/v1/jobs/{id}/artifacts (after
	// the job's project was checked).
	Artifacts http.Handler
	// Sessions, when set, serves /api/v1/sessions and everything under it.
	Sessions http.Handler
	// Streams bounds the event streams and long polls (per token, in
	// all) and ends those of a revoked token; nil: defaults, not shared.
	Streams *Streams
	// APKs, when set, keeps the APKs added with POST /api/v1/apks (the
	// coordinator's bucket); nil answers that route 501.
	APKs coordinator.APKBucket
	// Releases, when set, keeps the agent binaries added with
	// POST /api/v1/releases (the coordinator's bucket); nil answers that
	// route 501.
	Releases coordinator.ReleaseBucket
	// MaxAPKBytes bounds an APK's body; default protocol.MaxAPKSize.
	MaxAPKBytes int64
	// MaxReleaseBytes bounds a release binary's body; default
	// protocol.MaxReleaseSize.
	MaxReleaseBytes int64
	// MCP, when set, serves the Model Context Protocol endpoint at MCPPath
	// (docs/mcp.md) for tokens with scope read; its tools check the other
	// scopes and the projects themselves.
	MCP http.Handler
	// Enroll, when set, serves POST /api/v1/enroll (enroll.go), the one
	// route without a token; nil answers it 501.
	Enroll *EnrollOptions
}

// MCPPath is where Options.MCP is served.
const MCPPath = "/mcp"

// Handler serves the API under Prefix.
type Handler struct {
	opts  Options
	store apiStore
	log   zerolog.Logger
	mux   *http.ServeMux
	lim   *limiters
	now   func() time.Time
	// apkSlot lets one APK upload run at a time.
	apkSlot chan struct{}
}

// apiStore is the store with the API's tables.
type apiStore interface {
	jobstore.Store
	jobstore.APIStore
}

// New returns the API handler of opts.
func New(opts Options) (*Handler, error) {
	st, ok := opts.Store.(apiStore)
	if !ok {
		return nil, fmt.Errorf("new api: the store %T does not keep API tokens", opts.Store)
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Rate <= 0 {
		opts.Rate = DefaultRate
	}
	if opts.Burst <= 0 {
		opts.Burst = DefaultBurst
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxReleaseBytes <= 0 || opts.MaxReleaseBytes > protocol.MaxReleaseSize {
		opts.MaxReleaseBytes = protocol.MaxReleaseSize
	}
	if opts.MaxAPKBytes <= 0 || opts.MaxAPKBytes > protocol.MaxAPKSize {
		opts.MaxAPKBytes = protocol.MaxAPKSize
	}
	if opts.Streams == nil {
		opts.Streams = &Streams{}
	}
	h := &Handler{
		opts: opts, store: st, log: opts.Log, now: opts.Now,
		lim:     &limiters{rate: rate.Limit(opts.Rate), burst: opts.Burst, m: map[int64]*rate.Limiter{}},
		mux:     http.NewServeMux(),
		apkSlot: make(chan struct{}, 1),
	}
	h.routes()
	return h, nil
}

// route is one path's handlers by method, each with the scope it needs.
type route map[string]struct {
	scope string
	fn    func(w http.ResponseWriter, r *http.Request, c Caller)
}

func (h *Handler) routes() {
	h.mux.HandleFunc("/api/v1/openapi.json", h.serveSpec)
	h.handle("/api/v1/jobs", route{
		http.MethodGet:  {jobstore.ScopeRead, h.listJobs},
		http.MethodPost: {jobstore.ScopeSubmit, h.submitJobs},
	})
	h.handle("/api/v1/jobs/{id}", route{http.MethodGet: {jobstore.ScopeRead, h.showJob}})
	h.handle("/api/v1/jobs/{id}/cancel", route{http.MethodPost: {jobstore.ScopeOperate, h.cancelJob}})
	h.handle("/api/v1/jobs/{id}/events", route{http.MethodGet: {jobstore.ScopeRead, h.jobMount("events", func() http.Handler { return h.stream(h.opts.Events) })}})
	h.handle("/api/v1/jobs/{id}/artifacts", route{http.MethodGet: {jobstore.ScopeRead, h.jobMount("artifacts", func() http.Handler { return h.opts.Artifacts })}})
	h.handle("/api/v1/events", route{http.MethodGet: {jobstore.ScopeRead, func(w http.ResponseWriter, r *http.Request, c Caller) {
		// The project of a project stream is checked here like a job's:
		// another project's stream is a recorded 403.
		if p := r.URL.Query().Get("project"); p != "" {
			if err := jobstore.CheckProject(p); err != nil {
				WriteProblem(w, r, badParam("project", "%v", err))
				return
			}
			if !c.Sees(p) {
				h.deny(w, r, c, "", p)
				return
			}
		}
		h.mount("events", h.stream(h.opts.Events))(w, r, c)
	}}})
	sessions := func(w http.ResponseWriter, r *http.Request, c Caller) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !c.Has(jobstore.ScopeOperate) {
			WriteProblem(w, r, problem(http.StatusForbidden, ProblemForbidden, "", "token %s lacks scope operate", c.Name))
			return
		}
		h.mount("sessions", h.opts.Sessions)(w, r, c)
	}
	h.handleAny("/api/v1/sessions", jobstore.ScopeRead, sessions)
	h.handleAny("/api/v1/sessions/", jobstore.ScopeRead, sessions)
	h.handleAny(MCPPath, jobstore.ScopeRead, h.mount("mcp", h.opts.MCP))
	h.handle(ObservationsPattern, route{http.MethodGet: {jobstore.ScopeRead, h.listObservations}})
	h.handle("/api/v1/apks", route{
		http.MethodGet:  {jobstore.ScopeRead, h.listAPKs},
		http.MethodPost: {jobstore.ScopeAdmin, h.addAPK},
	})
	h.scheduleRoutes()
	h.releaseRoutes()
	h.mux.HandleFunc(enrollwire.Path, h.enroll)
	h.handle("/api/v1/agents", route{http.MethodGet: {jobstore.ScopeRead, h.listAgents}})
	h.handle("/api/v1/agents/{id}/drain", route{http.MethodPost: {jobstore.ScopeAdmin, h.drainAgent(true)}})
	h.handle("/api/v1/agents/{id}/resume", route{http.MethodPost: {jobstore.ScopeAdmin, h.drainAgent(false)}})
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteProblem(w, r, problem(http.StatusNotFound, ProblemNotFound, "", "no route %s %s (GET /api/v1/openapi.json lists them)", r.Method, r.URL.Path))
	})
}

// handle registers the methods of one path: authentication, the rate
// limit, then the scope of the method.
func (h *Handler) handle(pattern string, rt route) {
	allow := make([]string, 0, len(rt))
	for m := range rt {
		allow = append(allow, m)
	}
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		m, ok := rt[r.Method]
		if !ok && r.Method == http.MethodHead {
			m, ok = rt[http.MethodGet]
		}
		c, done := h.admit(w, r)
		if done {
			return
		}
		if !ok {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			WriteProblem(w, r, problem(http.StatusMethodNotAllowed, ProblemMethod, "", "%s does not take %s (allowed: %s)", r.URL.Path, r.Method, strings.Join(allow, ", ")))
			return
		}
		if !c.Has(m.scope) {
			WriteProblem(w, r, problem(http.StatusForbidden, ProblemForbidden, "", "token %s lacks scope %s, which %s %s needs", c.Name, m.scope, r.Method, r.URL.Path))
			return
		}
		m.fn(w, r, c)
	})
}

// handleAny registers a path for every method with one scope.
func (h *Handler) handleAny(pattern, scope string, fn func(w http.ResponseWriter, r *http.Request, c Caller)) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		c, done := h.admit(w, r)
		if done {
			return
		}
		if !c.Has(scope) {
			WriteProblem(w, r, problem(http.StatusForbidden, ProblemForbidden, "", "token %s lacks scope %s", c.Name, scope))
			return
		}
		fn(w, r, c)
	})
}

// admit authenticates r and takes it from its token's rate limit; done
// when the answer was written.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request) (Caller, bool) {
	c, p := h.authenticate(r)
	if p != nil {
		if p.Status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="edgecoord"`)
		}
		WriteProblem(w, r, p)
		return Caller{}, true
	}
	if !h.Admit(w, r, c) {
		return Caller{}, true
	}
	*r = *r.WithContext(WithCaller(r.Context(), c))
	if rec, ok := w.(*recorder); ok {
		rec.caller = c.Name
	}
	return c, false
}

// mount delegates to a mounted handler, or answers 501 when there is none.
func (h *Handler) mount(what string, mounted http.Handler) func(w http.ResponseWriter, r *http.Request, c Caller) {
	return func(w http.ResponseWriter, r *http.Request, c Caller) {
		if mounted == nil {
			WriteProblem(w, r, problem(http.StatusNotImplemented, ProblemNotImplemented, "", "this coordinator does not serve %s", what))
			return
		}
		mounted.ServeHTTP(w, r)
	}
}

// stream wraps a mounted stream handler in the stream caps (Streams);
// nil stays nil.
func (h *Handler) stream(mounted http.Handler) http.Handler {
	if mounted == nil {
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := CallerFrom(r.Context())
		release, done := h.openStream(w, r, c)
		if done {
			return
		}
		defer release()
		mounted.ServeHTTP(w, r)
	})
}

// Admit takes one request of c from its token's rate limit, as every API
// request is; false when the 429 with Retry-After was written. The
// dashboard calls it for its own requests (one limit per token across
// /api/, /mcp and /ui/).
func (h *Handler) Admit(w http.ResponseWriter, r *http.Request, c Caller) bool {
	if ok, secs := h.lim.allow(c.TokenID, h.now()); !ok {
		w.Header().Set("Retry-After", retryAfter(secs))
		WriteProblem(w, r, problem(http.StatusTooManyRequests, ProblemRateLimited, "", "token %s made more than %g requests per second (burst %d); retry after %s s", c.Name, h.opts.Rate, h.opts.Burst, retryAfter(secs)))
		return false
	}
	return true
}

// jobMount checks the job of the path (404, or 403 recorded) and then
// delegates to the mounted handler, with the job in the context (JobFrom).
func (h *Handler) jobMount(what string, mounted func() http.Handler) func(w http.ResponseWriter, r *http.Request, c Caller) {
	return func(w http.ResponseWriter, r *http.Request, c Caller) {
		j, ok := h.job(w, r, c)
		if !ok {
			return
		}
		*r = *r.WithContext(context.WithValue(r.Context(), jobKey{}, j))
		h.mount(what, mounted())(w, r, c)
	}
}

type jobKey struct{}

// JobFrom returns the job a mounted job handler serves, read and checked
// against the caller's projects before the handler was called.
func JobFrom(ctx context.Context) (jobstore.Job, bool) {
	j, ok := ctx.Value(jobKey{}).(jobstore.Job)
	return j, ok
}

// recorder keeps the status of a reply for the request's log line.
type recorder struct {
	http.ResponseWriter
	status int
	caller string
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Flush lets mounted streams (server-sent events) flush.
func (r *recorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the writer underneath.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// ServeHTTP serves the API. It logs one debug line per request, without
// the query string or any header.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.log.Error().Str("method", r.Method).Str("path", r.URL.Path).Msgf("api: panic: %v", v)
			if rec.status == 0 {
				WriteProblem(rec, r, problem(http.StatusInternalServerError, ProblemInternal, "", "internal error"))
			}
		}
		h.log.Debug().Str("method", r.Method).Str("path", r.URL.Path).Int("status", rec.status).
			Str("token_name", rec.caller).Dur("took", time.Since(start)).Msg("api request")
	}()
	if p := r.URL.Path; p == "" || p[0] != '/' || cleanPath(p) != p {
		// The mux would redirect to the clean path, with an HTML body.
		WriteProblem(rec, r, problem(http.StatusNotFound, ProblemNotFound, "", "no route %s %q: the path is not in canonical form", r.Method, p))
		return
	}
	h.mux.ServeHTTP(rec, r)
}

// cleanPath is path.Clean keeping a trailing slash.
func cleanPath(p string) string {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// serveSpec serves docs/openapi.yaml as JSON; it needs no token.
func (h *Handler) serveSpec(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		WriteProblem(w, r, problem(http.StatusMethodNotAllowed, ProblemMethod, "", "%s takes GET", r.URL.Path))
		return
	}
	spec, err := OpenAPIJSON()
	if err != nil {
		h.internal(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(spec)
}

var (
	specOnce sync.Once
	specJSON []byte
	specErr  error
)

// OpenAPIJSON returns docs/openapi.yaml converted to JSON.
func OpenAPIJSON() ([]byte, error) {
	specOnce.Do(func() {
		specJSON, specErr = yaml.YAMLToJSON(docs.OpenAPI)
		if specErr != nil {
			specErr = fmt.Errorf("convert openapi document: %w", specErr)
		}
	})
	return specJSON, specErr
}

// internal answers 500 and logs err.
func (h *Handler) internal(w http.ResponseWriter, r *http.Request, err error) {
	if clientGone(r) {
		h.log.Debug().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("api: client went away")
		return
	}
	h.log.Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("api: request failed")
	WriteProblem(w, r, problem(http.StatusInternalServerError, ProblemInternal, "", "internal error; the coordinator's log has the cause"))
}

// clientGone reports whether the client of r went away (its context is
// cancelled): what fails after that is not a coordinator error, and there
// is nobody to answer.
func clientGone(r *http.Request) bool { return r.Context().Err() != nil }

// yamlTypes are the media types of a job file sent as it is.
var yamlTypes = []string{"application/yaml", "application/x-yaml", "text/yaml"}

// decodeJobBody decodes a job: JSON as decodeBody does, or, with a YAML
// media type, a job file exactly as `edgecoord job submit -f` reads it
// (strict: unknown keys and duplicate keys are problems).
func (h *Handler) decodeJobBody(w http.ResponseWriter, r *http.Request, req *JobRequest) *Problem {
	return h.decodeFileBody(w, r, req, "job", func(data []byte) error { return ParseJobFile(data, req) })
}

// decodeFileBody decodes v as JSON, or, with a YAML media type, with
// parse as the CLI reads a file of that kind (what: "job", "schedule").
func (h *Handler) decodeFileBody(w http.ResponseWriter, r *http.Request, v any, what string, parse func([]byte) error) *Problem {
	mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	if !slices.Contains(yamlTypes, strings.TrimSpace(strings.ToLower(mt))) {
		return h.decodeBody(w, r, v, false)
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err != nil {
		return decodeProblem(err, h.opts.MaxBodyBytes)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return decodeProblem(errEmptyBody, h.opts.MaxBodyBytes)
	}
	if err := parse(data); err != nil {
		return problem(http.StatusBadRequest, ProblemInvalidRequest, "", "request body is not a valid %s file: %v", what, err)
	}
	return nil
}

// ParseJobFile decodes a job file (YAML, or JSON, which is YAML) strictly
// into req: unknown keys are errors, with their line and column. Its keys
// are those of POST /api/v1/jobs.
func ParseJobFile(data []byte, req *JobRequest) error {
	return yaml.UnmarshalWithOptions(data, req, yaml.Strict(), yaml.DisallowUnknownField())
}

// decodeBody decodes the JSON body of r into v strictly: unknown fields,
// wrong types, trailing data and a body over the limit are problems.
func (h *Handler) decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) *Problem {
	return decodeLimited(w, r, v, optional, h.opts.MaxBodyBytes)
}

// decodeLimited is decodeBody with a body of at most limit bytes.
func decodeLimited(w http.ResponseWriter, r *http.Request, v any, optional bool, limit int64) *Problem {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, _ := strings.Cut(ct, ";")
		if mt = strings.TrimSpace(strings.ToLower(mt)); mt != "application/json" {
			return problem(http.StatusUnsupportedMediaType, ProblemUnsupported, "", "Content-Type %s: want application/json", mt)
		}
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	data, err := io.ReadAll(body)
	if err != nil {
		return decodeProblem(err, limit)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		if optional {
			return nil
		}
		return decodeProblem(errEmptyBody, limit)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeProblem(err, limit)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return decodeProblem(errTrailing, limit)
	}
	return nil
}
