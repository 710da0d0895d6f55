package api

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgeagent/edgeagent/coordinator/dataset"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// ObservationsPattern is the route of a project's dataset of observations
// (docs/dataset.md).
const ObservationsPattern = "/api/v1/projects/{project}/observations"

// Paging of GET /api/v1/projects/{project}/observations?format=json, and
// the pages a streamed export (csv, jsonl, parquet) reads from the store.
const (
	DefaultObservationLimit = 100
	MaxObservationLimit     = 1000
	exportPage              = 1000
)

// Formats of the dataset.
const (
	FormatJSON    = "json"
	FormatCSV     = "csv"
	FormatJSONL   = "jsonl"
	FormatParquet = "parquet"
)

// ObservationFormats are the formats the route serves, in the order its
// errors list them.
var ObservationFormats = []string{FormatJSON, FormatCSV, FormatJSONL, FormatParquet}

// Content types of the streamed formats.
const (
	ContentTypeCSV     = "text/csv; charset=utf-8; header=present"
	ContentTypeJSONL   = "application/x-ndjson"
	ContentTypeParquet = "application/vnd.apache.parquet"
)

// ObservationColumns are the dataset's columns in their order: the CSV
// header, and the members of every row of the JSON formats
// (docs/dataset.md, "Columns").
var ObservationColumns = []string{
	"id", "project", "job_id", "generation", "owner", "agent_id", "phone_serial", "phone_model", "phone_sdk",
	"phone_platform", "phone_os_version", "step", "name", "raw", "value", "parse", "currency", "tax", "bounds", "selector",
	"app_package", "app_version", "app_version_code", "locale", "time_zone",
	"observed_at", "accepted_at", "evidence", "accepted", "write_event_id",
}

// ObservationView is one row of the dataset as the API shows it
// (docs/openapi.yaml, schema Observation); its members are
// ObservationColumns in order. Unknown values are null.
type ObservationView struct {
	ID             int64                          `json:"id"`
	Project        string                         `json:"project"`
	JobID          string                         `json:"job_id"`
	Generation     int64                          `json:"generation"`
	Owner          string                         `json:"owner"`
	AgentID        string                         `json:"agent_id"`
	PhoneSerial    string                         `json:"phone_serial"`
	PhoneModel     string                         `json:"phone_model"`
	PhoneSDK       *int                           `json:"phone_sdk"`
	PhonePlatform  string                         `json:"phone_platform"`
	PhoneOSVersion string                         `json:"phone_os_version"`
	Step           int                            `json:"step"`
	Name           string                         `json:"name"`
	Raw            string                         `json:"raw"`
	Value          string                         `json:"value"`
	Parse          string                         `json:"parse"`
	Currency       string                         `json:"currency"`
	Tax            string                         `json:"tax"`
	Bounds         [4]int                         `json:"bounds"`
	Selector       string                         `json:"selector"`
	AppPackage     string                         `json:"app_package"`
	AppVersion     string                         `json:"app_version"`
	AppVersionCode *int64                         `json:"app_version_code"`
	Locale         string                         `json:"locale"`
	TimeZone       string                         `json:"time_zone"`
	ObservedAt     *time.Time                     `json:"observed_at"`
	AcceptedAt     time.Time                      `json:"accepted_at"`
	Evidence       []jobstore.ObservationEvidence `json:"evidence"`
	Accepted       bool                           `json:"accepted"`
	WriteEventID   int64                          `json:"write_event_id"`
}

// NewObservationView returns the view of a stored row.
func NewObservationView(o jobstore.ObservationRow) ObservationView {
	v := ObservationView{
		ID: o.ID, Project: o.Project, JobID: o.JobID, Generation: o.Generation, Owner: o.Owner, AgentID: o.AgentID,
		PhoneSerial: o.PhoneSerial, PhoneModel: o.PhoneModel, PhonePlatform: o.PhonePlatform, PhoneOSVersion: o.PhoneOSVersion, Step: o.Step, Name: o.Name, Raw: o.Raw, Value: o.Value,
		Parse: o.Parse, Currency: o.Currency, Tax: o.Tax, Bounds: o.Bounds, Selector: o.Selector,
		AppPackage: o.AppPackage, AppVersion: o.AppVersion, Locale: o.Locale, TimeZone: o.TimeZone,
		AcceptedAt: o.AcceptedAt.UTC(), Evidence: o.Evidence, Accepted: o.Accepted, WriteEventID: o.WriteEvent,
	}
	if v.Evidence == nil {
		v.Evidence = []jobstore.ObservationEvidence{}
	}
	if o.PhoneSDK != 0 {
		n := o.PhoneSDK
		v.PhoneSDK = &n
	}
	if o.AppCode != 0 {
		n := o.AppCode
		v.AppVersionCode = &n
	}
	if !o.ObservedAt.IsZero() {
		t := o.ObservedAt.UTC()
		v.ObservedAt = &t
	}
	return v
}

