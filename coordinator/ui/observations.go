package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// DefaultObservationRows is how many of a project's newest observations
// its observations page reads at most (Options.ObservationRows): the page
// shows the latest value of each name and phone among them, and says when
// older rows were left unread.
const DefaultObservationRows = 10000

// observationReadPage is how many rows one store call of the observations
// page reads (a variable for the tests of its paging).
var observationReadPage = 2500

// evidenceLink is one evidence artifact of an observation, as a page shows
// it.
type evidenceLink struct {
	Name string
	// URL is the dashboard's artifact URL (a redirect to a presigned
	// one); "" without storage.
	URL string
	// Kind is "image" (a screenshot, shown as a thumbnail), "dump" (the
	// UI dump) or "file".
	Kind string
}

// observationRow is one observation on a page.
type observationRow struct {
	jobstore.ObservationRow
	JobURL   string
	Evidence []evidenceLink
}

// App is the app's package and version as a cell shows them.
func (o observationRow) App() string {
	s := o.AppPackage
	if o.AppVersion != "" {
		s += " " + o.AppVersion
	}
	if o.AppCode != 0 {
		s += " (" + strconv.FormatInt(o.AppCode, 10) + ")"
	}
	return s
}

// localeRE is the shape of a language tag (BCP 47), as the agent reads a
// phone's locale.
var localeRE = regexp.MustCompile(`^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$`)

// Lang is the language of the text as displayed, for its lang attribute:
// the phone's locale (ja-JP: Japanese glyphs for Han characters), "" when
// unknown or not a language tag.
func (o observationRow) Lang() string {
	if localeRE.MatchString(o.Locale) {
		return o.Locale
	}
	return ""
}

// evidenceKind tells a screenshot and a UI dump from other evidence by the
// artifact's name, as the agent names its captures (.png, .xml).
func evidenceKind(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".png", ".jpg", ".jpeg", ".webp", ".gif":
		return "image"
	case ".xml":
		return "dump"
	}
	return "file"
}

// newObservationRow makes the page's row of o: its evidence links go
// through the dashboard's artifact route (artifactURL), which checks the
// visitor and redirects to a presigned URL, so a page never holds a storage
// credential and its links outlive the presigned URLs' expiry.
func (h *Handler) newObservationRow(o jobstore.ObservationRow) observationRow {
	r := observationRow{ObservationRow: o, JobURL: "/ui/jobs/" + url.PathEscape(o.JobID)}
	for _, e := range o.Evidence {
		l := evidenceLink{Name: e.Name, Kind: evidenceKind(e.Name)}
		if h.opts.Presigner != nil {
			l.URL = artifactURL(o.JobID, o.Generation, e.Name)
		}
		r.Evidence = append(r.Evidence, l)
	}
	// The screenshot first: the thumbnail heads the cell, the dump's link
	// under it.
	slices.SortStableFunc(r.Evidence, func(a, b evidenceLink) int {
		return cmpBool(b.Kind == "image", a.Kind == "image")
	})
	return r
}

type observationsData struct {
	Project string
	// Rows are the latest observation of each name and phone among those
	// read, by name and phone.
	Rows []observationRow
	// Read is how many observations were read; Cut: more, older ones were
	// left unread (Limit is the bound), the oldest read accepted at Oldest.
	Read   int
	Cut    bool
	Limit  int
	Oldest time.Time
	// The filter as given.
	Name, Phone string
	Error       string
	NoStorage   bool
	// NoStore: the store keeps no observations.
	NoStore bool
}

// observationFilterText reads a filter field of the observations page:
// printable UTF-8 of at most most bytes, as the API's route takes it.
func observationFilterText(name, v string, most int) (string, error) {
	v = strings.TrimSpace(v)
	if len(v) > most {
		return "", fmt.Errorf("%s: %d bytes, at most %d", name, len(v), most)
	}
	if !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("%s: not printable UTF-8", name)
	}
	return v, nil
}

