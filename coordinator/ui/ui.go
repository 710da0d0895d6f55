// Package ui is the coordinator's web dashboard (docs/ui.md): pages
// rendered on the server with html/template from files embedded in the
// binary, served by edgecoord serve under /ui/ on the API's listener. A
// person logs in with an API token, exchanged for a session cookie; scripts
// may send the token as Authorization: Bearer instead. The token's scopes
// and projects (coordinator/api) decide what is shown and which actions are
// offered. The one script, static/app.js, keeps the job pages live with
// server-sent events from the coordinator's event broker.
package ui

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/events"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// Prefix is the path every page of the dashboard starts with.
const Prefix = "/ui/"

// DefaultSessionTTL is how long a login lasts when Options.SessionTTL is
// zero.
const DefaultSessionTTL = 12 * time.Hour

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Store is the store the dashboard reads and acts on.
type Store interface {
	jobstore.Store
	jobstore.APIStore
	jobstore.UIStore
}

// Options configures the dashboard.
type Options struct {
	// Store must implement Store.
	Store jobstore.Store
	// Broker, when set, feeds the live updates of the job pages; without
	// it GET /ui/events answers 503 and the pages are only as fresh as
	// their last load.
	Broker *events.Broker
	// Admit, when set, takes each request of a logged-in visitor from its
	// token's rate limit (the API's, api.Handler.Admit); false when it
	// answered 429.
	Admit func(w http.ResponseWriter, r *http.Request, c api.Caller) bool
	// Streams bounds the live update streams (/ui/events) with the API's
	// (api.max_streams_per_token, api.max_streams) and ends those of a
	// revoked token; nil: no cap.
	Streams *api.Streams
	// Presigner makes the GET URLs of artifacts (screenshots, recordings,
	// downloads, the operation log); nil: no storage, no artifacts shown.
	Presigner coordinator.Presigner
	// StorageOrigin is the scheme and host of the presigned URLs
	// (http(s)://host[:port]), allowed for images and media by the
	// pages' Content-Security-Policy.
	StorageOrigin string
	// URLExpiry is the validity of those URLs (events.DefaultURLExpiry when
	// zero).
	URLExpiry time.Duration
	// OfflineAfter judges which agents are online, on the database clock.
	OfflineAfter time.Duration
	// Revoke and PushControl are the API's (api.Options): the same calls
	// follow a cancel and a drain made here.
	Revoke      func(tok fencing.Token, reason string) error
	PushControl func(ctx context.Context, agentID string, ctl protocol.Control) error
	// SessionTTL is how long a login lasts (DefaultSessionTTL when zero).
	SessionTTL time.Duration
	// SecureCookie sets Secure on the session cookie even when a request
	// did not come over TLS (a TLS-terminating proxy in front); a request
	// that came over TLS always gets it.
	SecureCookie bool
	// Phones is the coordinator's rule of which phones a project may use:
	// the fleet page says which phones the visitor's projects may not use,
	// and why. Nil: every phone.
	Phones *coordinator.PhoneRule
	// PublicOrigin is the origin browsers reach the dashboard at through a
	// reverse proxy (scheme://host[:port], api.public_url): a form whose
	// Origin names it is accepted whatever Host the proxy forwards. Empty:
	// only the request's own Host.
	PublicOrigin string
	// ObservationRows bounds the observations a project's observations
	// page reads, its newest (DefaultObservationRows when zero).
	ObservationRows int
	// HTTPClient reads the operation logs from storage (a client with a
	// 10 s timeout when nil).
	HTTPClient *http.Client
	Log        zerolog.Logger
}

// Handler serves the dashboard under Prefix.
type Handler struct {
	opts  Options
	store Store
	log   zerolog.Logger
	mux   *http.ServeMux
	pages map[string]*template.Template
	csp   string
	// publicOrigin is Options.PublicOrigin, normalised ("" when unset).
	publicOrigin string
	client       *http.Client
	bufs         sync.Pool
	logins       loginLimits
	// devices keeps the agents' decoded device lists between renders of the
	// fleet page (devicememo.go).
	devices DeviceMemo
	// eventJobs shares the read of an event's job among the live streams.
	eventJobs eventJobs
}