// CSVRecord is the row's CSV fields, in ObservationColumns order: numbers
// in decimal, unknown values empty, times RFC 3339 in UTC, bounds and
// evidence as their JSON.
func (v ObservationView) CSVRecord() []string {
	opt := func(p *int64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatInt(*p, 10)
	}
	sdk := ""
	if v.PhoneSDK != nil {
		sdk = strconv.Itoa(*v.PhoneSDK)
	}
	observed := ""
	if v.ObservedAt != nil {
		observed = v.ObservedAt.Format(time.RFC3339Nano)
	}
	ev := evidenceJSON(v.Evidence)
	return []string{
		strconv.FormatInt(v.ID, 10), v.Project, v.JobID, strconv.FormatInt(v.Generation, 10), v.Owner, v.AgentID,
		v.PhoneSerial, v.PhoneModel, sdk, v.PhonePlatform, v.PhoneOSVersion, strconv.Itoa(v.Step), v.Name, v.Raw, v.Value, v.Parse, v.Currency, v.Tax,
		jobstore.FormatBounds(v.Bounds), v.Selector, v.AppPackage, v.AppVersion, opt(v.AppVersionCode), v.Locale, v.TimeZone,
		observed, v.AcceptedAt.Format(time.RFC3339Nano), ev, strconv.FormatBool(v.Accepted), strconv.FormatInt(v.WriteEventID, 10),
	}
}

