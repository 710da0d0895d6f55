package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// observe submits job id in project, grants it to owner and commits a
// result with obs; it returns the token.
func (e *env) observe(id, project, owner string, sel protocol.DeviceSelector, obs ...protocol.Observation) fencing.Token {
	e.t.Helper()
	ctx := e.t.Context()
	task := protocol.Task{Device: sel, Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}}
	if _, err := e.store.Submit(ctx, jobstore.JobSpec{ID: id, Task: task, Project: project}); err != nil {
		e.t.Fatal(err)
	}
	l, err := e.store.Claim(ctx, id, owner, time.Minute)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.CommitObserved(ctx, l.Token, jobstore.ObservedResult{Result: json.RawMessage(`{}`), Observations: obs}); err != nil {
		e.t.Fatal(err)
	}
	return l.Token
}

func textObs(name, raw string) protocol.Observation {
	return protocol.Observation{Step: 1, Name: name, Raw: raw, Value: raw, Parse: protocol.ParseText}
}

// page reads one JSON page of the dataset.
func (e *env) page(token, query string) api.ObservationPage {
	e.t.Helper()
	r := e.do("GET", "/api/v1/projects/lab/observations"+query, token, "")
	if r.status != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", query, r.status, r.body)
	}
	var p api.ObservationPage
	r.decode(e.t, &p)
	return p
}