// New returns the dashboard of opts.
func New(opts Options) (*Handler, error) {
	st, ok := opts.Store.(Store)
	if !ok {
		return nil, fmt.Errorf("new dashboard: the store %T does not keep dashboard sessions", opts.Store)
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.URLExpiry <= 0 {
		opts.URLExpiry = events.DefaultURLExpiry
	}
	h := &Handler{opts: opts, store: st, log: opts.Log, mux: http.NewServeMux(), client: opts.HTTPClient}
	if h.client == nil {
		h.client = &http.Client{Timeout: 10 * time.Second}
	}
	h.bufs.New = func() any { return new(bytes.Buffer) }
	var err error
	if h.pages, err = parsePages(); err != nil {
		return nil, err
	}
	storage := ""
	if opts.StorageOrigin != "" {
		u, err := url.Parse(opts.StorageOrigin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
			return nil, fmt.Errorf("new dashboard: storage origin %q: want http(s)://host[:port]", opts.StorageOrigin)
		}
		// Screenshots and recordings load from the storage server through
		// presigned URLs: its origin is allowed for images and media.
		storage = " " + u.Scheme + "://" + u.Host
	}
	if opts.PublicOrigin != "" {
		u, err := url.Parse(opts.PublicOrigin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return nil, fmt.Errorf("new dashboard: public origin %q: want http(s)://host[:port]", opts.PublicOrigin)
		}
		h.publicOrigin = strings.ToLower(u.Scheme + "://" + u.Host)
	}
	h.csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'" + storage +
		"; media-src 'self'" + storage + "; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
	h.routes()
	return h, nil
}

// stamp is a time as the pages show it: UTC to the second.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// ago is a duration as the pages show it.
func ago(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return d.Round(time.Second).String() + " ago"
}

var funcs = template.FuncMap{
	"time": stamp,
	"timep": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"ago":     ago,
	"path":    url.PathEscape,
	"join":    strings.Join,
	"lower":   strings.ToLower,
	"utcTime": utcTime,
	"inc":     func(i int) int { return i + 1 },
}

// pageNames are the templates that are pages, each parsed with the layout.
var pageNames = []string{"login", "fleet", "jobs", "job", "observations", "schedules", "schedule", "rollouts", "confirm", "message"}

func parsePages() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("parse dashboard template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// IconPath is the dashboard's icon, linked from every page
// (<link rel="icon">); FaviconPath, where browsers look for a site's icon
// by themselves, redirects to it.
const (
	IconPath    = Prefix + "static/favicon.svg"
	FaviconPath = "/favicon.ico"
)

// Serves reports whether the dashboard answers path: /ui, everything under
// Prefix, and FaviconPath. A server that puts the dashboard beside other
// handlers sends it those paths.
func Serves(path string) bool {
	return path == "/ui" || strings.HasPrefix(path, Prefix) || path == FaviconPath
}

// Routes are the dashboard's routes, as docs/ui.md lists them.
func (h *Handler) routes() {
	h.mux.HandleFunc("GET /ui/{$}", h.root)
	h.mux.HandleFunc("GET /ui/login", h.loginPage)
	h.mux.HandleFunc("POST /ui/login", h.login)
	h.mux.HandleFunc("POST /ui/logout", h.logout)
	h.mux.HandleFunc("GET /ui/fleet", h.page(jobstore.ScopeRead, h.fleet))
	h.mux.HandleFunc("GET /ui/jobs", h.page(jobstore.ScopeRead, h.jobs))
	h.mux.HandleFunc("GET /ui/jobs/{id}", h.page(jobstore.ScopeRead, h.job))
	h.mux.HandleFunc("GET /ui/jobs/{id}/artifacts/{gen}/{name}", h.page(jobstore.ScopeRead, h.artifact))
	h.mux.HandleFunc("GET /ui/projects/{project}/observations", h.page(jobstore.ScopeRead, h.observations))
	h.mux.HandleFunc("GET /ui/schedules", h.page(jobstore.ScopeRead, h.schedules))
	h.mux.HandleFunc("GET /ui/schedules/{id}", h.page(jobstore.ScopeRead, h.schedule))
	h.mux.HandleFunc("GET /ui/rollouts", h.page(jobstore.ScopeRead, h.rollouts))
	h.mux.HandleFunc("GET /ui/events", h.page(jobstore.ScopeRead, h.live))
	h.mux.HandleFunc("GET /ui/agents/{id}/drain", h.page(jobstore.ScopeAdmin, h.confirmDrain(true)))
	h.mux.HandleFunc("POST /ui/agents/{id}/drain", h.action(jobstore.ScopeAdmin, h.drain(true)))
	h.mux.HandleFunc("GET /ui/agents/{id}/resume", h.page(jobstore.ScopeAdmin, h.confirmDrain(false)))
	h.mux.HandleFunc("POST /ui/agents/{id}/resume", h.action(jobstore.ScopeAdmin, h.drain(false)))
	h.mux.HandleFunc("GET /ui/jobs/{id}/cancel", h.page(jobstore.ScopeOperate, h.confirmCancel))
	h.mux.HandleFunc("POST /ui/jobs/{id}/cancel", h.action(jobstore.ScopeOperate, h.cancel))
	h.mux.HandleFunc("GET /ui/schedules/{id}/pause", h.page(jobstore.ScopeOperate, h.confirmPause(true)))
	h.mux.HandleFunc("POST /ui/schedules/{id}/pause", h.action(jobstore.ScopeOperate, h.pause(true)))
	h.mux.HandleFunc("GET /ui/schedules/{id}/resume", h.page(jobstore.ScopeOperate, h.confirmPause(false)))
	h.mux.HandleFunc("POST /ui/schedules/{id}/resume", h.action(jobstore.ScopeOperate, h.pause(false)))
	h.mux.HandleFunc("GET /ui/effects/resolve", h.page(jobstore.ScopeOperate, h.confirmResolve))
	h.mux.HandleFunc("POST /ui/effects/resolve", h.action(jobstore.ScopeOperate, h.resolve))
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix("/ui/static/", http.FileServerFS(static))
	h.mux.Handle("GET /ui/static/{file}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	// Browsers ask for /favicon.ico when a page names no icon (an image
	// opened on its own, an old browser); the pages link IconPath.
	h.mux.HandleFunc("GET "+FaviconPath, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, IconPath, http.StatusFound)
	})
	h.mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		h.message(w, r, nil, http.StatusNotFound, "Not found", fmt.Sprintf("The dashboard has no page %s %s.", r.Method, r.URL.Path))
	})
}