// evidenceJSON is the evidence as JSON text, as encoding/json writes it:
// written directly when every string is of the characters a name, key or
// digest is made of (none needs escaping), else by encoding/json.
func evidenceJSON(ev []jobstore.ObservationEvidence) string {
	if len(ev) == 0 {
		return "[]"
	}
	plain := func(s string) bool {
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
				return false
			}
		}
		return true
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, e := range ev {
		if !plain(e.Name) || !plain(e.Key) || !plain(e.SHA256) {
			out, _ := json.Marshal(ev) // strings only: never fails
			return string(out)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"name":"` + e.Name + `","key":"` + e.Key + `","sha256":"` + e.SHA256 + `"}`)
	}
	b.WriteByte(']')
	return b.String()
}

// ObservationPage is GET /api/v1/projects/{project}/observations with
// format=json.
type ObservationPage struct {
	Observations []ObservationView `json:"observations"`
	// NextCursor continues the list; absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

func encodeObservationCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("o1:" + strconv.FormatInt(id, 10)))
}

func decodeObservationCursor(s string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		if rest, ok := strings.CutPrefix(string(b), "o1:"); ok {
			if n, err := strconv.ParseInt(rest, 10, 64); err == nil && n > 0 {
				return n, nil
			}
		}
	}
	return 0, errors.New("not a cursor of this route: pass next_cursor of the previous page as it is")
}

// observationParams are the query parameters of the route.
var observationParams = []string{"name", "job", "phone", "app", "since", "until", "generations", "cursor", "limit", "format"}

// observationQuery reads the route's query into a filter and a format; a
// problem names the parameter at fault, without quoting a long value.
func observationQuery(r *http.Request, project string) (jobstore.ObservationFilter, string, *Problem) {
	q := r.URL.Query()
	f := jobstore.ObservationFilter{Project: project, Limit: DefaultObservationLimit}
	for name, vs := range q {
		known := false
		for _, p := range observationParams {
			known = known || p == name
		}
		if !known {
			return f, "", badParam(shortParam(name), "unknown parameter (%s)", strings.Join(observationParams, ", "))
		}
		if len(vs) > 1 {
			return f, "", badParam(name, "given %d times; give it once", len(vs))
		}
	}
	text := func(name string, most int) (string, *Problem) {
		v := q.Get(name)
		if len(v) > most {
			return "", badParam(name, "%d bytes, at most %d", len(v), most)
		}
		if !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return "", badParam(name, "not printable UTF-8")
		}
		return v, nil
	}
	var p *Problem
	if f.Name, p = text("name", 64); p != nil {
		return f, "", p
	}
	if f.Phone, p = text("phone", 256); p != nil {
		return f, "", p
	}
	if f.App, p = text("app", 255); p != nil {
		return f, "", p
	}
	if f.JobID = q.Get("job"); f.JobID != "" {
		if len(f.JobID) > 64 {
			return f, "", badParam("job", "not a job id (1 to 64 of [A-Za-z0-9_-])")
		}
		if err := protocol.CheckJobID(f.JobID); err != nil {
			return f, "", badParam("job", "%v", err)
		}
	}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		s := q.Get(t.name)
		if s == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339, s)
		if err != nil || len(s) > 64 {
			return f, "", badParam(t.name, "not an RFC 3339 time such as 2026-03-01T12:00:00Z")
		}
		*t.dst = v
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, "", badParam("until", "%s is not after since (%s)", f.Until.Format(time.RFC3339Nano), f.Since.Format(time.RFC3339Nano))
	}
	switch g := q.Get("generations"); g {
	case "", "current":
	case "all":
		f.All = true
	default:
		return f, "", badParam("generations", "want current (the default: accepted results only) or all (refused results too)")
	}
	if s := q.Get("cursor"); s != "" {
		n, err := decodeObservationCursor(s)
		if err != nil {
			return f, "", badParam("cursor", "%v", err)
		}
		f.After = n
	}
	format := q.Get("format")
	if format == "" {
		format = FormatJSON
	}
	if s := q.Get("limit"); s != "" {
		if format != FormatJSON {
			return f, "", badParam("limit", "pages only format=json; csv, jsonl and parquet stream every row the filters select")
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxObservationLimit {
			return f, "", badParam("limit", "want an integer from 1 to %d", MaxObservationLimit)
		}
		f.Limit = n
	}
	return f, format, nil
}

// shortParam is a parameter's name for a problem: cut to 64 bytes.
func shortParam(name string) string {
	if len(name) > 64 {
		return name[:64] + "…"
	}
	return name
}

// listObservations is GET /api/v1/projects/{project}/observations: the
// project is authorised before anything else is read; then the format
// picks the writer.
func (h *Handler) listObservations(w http.ResponseWriter, r *http.Request, c Caller) {
	project := r.PathValue("project")
	if err := jobstore.CheckProject(project); err != nil {
		WriteProblem(w, r, problem(http.StatusBadRequest, ProblemInvalidRequest, "project", "project: not a project name (1 to 64 of [A-Za-z0-9_.-], starting with a letter or digit)"))
		return
	}
	if !c.Sees(project) {
		// Recorded as a refusal of the project's jobs; the answer does
		// not repeat the name.
		h.recordDenial(r, c, "", project)
		WriteProblem(w, r, problem(http.StatusForbidden, ProblemForbidden, "", "token %s does not cover the project in the path; the attempt is recorded", c.Name))
		return
	}
	store, ok := h.opts.Store.(jobstore.ObservationStore)
	if !ok {
		WriteProblem(w, r, problem(http.StatusNotImplemented, ProblemNotImplemented, "", "this coordinator's store does not keep observations"))
		return
	}
	f, format, p := observationQuery(r, project)
	if p != nil {
		WriteProblem(w, r, p)
		return
	}
	// The formats. Another one plugs in here: a case that streams the
	// same rows (ObservationView, ObservationColumns) to a rowWriter of
	// its own, and its name in ObservationFormats and in
	// docs/openapi.yaml.
	switch format {
	case FormatJSON:
		h.observationPage(w, r, store, f)
	case FormatCSV:
		h.exportObservations(w, r, c, store, f, ContentTypeCSV, project+".csv", newCSVRows)
	case FormatJSONL:
		h.exportObservations(w, r, c, store, f, ContentTypeJSONL, project+".jsonl", newJSONLRows)
	case FormatParquet:
		h.exportObservations(w, r, c, store, f, ContentTypeParquet, project+".parquet", newParquetRows)
	default:
		WriteProblem(w, r, badParam("format", "%q is not supported: want %s", shortParam(format), strings.Join(ObservationFormats, ", ")))
	}
}

// observationPage answers one page of JSON.
func (h *Handler) observationPage(w http.ResponseWriter, r *http.Request, store jobstore.ObservationStore, f jobstore.ObservationFilter) {
	limit := f.Limit
	f.Limit++
	rows, err := store.ListObservations(r.Context(), f)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	out := ObservationPage{Observations: make([]ObservationView, 0, min(len(rows), limit))}
	for i, o := range rows {
		if i == limit {
			out.NextCursor = encodeObservationCursor(rows[i-1].ID)
			break
		}
		out.Observations = append(out.Observations, NewObservationView(o))
	}
	WriteJSON(w, http.StatusOK, out)
}

// rowWriter writes the rows of one streamed format.
type rowWriter interface {
	// header writes what comes before the first row.
	header() error
	row(o jobstore.ObservationRow) error
	// end writes what comes after the last row.
	end() error
}

// exportObservations streams every row f selects in a format: page after
// page from the store, each written as it comes, so that the memory it
// holds is one page (and, for Parquet, one row group) whatever the size
// of the set. It counts as a stream of the token
// (api.max_streams_per_token). A failure after the first byte cannot be
// answered with a problem: the connection is cut instead, so that the
// client sees a broken transfer, never a short file that looks whole.
func (h *Handler) exportObservations(w http.ResponseWriter, r *http.Request, c Caller, store jobstore.ObservationStore,
	f jobstore.ObservationFilter, contentType, filename string, newRows func(io.Writer) rowWriter) {
	release, done := h.openStream(w, r, c)
	if done {
		return
	}
	defer release()
	f.Limit = exportPage
	ctx := r.Context()
	rows, err := store.ListObservations(ctx, f)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Disposition", `attachment; filename="observations-`+filename+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	out := newRows(bw)
	rc := http.NewResponseController(w)
	abort := func(err error) {
		if !clientGone(r) {
			h.log.Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("api: observation export cut short")
		}
		panic(http.ErrAbortHandler)
	}
	if err := out.header(); err != nil {
		abort(err)
	}
	// The status and headers go out at once, before the first page of a
	// format that writes in larger pieces (a Parquet row group).
	if err := bw.Flush(); err != nil {
		abort(err)
	}
	_ = rc.Flush()
	n := 0
	for {
		for _, o := range rows {
			if err := out.row(o); err != nil {
				abort(err)
			}
		}
		n += len(rows)
		if len(rows) < f.Limit {
			break
		}
		f.After = rows[len(rows)-1].ID
		if err := bw.Flush(); err != nil {
			abort(err)
		}
		_ = rc.Flush()
		if rows, err = store.ListObservations(ctx, f); err != nil {
			abort(err)
		}
	}
	if err := out.end(); err != nil {
		abort(err)
	}
	if err := bw.Flush(); err != nil {
		abort(err)
	}
	h.log.Debug().Str("path", r.URL.Path).Str("token_name", c.Name).Int("rows", n).Msg("api: observations exported")
}