// observations is GET /ui/projects/{project}/observations: the latest
// value of each observation name and phone among the project's newest
// Options.ObservationRows observations, filtered by name and phone. A
// project the visitor's token does not cover is answered 404 whether it
// exists or not, without its name, and recorded like the API's refusals.
func (h *Handler) observations(w http.ResponseWriter, r *http.Request, c *caller) {
	project := r.PathValue("project")
	if err := jobstore.CheckProject(project); err != nil {
		h.message(w, r, c, http.StatusBadRequest, "Bad request", "project: not a project name (1 to 64 of [A-Za-z0-9_.-], starting with a letter or digit)")
		return
	}
	if !c.Sees(project) {
		h.deny(r, c, "", project)
		h.message(w, r, c, http.StatusNotFound, "Not found", fmt.Sprintf("Token %s covers no such project.", c.Name))
		return
	}
	q := r.URL.Query()
	d := observationsData{Project: project, Limit: h.observationRows(), NoStorage: h.opts.Presigner == nil}
	v := view{Title: "Observations of " + project, Caller: c, Data: &d}
	var err error
	if d.Name, err = observationFilterText("name", q.Get("name"), 64); err == nil {
		d.Phone, err = observationFilterText("phone", q.Get("phone"), 256)
	}
	if err != nil {
		d.Error = err.Error()
		d.Name, d.Phone = "", ""
		h.render(w, r, http.StatusBadRequest, "observations", v)
		return
	}
	store, ok := h.opts.Store.(jobstore.ObservationStore)
	if !ok {
		d.NoStore = true
		h.render(w, r, http.StatusNotImplemented, "observations", v)
		return
	}
	if err := h.latestObservations(r.Context(), store, &d); err != nil {
		h.internal(w, r, c, err)
		return
	}
	h.render(w, r, http.StatusOK, "observations", v)
}

func (h *Handler) observationRows() int {
	if h.opts.ObservationRows > 0 {
		return h.opts.ObservationRows
	}
	return DefaultObservationRows
}

// latestObservations reads the project's newest d.Limit accepted
// observations that match d's filter, newest first, a page at a time, and
// keeps the first of each name and phone: the latest. A row past the
// bound is asked for, to tell a project of exactly d.Limit rows from one
// that was cut.
func (h *Handler) latestObservations(ctx context.Context, store jobstore.ObservationStore, d *observationsData) error {
	type key struct{ name, phone string }
	latest := map[key]jobstore.ObservationRow{}
	f := jobstore.ObservationFilter{Project: d.Project, Name: d.Name, Phone: d.Phone, Desc: true}
	for {
		f.Limit = min(observationReadPage, d.Limit+1-d.Read)
		rows, err := store.ListObservations(ctx, f)
		if err != nil {
			return err
		}
		for _, o := range rows {
			if d.Read == d.Limit {
				d.Cut = true
				break
			}
			d.Read++
			d.Oldest = o.AcceptedAt
			if _, ok := latest[key{o.Name, o.PhoneSerial}]; !ok {
				latest[key{o.Name, o.PhoneSerial}] = o
			}
		}
		if d.Cut || len(rows) < f.Limit {
			break
		}
		f.Before = rows[len(rows)-1].ID
	}
	d.Rows = make([]observationRow, 0, len(latest))
	for _, o := range latest {
		d.Rows = append(d.Rows, h.newObservationRow(o))
	}
	slices.SortFunc(d.Rows, func(a, b observationRow) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.PhoneSerial, b.PhoneSerial)
	})
	return nil
}

// jobObservations reads the observations of job j for its page: the
// accepted ones and the refused ones of stale generations, by id, at most
// jobstore.MaxObservationPage (a job keeps at most one accepted result's,
// protocol.MaxObservations, and jobstore.MaxRefusedObservations refused
// ones); none when the store keeps no observations.
func (h *Handler) jobObservations(ctx context.Context, jobID, project string) (rows []observationRow, cut bool, err error) {
	store, ok := h.opts.Store.(jobstore.ObservationStore)
	if !ok {
		return nil, false, nil
	}
	got, err := store.ListObservations(ctx, jobstore.ObservationFilter{Project: project, JobID: jobID, All: true, Limit: jobstore.MaxObservationPage})
	if err != nil {
		return nil, false, err
	}
	rows = make([]observationRow, 0, len(got))
	for _, o := range got {
		rows = append(rows, h.newObservationRow(o))
	}
	return rows, len(got) == jobstore.MaxObservationPage, nil
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
