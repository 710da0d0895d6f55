package main

import (
	"net/http"
	"strings"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/session"
)

// newSessions returns the handler of /api/v1/sessions (docs/sessions.md)
// over the session manager m, mounted in the API as api.Options.Sessions:
// the caller is the API's (its projects; operate scope for everything but
// GET), and a session of another project is refused and recorded like the
// API's other 403s.
func newSessions(cfg *config.Coordinator, store jobstore.Store, m *session.Manager, log zerolog.Logger) http.Handler {
	h := session.NewHandler(m, func(r *http.Request) (session.Caller, bool) {
		c, ok := api.CallerFrom(r.Context())
		if !ok {
			return session.Caller{}, false
		}
		return session.Caller{Name: c.Name, Projects: c.Projects, CanOperate: c.Has(jobstore.ScopeOperate)}, true
	})
	h.MaxBodyBytes = cfg.API.MaxBodyBytes.Int64()
	denials, _ := store.(jobstore.APIStore)
	h.OnForbidden = func(r *http.Request, c session.Caller, project, _ string) {
		if project == "" || denials == nil {
			return // a missing scope, which the API does not record either
		}
		jobID := ""
		if rest, ok := strings.CutPrefix(r.URL.Path, session.PathPrefix+"/"); ok {
			id, _, _ := strings.Cut(rest, "/")
			jobID, _ = session.JobOf(id)
		}
		if err := denials.RecordAPIDenial(r.Context(), jobstore.APIDenial{
			TokenName: c.Name, Method: r.Method, Route: r.URL.Path, JobID: jobID, Project: project,
		}); err != nil {
			log.Error().Err(err).Msg("api: record denial")
		}
		log.Warn().Str("token_name", c.Name).Str("method", r.Method).Str("path", r.URL.Path).Str("project", project).Msg("api: refused a request for another project")
	}
	return h
}