// csvRows writes RFC 4180 CSV: a header row, CRLF after every record, a
// field quoted when it holds a comma, a quote, CR or LF (quotes doubled),
// everything else as it is: a value's own line breaks are kept, not
// rewritten.
type csvRows struct {
	w   io.Writer
	buf []byte
}

func newCSVRows(w io.Writer) rowWriter { return &csvRows{w: w} }

func (c *csvRows) header() error { return c.write(ObservationColumns) }

func (c *csvRows) row(o jobstore.ObservationRow) error {
	return c.write(NewObservationView(o).CSVRecord())
}

func (c *csvRows) end() error { return nil }

func (c *csvRows) write(fields []string) error {
	c.buf = c.buf[:0]
	for i, f := range fields {
		if i > 0 {
			c.buf = append(c.buf, ',')
		}
		if !strings.ContainsAny(f, ",\"\r\n") {
			c.buf = append(c.buf, f...)
			continue
		}
		c.buf = append(c.buf, '"')
		c.buf = append(c.buf, strings.ReplaceAll(f, `"`, `""`)...)
		c.buf = append(c.buf, '"')
	}
	c.buf = append(c.buf, '\r', '\n')
	_, err := c.w.Write(c.buf)
	return err
}

// jsonlRows writes JSON Lines: one ObservationView per line.
type jsonlRows struct{ enc *json.Encoder }

func newJSONLRows(w io.Writer) rowWriter {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &jsonlRows{enc: enc}
}

func (j *jsonlRows) header() error { return nil }

func (j *jsonlRows) row(o jobstore.ObservationRow) error { return j.enc.Encode(NewObservationView(o)) }

func (j *jsonlRows) end() error { return nil }

// parquetRows writes one Parquet file (dataset.ParquetWriter, shared with
// the exports into the bucket).
type parquetRows struct{ w *dataset.ParquetWriter }

func newParquetRows(w io.Writer) rowWriter { return parquetRows{dataset.NewParquetWriter(w)} }

func (p parquetRows) header() error { return nil }

func (p parquetRows) row(o jobstore.ObservationRow) error { return p.w.Write(o) }

func (p parquetRows) end() error { return p.w.Close() }