// ServeHTTP serves the dashboard: every answer carries the security
// headers of docs/ui.md.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", h.csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.URL.Path == "/ui" {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.log.Error().Str("method", r.Method).Str("path", r.URL.Path).Msgf("ui: panic: %v", v)
			http.Error(w, "internal error", http.StatusInternalServerError)
		}
	}()
	h.mux.ServeHTTP(w, r)
}

// root sends a visitor to the fleet, or to the login page without a
// session.
func (h *Handler) root(w http.ResponseWriter, r *http.Request) {
	if _, ok, _ := h.authenticate(r); ok {
		http.Redirect(w, r, "/ui/fleet", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// view is what every page's template gets.
type view struct {
	Title string
	// Caller is nil on the login page.
	Caller *caller
	// Live names the live updates app.js starts: "jobs", "job" or "".
	Live  string
	JobID string
	Data  any
}

// CanOperate and CanAdmin tell the templates which actions to offer.
func (v view) CanOperate() bool { return v.Caller != nil && v.Caller.Has(jobstore.ScopeOperate) }
func (v view) CanAdmin() bool   { return v.Caller != nil && v.Caller.Has(jobstore.ScopeAdmin) }

// render writes page name with v, status code.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, code int, name string, v view) {
	buf := h.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer h.bufs.Put(buf)
	if err := h.pages[name].ExecuteTemplate(buf, "layout", v); err != nil {
		h.log.Error().Err(err).Str("page", name).Msg("ui: render page")
		http.Error(w, "internal error: rendering the page failed; the coordinator's log has the cause", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// message answers with a page that says one thing.
type messageData struct {
	Text string
	Back string
}

func (h *Handler) message(w http.ResponseWriter, r *http.Request, c *caller, code int, title, text string) {
	h.render(w, r, code, "message", view{Title: title, Caller: c, Data: messageData{Text: text}})
}

// internal answers 500 and logs err.
func (h *Handler) internal(w http.ResponseWriter, r *http.Request, c *caller, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return
	}
	h.log.Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("ui: request failed")
	h.message(w, r, c, http.StatusInternalServerError, "Error", "The request failed; the coordinator's log has the cause.")
}