func values(obs []api.ObservationView) string {
	var out []string
	for _, o := range obs {
		s := o.JobID + "/" + o.Name + "=" + o.Value
		if !o.Accepted {
			s += "(refused)"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// TestObservationsPagesAndFilters: the JSON pages of a project's dataset,
// in id order with next_cursor until the last, narrowed by name, job,
// phone, app, since and until; a stale holder's rows only with
// generations=all, labelled refused.
func TestObservationsPagesAndFilters(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token("alice", []string{"lab"}, "read")
	price := protocol.Observation{Step: 2, Name: "price", Raw: "¥1,280", Value: "1280", Parse: protocol.ParsePrice, Currency: "JPY",
		App: &protocol.AppVersion{Package: "com.example.shop", VersionName: "4.2", VersionCode: 42}, ObservedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		Evidence: []protocol.Evidence{{Name: "d.xml", SHA256: strings.Repeat("b", 64)}}}
	t1 := e.observe("j1", "lab", "pc-1/boot", protocol.DeviceSelector{Serial: "P1"}, price, textObs("title", "Shoes"))
	e.observe("other", "elsewhere", "pc-1/boot", protocol.DeviceSelector{}, textObs("title", "Not yours"))

	p := e.page(tok, "")
	if got := values(p.Observations); got != "j1/price=1280 j1/title=Shoes" || p.NextCursor != "" {
		t.Fatalf("page %q next %q", got, p.NextCursor)
	}
	v := p.Observations[0]
	if v.Project != "lab" || v.Generation != 1 || v.Owner != "pc-1/boot" || v.AgentID != "pc-1" || v.PhoneSerial != "P1" ||
		v.PhoneSDK != nil || v.AppPackage != "com.example.shop" || v.AppVersion != "4.2" || v.AppVersionCode == nil || *v.AppVersionCode != 42 ||
		v.ObservedAt == nil || !v.ObservedAt.Equal(price.ObservedAt) || v.AcceptedAt.IsZero() || !v.Accepted || v.WriteEventID == 0 ||
		len(v.Evidence) != 1 || v.Evidence[0].Key != t1.ObjectKey("d.xml") {
		t.Fatalf("row %+v", v)
	}
	if w := p.Observations[1]; w.ObservedAt != nil || w.AppVersionCode != nil || len(w.Evidence) != 0 {
		t.Fatalf("unknowns of the second row %+v", w)
	}

	// A second job, accepted later on the database clock, and a stale
	// holder's refused result.
	waitAfter(t, e.store, v.AcceptedAt)
	e.observe("j2", "lab", "pc-2/boot", protocol.DeviceSelector{Serial: "P2"}, textObs("price", "¥99"))
	if _, err := e.store.Submit(t.Context(), jobstore.JobSpec{ID: "j3", Task: protocol.Task{Steps: []protocol.Step{{Op: protocol.OpWait}}}, Project: "lab"}); err != nil {
		t.Fatal(err)
	}
	old, err := e.store.Claim(t.Context(), "j3", "pc-1/boot", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Reassign(t.Context(), "j3", "pc-2/boot", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CommitObserved(t.Context(), old.Token, jobstore.ObservedResult{Observations: []protocol.Observation{textObs("price", "stale")}}); !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("stale commit: %v", err)
	}

	all := e.page(tok, "")
	second := all.Observations[2].AcceptedAt
	for _, c := range []struct{ query, want string }{
		{"", "j1/price=1280 j1/title=Shoes j2/price=¥99"},
		{"?format=json&name=price", "j1/price=1280 j2/price=¥99"},
		{"?job=j2", "j2/price=¥99"},
		{"?phone=P1", "j1/price=1280 j1/title=Shoes"},
		{"?app=com.example.shop", "j1/price=1280"},
		{"?since=" + url.QueryEscape(second.Format(time.RFC3339Nano)), "j2/price=¥99"},
		{"?until=" + url.QueryEscape(second.Format(time.RFC3339Nano)), "j1/price=1280 j1/title=Shoes"},
		{"?generations=current", "j1/price=1280 j1/title=Shoes j2/price=¥99"},
		{"?generations=all", "j1/price=1280 j1/title=Shoes j2/price=¥99 j3/price=stale(refused)"},
		{"?generations=all&job=j3", "j3/price=stale(refused)"},
		{"?name=absent", ""},
	} {
		if got := values(e.page(tok, c.query).Observations); got != c.want {
			t.Errorf("%s: %q, want %q", c.query, got, c.want)
		}
	}

	// Pages of one: every row once, next_cursor absent on the last.
	var got []api.ObservationView
	q := "?generations=all&limit=1"
	for range 10 {
		p := e.page(tok, q)
		got = append(got, p.Observations...)
		if p.NextCursor == "" {
			break
		}
		q = "?generations=all&limit=1&cursor=" + url.QueryEscape(p.NextCursor)
	}
	if values(got) != "j1/price=1280 j1/title=Shoes j2/price=¥99 j3/price=stale(refused)" {
		t.Fatalf("paged %q", values(got))
	}
	if p := e.page(tok, "?limit=3"); len(p.Observations) != 3 || p.NextCursor != "" {
		t.Fatalf("a full last page has a cursor: %+v", p.NextCursor)
	}
}

// waitAfter waits until the store's clock is past at.
func waitAfter(t *testing.T, st *sqlitestore.Store, at time.Time) {
	t.Helper()
	for i := 0; ; i++ {
		j, err := st.Submit(t.Context(), jobstore.JobSpec{ID: fmt.Sprintf("tick-%d", i), Task: protocol.Task{Steps: []protocol.Step{{Op: protocol.OpWait}}}, Project: "ticks"})
		if err != nil {
			t.Fatal(err)
		}
		if j.CreatedAt.After(at) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestObservationsCSV: format=csv streams every row, across the store's
// pages, as RFC 4180 with the header of the documented columns, CRLF
// after each record, and a value's commas, quotes, line breaks and
// non-ASCII text kept exactly.
func TestObservationsCSV(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token("alice", []string{"lab"}, "read")
	tricky := []string{"¥1,280 (税込)", `say "hi"`, "two\nlines", "cr\r\nlf", " lead", "=1+1", ""}
	var obs []protocol.Observation
	for _, s := range tricky {
		obs = append(obs, textObs("t", s))
	}
	e.observe("tricky", "lab", "pc-1/boot", protocol.DeviceSelector{}, obs...)
	// More rows than one page of the store (1000), in several results.
	const n = 2300
	for j := range 3 {
		var many []protocol.Observation
		for i := range min(protocol.MaxObservations, n-j*protocol.MaxObservations) {
			many = append(many, textObs("n", fmt.Sprint(j*protocol.MaxObservations+i)))
		}
		e.observe(fmt.Sprintf("bulk-%d", j), "lab", "pc-1/boot", protocol.DeviceSelector{}, many...)
	}

	r := e.do("GET", "/api/v1/projects/lab/observations?format=csv", tok, "")
	if r.status != 200 || r.header.Get("Content-Type") != api.ContentTypeCSV || !strings.Contains(r.header.Get("Content-Disposition"), "observations-lab.csv") {
		t.Fatalf("csv: %d %v", r.status, r.header)
	}
	if !bytes.HasSuffix(r.body, []byte("\r\n")) || bytes.Count(r.body, []byte("\r\n")) < n+len(tricky)+1 {
		t.Fatalf("records do not end with CRLF")
	}
	head, _, _ := bytes.Cut(r.body, []byte("\r\n"))
	if string(head) != strings.Join(api.ObservationColumns, ",") {
		t.Fatalf("header %q", head)
	}
	for _, col := range []string{"job_id", "generation", "name", "raw", "value", "currency", "phone_serial", "app_package", "app_version", "accepted_at"} {
		if !slices.Contains(api.ObservationColumns, col) {
			t.Errorf("column %s missing", col)
		}
	}
	// The raw text as RFC 4180 encodes it, read back without the reader's
	// CR handling: quoted, quotes doubled, line breaks as they were.
	if !bytes.Contains(r.body, []byte(`,"two`+"\n"+`lines","two`+"\n"+`lines",`)) ||
		!bytes.Contains(r.body, []byte(`,"say ""hi""","say ""hi""",`)) ||
		!bytes.Contains(r.body, []byte(`,"cr`+"\r\n"+`lf",`)) {
		t.Fatalf("quoting of the tricky values:\n%s", r.body[:min(len(r.body), 3000)])
	}
	recs, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+len(tricky)+n {
		t.Fatalf("%d records, want %d", len(recs), 1+len(tricky)+n)
	}
	col := func(name string) int { return slices.Index(api.ObservationColumns, name) }
	for i, want := range tricky {
		got := recs[1+i][col("raw")]
		if want == "cr\r\nlf" {
			want = "cr\nlf" // encoding/csv drops a CR before LF, even quoted
		}
		if got != want {
			t.Errorf("raw %d: %q, want %q", i, got, want)
		}
	}
	seen := map[string]bool{}
	last := 0
	for _, rec := range recs[1+len(tricky):] {
		if seen[rec[col("value")]] {
			t.Fatalf("value %s twice", rec[col("value")])
		}
		seen[rec[col("value")]] = true
		var id int
		fmt.Sscan(rec[col("id")], &id)
		if id <= last {
			t.Fatalf("id %d after %d", id, last)
		}
		last = id
		if rec[col("accepted")] != "true" || rec[col("phone_sdk")] != "" || rec[col("observed_at")] != "" || rec[col("bounds")] != "[0,0,0,0]" || rec[col("evidence")] != "[]" {
			t.Fatalf("record %q", rec)
		}
		if _, err := time.Parse(time.RFC3339, rec[col("accepted_at")]); err != nil {
			t.Fatalf("accepted_at %q", rec[col("accepted_at")])
		}
	}

	// Filters and the cursor apply to a stream as to a page.
	r = e.do("GET", "/api/v1/projects/lab/observations?format=csv&job=tricky&name=t", tok, "")
	if recs, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll(); err != nil || len(recs) != 1+len(tricky) {
		t.Fatalf("filtered csv: %d records, %v", len(recs), err)
	}
	first := e.page(tok, "?limit=1")
	r = e.do("GET", "/api/v1/projects/lab/observations?format=csv&cursor="+url.QueryEscape(first.NextCursor), tok, "")
	if recs, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll(); err != nil || len(recs) != len(tricky)+n {
		t.Fatalf("csv after a cursor: %d records, %v", len(recs), err)
	}
}

// TestObservationsJSONL: format=jsonl streams every row as one JSON
// object per line (each checked against the document's Observation).
func TestObservationsJSONL(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token("alice", []string{"lab"}, "read")
	var obs []protocol.Observation
	for i := range 200 {
		obs = append(obs, textObs("n", fmt.Sprint(i)))
	}
	e.observe("a", "lab", "pc-1/boot", protocol.DeviceSelector{}, obs...)
	full := make([]protocol.Observation, protocol.MaxObservations)
	for i := range full {
		full[i] = textObs("m", "line\nbreak <&>")
	}
	e.observe("b", "lab", "pc-1/boot", protocol.DeviceSelector{}, full...)
	r := e.do("GET", "/api/v1/projects/lab/observations?format=jsonl", tok, "")
	if r.status != 200 || r.header.Get("Content-Type") != api.ContentTypeJSONL {
		t.Fatalf("jsonl: %d %v", r.status, r.header)
	}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	n := 0
	for sc.Scan() {
		var v api.ObservationView
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		if n >= len(obs) && v.Raw != "line\nbreak <&>" {
			t.Fatalf("line %d raw %q", n+1, v.Raw)
		}
		n++
	}
	if n != len(obs)+len(full) {
		t.Fatalf("%d lines, want %d", n, len(obs)+len(full))
	}
	if e.tr.Checked() == 0 {
		t.Fatal("no exchange was checked against the document")
	}
}

// TestObservationsRefusals: the project of the path is authorised before
// anything is read: another project's (whether it exists or not) is a 403
// that does not name it, recorded; no token 401; a token without scope
// read 403; bad parameters 400 naming the parameter; an unknown format
// 400 naming the supported ones.
func TestObservationsRefusals(t *testing.T) {
	e := newEnv(t, nil)
	alice := e.token("alice", []string{"lab"}, "read")
	submitter := e.token("sam", []string{"lab"}, "submit")
	e.observe("j1", "secret-proj", "pc-1/boot", protocol.DeviceSelector{}, textObs("price", "1"))

	for _, p := range []string{"secret-proj", "no-such-proj"} {
		for _, format := range []string{"json", "csv", "jsonl", "parquet"} {
			r := e.do("GET", "/api/v1/projects/"+p+"/observations?format="+format, alice, "")
			// The problem's instance is the caller's own path; its detail
			// does not repeat the project.
			pr := r.problem(t)
			if r.status != http.StatusForbidden || pr.Type != api.ProblemForbidden || strings.Contains(pr.Detail, p) {
				t.Errorf("alice reads %s as %s: %d %s", p, format, r.status, r.body)
			}
		}
	}
	ds, err := e.store.APIDenials(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, d := range ds {
		if d.TokenName != "alice" || d.Kind != jobstore.DenialProject || !strings.HasSuffix(d.Route, "/observations") {
			t.Fatalf("denial %+v", d)
		}
		n += d.Count
	}
	if n != 8 {
		t.Fatalf("%d refusals recorded, want 8: %+v", n, ds)
	}
	if r := e.do("GET", "/api/v1/projects/lab/observations", "", ""); r.status != http.StatusUnauthorized {
		t.Errorf("no token: %d", r.status)
	}
	if r := e.do("GET", "/api/v1/projects/lab/observations", submitter, ""); r.status != http.StatusForbidden || !strings.Contains(r.problem(t).Detail, "lacks scope read") {
		t.Errorf("token without read: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/api/v1/projects/lab/observations", alice, "{}"); r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", r.status)
	}
	for _, c := range []struct{ query, field, says string }{
		{"?format=xml", "format", "want json, csv, jsonl, parquet"},
		{"?format=csv&limit=10", "limit", "format=json"},
		{"?format=parquet&limit=10", "limit", "format=json"},
		{"?limit=0", "limit", "1 to 1000"},
		{"?limit=1001", "limit", "1 to 1000"},
		{"?cursor=bm9wZQ", "cursor", "next_cursor"},
		{"?since=yesterday", "since", "RFC 3339"},
		{"?until=2026-03-01", "until", "RFC 3339"},
		{"?since=2026-03-02T00:00:00Z&until=2026-03-01T00:00:00Z", "until", "not after since"},
		{"?generations=some", "generations", "current"},
		{"?job=a/b", "job", "job id"},
		{"?name=" + strings.Repeat("n", 65), "name", "at most 64"},
		{"?phone=a%00b", "phone", "printable"},
		{"?nme=price", "nme", "unknown parameter"},
		{"?name=a&name=b", "name", "once"},
	} {
		r := e.do("GET", "/api/v1/projects/lab/observations"+c.query, alice, "")
		p := r.problem(t)
		if r.status != http.StatusBadRequest || p.Field != c.field || !strings.Contains(p.Detail, c.says) {
			t.Errorf("%s: %d %s", c.query, r.status, r.body)
		}
	}
	if r := e.do("GET", "/api/v1/projects/-bad/observations", alice, ""); r.status != http.StatusBadRequest || r.problem(t).Field != "project" {
		t.Errorf("bad project name: %d %s", r.status, r.body)
	}
}

// failingStore fails or holds the listing of observations after the
// first page of an export.
type failingStore struct {
	*sqlitestore.Store
	fail bool
	hold chan struct{} // closed to let a held listing go on
	held chan struct{} // signalled when a listing is held
	once sync.Once
}

func (f *failingStore) ListObservations(ctx context.Context, fl jobstore.ObservationFilter) ([]jobstore.ObservationRow, error) {
	if fl.After > 0 {
		if f.fail {
			return nil, errors.New("the database went away")
		}
		if f.hold != nil {
			f.once.Do(func() { close(f.held) })
			select {
			case <-f.hold:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return f.Store.ListObservations(ctx, fl)
}

// manyObservations commits more than one store page of observations.
func (e *env) manyObservations() {
	e.t.Helper()
	for j := range 2 {
		obs := make([]protocol.Observation, protocol.MaxObservations)
		for i := range obs {
			obs[i] = textObs("n", fmt.Sprint(i))
		}
		e.observe(fmt.Sprintf("many-%d", j), "lab", "pc-1/boot", protocol.DeviceSelector{}, obs...)
	}
}

// TestObservationsExportCut: a store failure after the first page cuts
// the connection, so that the client sees a broken transfer rather than a
// short file that looks whole.
func TestObservationsExportCut(t *testing.T) {
	fs := &failingStore{fail: true}
	e := newEnv(t, func(o *api.Options) {
		fs.Store = o.Store.(*sqlitestore.Store)
		o.Store = fs
	})
	tok := e.token("alice", []string{"lab"}, "read")
	e.manyObservations()
	for _, format := range []string{"csv", "jsonl"} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", e.srv.URL+"/api/v1/projects/lab/observations?format="+format, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || err == nil {
			t.Fatalf("%s: %d, read %d bytes, err %v; want a cut transfer", format, resp.StatusCode, len(body), err)
		}
	}
}

// TestObservationsExportIsAStream: a streamed export holds one of the
// token's stream slots (api.max_streams_per_token) while it runs: a
// second at the cap is answered 429 with Retry-After, and a JSON page,
// which is no stream, is not.
func TestObservationsExportIsAStream(t *testing.T) {
	fs := &failingStore{hold: make(chan struct{}), held: make(chan struct{})}
	e := newEnv(t, func(o *api.Options) {
		fs.Store = o.Store.(*sqlitestore.Store)
		o.Store = fs
		o.Streams = &api.Streams{PerToken: 1, Max: 10}
	})
	tok := e.token("alice", []string{"lab"}, "read")
	e.manyObservations()
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", e.srv.URL+"/api/v1/projects/lab/observations?format=csv", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	<-fs.held
	r := e.do("GET", "/api/v1/projects/lab/observations?format=jsonl", tok, "")
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Errorf("second export at the cap: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/projects/lab/observations?limit=1", tok, ""); r.status != http.StatusOK {
		t.Errorf("a page while an export runs: %d %s", r.status, r.body)
	}
	close(fs.hold)
	if err := <-done; err != nil {
		t.Fatalf("the held export: %v", err)
	}
}
