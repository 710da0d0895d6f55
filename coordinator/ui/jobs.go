package ui

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// PageSize is how many jobs the job list shows per page.
const PageSize = 50

// jobRow is one job in the list.
type jobRow struct {
	ID          string
	Status      string
	Project     string
	Agent       string
	Phone       string
	Generation  int64
	Attempts    int
	SubmittedBy string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

func newJobRow(j jobstore.Job) jobRow {
	agent, _, _ := splitOwner(j.WorkerID)
	return jobRow{ID: j.ID, Status: j.Status, Project: j.Project, Agent: agent, Phone: j.Device, Generation: j.Generation,
		Attempts: j.Attempts, SubmittedBy: j.SubmittedBy, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt}
}

type jobsData struct {
	Jobs     []jobRow
	Statuses []string
	// The filter as given.
	Status, Project, Agent, Phone string
	Error                         string
	// Next is the URL of the next page, "" on the last one.
	Next string
	// First: this is the first page, where new jobs appear live.
	First bool
}

func encodeCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("u1:" + strconv.FormatInt(seq, 10)))
}

func decodeCursor(s string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		if rest, ok := strings.CutPrefix(string(b), "u1:"); ok {
			if n, err := strconv.ParseInt(rest, 10, 64); err == nil && n > 0 {
				return n, nil
			}
		}
	}
	return 0, errors.New("cursor: not a cursor of this page; follow the Next link as it is")
}

// jobs is GET /ui/jobs: the caller's jobs newest first, filtered by
// status, project, agent and phone, PageSize per page.
func (h *Handler) jobs(w http.ResponseWriter, r *http.Request, c *caller) {
	q := r.URL.Query()
	d := jobsData{Statuses: jobstore.Statuses, Status: strings.ToUpper(strings.TrimSpace(q.Get("status"))),
		Project: strings.TrimSpace(q.Get("project")), Agent: strings.TrimSpace(q.Get("agent")), Phone: strings.TrimSpace(q.Get("phone"))}
	f := jobstore.JobPageFilter{Projects: c.Projects, AgentID: d.Agent, Phone: d.Phone, Limit: PageSize}
	bad := func(msg string) {
		d.Error = msg
		h.render(w, r, http.StatusBadRequest, "jobs", view{Title: "Jobs", Caller: c, Data: d})
	}
	if d.Status != "" {
		if !slices.Contains(jobstore.Statuses, d.Status) {
			bad(fmt.Sprintf("status: unknown status %q (want one of %s)", d.Status, strings.Join(jobstore.Statuses, ", ")))
			return
		}
		f.Statuses = []string{d.Status}
	}
	if d.Project != "" {
		if err := jobstore.CheckProject(d.Project); err != nil {
			bad("project: " + err.Error())
			return
		}
		if !c.Sees(d.Project) {
			h.deny(r, c, "", d.Project)
			bad(fmt.Sprintf("project: token %s does not cover project %s", c.Name, d.Project))
			return
		}
		f.Projects = []string{d.Project}
	}
	if s := q.Get("cursor"); s != "" {
		n, err := decodeCursor(s)
		if err != nil {
			bad(err.Error())
			return
		}
		f.After = n
	}
	d.First = f.After == 0
	page, err := h.store.ListJobPage(r.Context(), f)
	if err != nil {
		h.internal(w, r, c, err)
		return
	}
	d.Jobs = make([]jobRow, 0, len(page.Jobs))
	for _, j := range page.Jobs {
		d.Jobs = append(d.Jobs, newJobRow(j))
	}
	if page.Next > 0 {
		nq := url.Values{}
		for k, v := range map[string]string{"status": d.Status, "project": d.Project, "agent": d.Agent, "phone": d.Phone} {
			if v != "" {
				nq.Set(k, v)
			}
		}
		nq.Set("cursor", encodeCursor(page.Next))
		d.Next = "/ui/jobs?" + nq.Encode()
	}
	h.render(w, r, http.StatusOK, "jobs", view{Title: "Jobs", Caller: c, Live: "jobs", Data: d})
}

// deny records that the caller asked for another project's job or jobs,
// as the API records it.
func (h *Handler) deny(r *http.Request, c *caller, jobID, project string) {
	if err := h.store.RecordAPIDenial(r.Context(), jobstore.APIDenial{
		TokenName: c.Name, Method: r.Method, Route: r.URL.Path, JobID: jobID, Project: project,
	}); err != nil {
		h.log.Error().Err(err).Msg("ui: record denial")
	}
	h.log.Warn().Str("token_name", c.Name).Str("path", r.URL.Path).Str("project", project).Msg("ui: refused a request for another project")
}

// visibleJob reads the job of the path; it answers 404 (and records the
// denial) for a job of a project the caller does not see, as for an
// unknown one.
func (h *Handler) visibleJob(w http.ResponseWriter, r *http.Request, c *caller, id string) (jobstore.Job, bool) {
	j, err := h.store.Get(r.Context(), id)
	if err == nil && !c.Sees(j.Project) {
		h.deny(r, c, j.ID, j.Project)
		err = jobstore.ErrNotFound
	}
	if errors.Is(err, jobstore.ErrNotFound) {
		h.message(w, r, c, http.StatusNotFound, "Not found", fmt.Sprintf("No job %s among the projects of token %s.", id, c.Name))
		return jobstore.Job{}, false
	}
	if err != nil {
		h.internal(w, r, c, err)
		return jobstore.Job{}, false
	}
	return j, true
}

// artifactURL is the dashboard's URL of an artifact, which redirects to a
// presigned GET URL.
func artifactURL(jobID string, gen int64, name string) string {
	return "/ui/jobs/" + url.PathEscape(jobID) + "/artifacts/" + strconv.FormatInt(gen, 10) + "/" + url.PathEscape(name)
}

// artifact is GET /ui/jobs/{id}/artifacts/{gen}/{name}: a redirect to a
// presigned GET URL of the artifact, valid URLExpiry.
func (h *Handler) artifact(w http.ResponseWriter, r *http.Request, c *caller) {
	if h.opts.Presigner == nil {
		http.Error(w, "artifact storage is not configured", http.StatusServiceUnavailable)
		return
	}
	gen, err := strconv.ParseInt(r.PathValue("gen"), 10, 64)
	if err != nil || gen < 1 {
		http.Error(w, "generation: want a positive integer", http.StatusBadRequest)
		return
	}
	j, ok := h.visibleJob(w, r, c, r.PathValue("id"))
	if !ok {
		return
	}
	recs, err := h.store.Artifacts(r.Context(), j.ID, gen)
	if err != nil {
		h.internal(w, r, c, err)
		return
	}
	name := r.PathValue("name")
	for _, a := range recs {
		if a.Name == name {
			u, err := h.opts.Presigner.PresignGet(r.Context(), a.Key, h.opts.URLExpiry)
			if err != nil {
				h.internal(w, r, c, err)
				return
			}
			w.Header().Set("Cache-Control", "private, max-age=60")
			http.Redirect(w, r, u, http.StatusFound)
			return
		}
	}
	h.message(w, r, c, http.StatusNotFound, "Not found", fmt.Sprintf("Job %s has no artifact %s under generation %d.", j.ID, name, gen))
}
