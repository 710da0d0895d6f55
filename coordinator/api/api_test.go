package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/api/apitest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// env is an API served in the test on a SQLite store.
type env struct {
	t      *testing.T
	store  *sqlitestore.Store
	srv    *httptest.Server
	client *http.Client
	tr     *apitest.Transport
}

func newEnv(t *testing.T, mod func(*api.Options)) *env {
	t.Helper()
	st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	opts := api.Options{Store: st, OfflineAfter: time.Hour, Rate: 1000, Burst: 1000}
	if mod != nil {
		mod(&opts)
	}
	h, err := api.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tr := apitest.NewTransport(t, nil)
	return &env{t: t, store: st, srv: srv, client: &http.Client{Transport: tr}, tr: tr}
}

// token creates a token in the store and returns its secret.
func (e *env) token(name string, projects []string, scopes ...string) string {
	e.t.Helper()
	secret, hash, err := api.NewToken()
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.CreateAPIToken(e.t.Context(), jobstore.APIToken{Name: name, Hash: hash, Projects: projects, Scopes: scopes}); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r reply) problem(t *testing.T) api.Problem {
	t.Helper()
	var p api.Problem
	r.decode(t, &p)
	return p
}

func (e *env) do(method, path, token, body string, hdr ...string) reply {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

const job = `{"device": {"model": "Pixel 7"}, "steps": [{"op": "launch", "package": "com.example"}, {"op": "screenshot", "name": "home.png"}], "timeout": "90s", "priority": 2, "max_attempts": 2}`

func TestSubmitShowListCancel(t *testing.T) {
	var revoked []fencing.Token
	e := newEnv(t, func(o *api.Options) {
		o.Revoke = func(tok fencing.Token, reason string) error { revoked = append(revoked, tok); return nil }
	})
	tok := e.token("alice", []string{"lab"}, "read", "submit", "operate")

	r := e.do("POST", "/api/v1/jobs", tok, job)
	if r.status != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	var j api.JobView
	r.decode(t, &j)
	if j.ID == "" || j.Status != jobstore.StatusQueued || j.Project != "lab" || j.SubmittedBy != "alice" || j.Priority != 2 || j.MaxAttempts != 2 {
		t.Fatalf("submitted %+v", j)
	}
	if loc := r.header.Get("Location"); loc != "/api/v1/jobs/"+j.ID {
		t.Errorf("Location %q", loc)
	}

	r = e.do("GET", "/api/v1/jobs/"+j.ID, tok, "")
	var d api.JobDetail
	r.decode(t, &d)
	if r.status != 200 || d.ID != j.ID || d.Task.TimeoutMS != 90000 || len(d.Task.Steps) != 2 || d.Waiting == "" {
		t.Fatalf("show: %d %s", r.status, r.body)
	}

	// Grant it, so that the cancel takes a lease away.
	lease, err := e.store.Reassign(t.Context(), j.ID, fencing.Owner("agent-1", "boot-1"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r = e.do("GET", "/api/v1/jobs/"+j.ID, tok, "")
	r.decode(t, &d)
	if len(d.Generations) != 1 || d.Generations[0].Owner != lease.Token.Owner || d.Generations[0].GrantedBy != "reassign" || len(d.WriteEvents) != 1 {
		t.Fatalf("show after a grant: %s", r.body)
	}

	r = e.do("POST", "/api/v1/jobs/"+j.ID+"/cancel", tok, `{"reason": "wrong phone"}`)
	r.decode(t, &j)
	cancelled := j.Status // CANCELLED, or FAILED in a store that does not tell them apart yet
	if r.status != 200 || !jobstore.Finished(j.Status) {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	if len(revoked) != 1 || revoked[0] != lease.Token {
		t.Errorf("revoked %v, want %v", revoked, lease.Token)
	}
	r = e.do("GET", "/api/v1/jobs/"+j.ID, tok, "")
	r.decode(t, &d)
	if g := d.Generations[0]; g.Ended != "cancelled" || g.Detail != "wrong phone" {
		t.Errorf("generation after cancel: %+v", g)
	}
	r = e.do("POST", "/api/v1/jobs/"+j.ID+"/cancel", tok, "")
	if p := r.problem(t); r.status != http.StatusConflict || p.Type != api.ProblemConflict {
		t.Errorf("second cancel: %d %s", r.status, r.body)
	}

	// List pages newest first; a job submitted between pages does not move them.
	var ids []string
	for range 4 {
		r = e.do("POST", "/api/v1/jobs", tok, job)
		r.decode(t, &j)
		ids = append([]string{j.ID}, ids...)
	}
	ids = append(ids, d.ID)
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		r = e.do("GET", "/api/v1/jobs?project=lab&limit=2"+cursor, tok, "")
		var l api.JobList
		r.decode(t, &l)
		if r.status != 200 || pages > 3 {
			t.Fatalf("list: %d %s", r.status, r.body)
		}
		for _, j := range l.Jobs {
			got = append(got, j.ID)
		}
		if pages == 0 {
			e.do("POST", "/api/v1/jobs", tok, job)
		}
		if l.NextCursor == "" {
			break
		}
		cursor = "&cursor=" + l.NextCursor
	}
	if strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Errorf("pages %v, want %v", got, ids)
	}
	r = e.do("GET", "/api/v1/jobs?status="+strings.ToLower(cancelled), tok, "")
	var l api.JobList
	r.decode(t, &l)
	if len(l.Jobs) != 1 || l.Jobs[0].ID != d.ID {
		t.Errorf("status=%s: %s", cancelled, r.body)
	}
	if e.tr.Checked() < 10 {
		t.Errorf("only %d exchanges checked against the document", e.tr.Checked())
	}
}

func TestAuthScopesProjects(t *testing.T) {
	e := newEnv(t, nil)
	a := e.token("alice", []string{"a"}, "read", "submit", "operate")
	b := e.token("bob", []string{"b"}, "read", "submit", "operate")
	reader := e.token("rita", []string{"a"}, "read")
	revoked := e.token("old", []string{"a"}, "read")
	if _, err := e.store.RevokeAPIToken(t.Context(), "old"); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ name, token string }{{"none", ""}, {"unknown", "edg_nope"}, {"revoked", revoked}} {
		r := e.do("GET", "/api/v1/jobs", c.token, "")
		if r.status != http.StatusUnauthorized || r.problem(t).Type != api.ProblemUnauthorized || r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s token: %d %s", c.name, r.status, r.body)
		}
	}

	r := e.do("POST", "/api/v1/jobs", b, job)
	var jb api.JobView
	r.decode(t, &jb)
	if r.status != 201 || jb.Project != "b" {
		t.Fatalf("bob submits: %d %s", r.status, r.body)
	}
	for _, req := range []struct{ method, path string }{
		{"GET", "/api/v1/jobs/" + jb.ID},
		{"POST", "/api/v1/jobs/" + jb.ID + "/cancel"},
		{"GET", "/api/v1/jobs/" + jb.ID + "/artifacts"},
		{"GET", "/api/v1/jobs/" + jb.ID + "/events"},
	} {
		r := e.do(req.method, req.path, a, "")
		if r.status != http.StatusForbidden || r.problem(t).Type != api.ProblemForbidden {
			t.Errorf("alice %s %s of project b: %d %s", req.method, req.path, r.status, r.body)
		}
	}
	r = e.do("GET", "/api/v1/jobs?project=b", a, "")
	if r.status != http.StatusForbidden {
		t.Errorf("alice lists project b: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/api/v1/events?project=b", a, "")
	if r.status != http.StatusForbidden {
		t.Errorf("alice follows project b: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/api/v1/jobs", a, `{"project": "b", "steps": [{"op": "wait"}]}`)
	if p := r.problem(t); r.status != http.StatusForbidden || p.Type != api.ProblemForbidden {
		t.Errorf("alice submits to project b: %d %s", r.status, r.body)
	}
	ds, err := e.store.APIDenials(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// They are counted per token, kind and minute; a row keeps the last
	// request of its kind.
	counts := map[string]int64{}
	last := map[string]jobstore.APIDenial{}
	for _, d := range ds {
		if d.TokenName != "alice" || d.Project != "b" {
			t.Fatalf("denials %+v", ds)
		}
		counts[d.Kind] += d.Count
		last[d.Kind] = d
	}
	if j := last[jobstore.DenialJob]; counts[jobstore.DenialJob] != 4 || counts[jobstore.DenialProject] != 3 ||
		j.JobID != jb.ID || j.Route != "/api/v1/jobs/"+jb.ID+"/events" || j.Method != "GET" || last[jobstore.DenialProject].Method != "POST" {
		t.Fatalf("denials %+v", ds)
	}
	// Alice's list does not show bob's job.
	r = e.do("GET", "/api/v1/jobs", a, "")
	var l api.JobList
	r.decode(t, &l)
	if len(l.Jobs) != 0 {
		t.Errorf("alice sees %s", r.body)
	}

	// A read-only token cannot cancel, submit or drain.
	r = e.do("POST", "/api/v1/jobs", a, job)
	var ja api.JobView
	r.decode(t, &ja)
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/api/v1/jobs/" + ja.ID + "/cancel", ""},
		{"POST", "/api/v1/jobs", job},
		{"POST", "/api/v1/agents/x/drain", ""},
		{"POST", "/api/v1/sessions", `{}`},
	} {
		r := e.do(req.method, req.path, reader, req.body)
		if p := r.problem(t); r.status != http.StatusForbidden || !strings.Contains(p.Detail, "lacks scope") {
			t.Errorf("read-only %s %s: %d %s", req.method, req.path, r.status, r.body)
		}
	}
	if j, _ := e.store.Get(t.Context(), ja.ID); j.Status != jobstore.StatusQueued {
		t.Errorf("job after a refused cancel: %s", j.Status)
	}
	r = e.do("GET", "/api/v1/jobs/"+ja.ID, reader, "")
	if r.status != 200 {
		t.Errorf("read-only show: %d %s", r.status, r.body)
	}
}

func TestProblems(t *testing.T) {
	e := newEnv(t, func(o *api.Options) { o.MaxBodyBytes = 2048 })
	tok := e.token("alice", []string{"a", "b"}, "read", "submit", "operate", "admin")
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		typ, field               string
	}{
		{"unknown field", "POST", "/api/v1/jobs", `{"project": "a", "steps": [{"op": "wait"}], "colour": 1}`, 400, api.ProblemInvalidRequest, "colour"},
		{"wrong type", "POST", "/api/v1/jobs", `{"project": "a", "steps": [{"op": "tap", "x": "ten"}]}`, 400, api.ProblemInvalidRequest, "steps.x"},
		{"not json", "POST", "/api/v1/jobs", `{"project": `, 400, api.ProblemInvalidRequest, ""},
		{"two values", "POST", "/api/v1/jobs", `{"project": "a", "steps": [{"op": "wait"}]} {}`, 400, api.ProblemInvalidRequest, ""},
		{"too large", "POST", "/api/v1/jobs", `{"project": "a", "steps": [{"op": "text", "text": "` + strings.Repeat("x", 4096) + `"}]}`, 413, api.ProblemTooLarge, ""},
		{"unknown op", "POST", "/api/v1/jobs", `{"project": "a", "steps": [{"op": "wait"}, {"op": "dance"}]}`, 422, api.ProblemInvalidJob, "steps[1].op"},
		{"bad id", "POST", "/api/v1/jobs", `{"id": "no spaces", "project": "a", "steps": [{"op": "wait"}]}`, 422, api.ProblemInvalidJob, "id"},
		{"no steps", "POST", "/api/v1/jobs", `{"project": "a"}`, 422, api.ProblemInvalidJob, "steps"},
		{"project needed", "POST", "/api/v1/jobs", `{"steps": [{"op": "wait"}]}`, 422, api.ProblemInvalidJob, "project"},
		{"bad timeout", "POST", "/api/v1/jobs", `{"project": "a", "timeout": "soon", "steps": [{"op": "wait"}]}`, 422, api.ProblemInvalidJob, "timeout"},
		{"empty tag", "POST", "/api/v1/jobs", `{"project": "a", "device": {"tags": [""]}, "steps": [{"op": "wait"}]}`, 422, api.ProblemInvalidJob, "device.tags[0]"},
		{"selector field", "POST", "/api/v1/jobs", `{"project": "a", "device": {"colour": "red"}, "steps": [{"op": "wait"}]}`, 400, api.ProblemInvalidRequest, "colour"},
		{"fan-out, no phone", "POST", "/api/v1/jobs", `{"project": "a", "fan_out": true, "device": {"model": "X"}, "steps": [{"op": "wait"}]}`, 422, api.ProblemInvalidJob, "device"},
		{"media type", "POST", "/api/v1/jobs", `{}`, 415, api.ProblemUnsupported, ""},
		{"bad job id", "GET", "/api/v1/jobs/a%20b", "", 400, api.ProblemInvalidRequest, "id"},
		{"unknown job", "GET", "/api/v1/jobs/nope", "", 404, api.ProblemNotFound, "id"},
		{"bad limit", "GET", "/api/v1/jobs?limit=0", "", 400, api.ProblemInvalidRequest, "limit"},
		{"bad status", "GET", "/api/v1/jobs?status=done", "", 400, api.ProblemInvalidRequest, "status"},
		{"bad cursor", "GET", "/api/v1/jobs?cursor=xyz", "", 400, api.ProblemInvalidRequest, "cursor"},
		{"unknown parameter", "GET", "/api/v1/jobs?colour=red", "", 400, api.ProblemInvalidRequest, "colour"},
		{"bad wait", "GET", "/api/v1/jobs/nope?wait=forever", "", 400, api.ProblemInvalidRequest, "wait"},
		{"unknown agent", "POST", "/api/v1/agents/nope/drain", "", 404, api.ProblemNotFound, "id"},
		{"no route", "GET", "/api/v1/nothing", "", 404, api.ProblemNotFound, ""},
		{"method", "DELETE", "/api/v1/jobs", "", 405, api.ProblemMethod, ""},
		{"events not served", "GET", "/api/v1/events", "", 501, api.ProblemNotImplemented, ""},
		{"sessions not served", "GET", "/api/v1/sessions/x", "", 501, api.ProblemNotImplemented, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var hdr []string
			if c.name == "media type" {
				hdr = []string{"Content-Type", "text/plain"}
			}
			r := e.do(c.method, c.path, tok, c.body, hdr...)
			p := r.problem(t)
			if r.status != c.status || p.Status != c.status || p.Type != c.typ || p.Field != c.field || p.Detail == "" {
				t.Errorf("%d %s; want %d %s field %q", r.status, r.body, c.status, c.typ, c.field)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

// TestSubmitRefusesInvalidSteps: a step protocol.Step.Validate refuses is
// refused at submit with 422, the field it names (steps[N].field) and, as
// detail, the message the agent gives at assign and the capture runner on
// the phone: "steps[N]: " and protocol's message.
func TestSubmitRefusesInvalidSteps(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token("alice", []string{"a"}, "read", "submit")
	for _, c := range []struct {
		step  protocol.Step
		field string
	}{
		{protocol.Step{Op: "dance"}, "steps[1].op"},
		{protocol.Step{Op: protocol.OpLaunch}, "steps[1].package"},
		{protocol.Step{Op: protocol.OpTap, X: -1}, "steps[1].x"},
		{protocol.Step{Op: protocol.OpWait, DurationMS: -5}, "steps[1].duration_ms"},
		{protocol.Step{Op: protocol.OpText}, "steps[1].text"},
		{protocol.Step{Op: protocol.OpKey}, "steps[1].key"},
		{protocol.Step{Op: protocol.OpOpenURL, URL: "no scheme"}, "steps[1].url"},
		{protocol.Step{Op: protocol.OpRotate, Orientation: "sideways"}, "steps[1].orientation"},
		{protocol.Step{Op: protocol.OpScreenshot, Name: "../x"}, "steps[1].name"},
		{protocol.Step{Op: protocol.OpWait, Effect: &protocol.EffectSpec{Key: "k"}}, "steps[1].effect"},
		{protocol.Step{Op: protocol.OpTap, Element: &protocol.Selector{}}, "steps[1].element"},
		{protocol.Step{Op: protocol.OpTap, Element: &protocol.Selector{Text: "a", Below: &protocol.Selector{ID: "~("}}}, "steps[1].element.below.id"},
		{protocol.Step{Op: protocol.OpWaitFor}, "steps[1].element"},
		{protocol.Step{Op: protocol.OpExtract, Element: &protocol.Selector{ID: "p"}}, "steps[1].name"},
		{protocol.Step{Op: protocol.OpExtract, Name: "price", Parse: "money", Element: &protocol.Selector{ID: "p"}}, "steps[1].parse"},
	} {
		want := c.step.Validate()
		if want == nil {
			t.Fatalf("protocol accepts %+v", c.step)
		}
		body, err := json.Marshal(map[string]any{"project": "a", "steps": []protocol.Step{{Op: protocol.OpWait}, c.step}})
		if err != nil {
			t.Fatal(err)
		}
		r := e.do("POST", "/api/v1/jobs", tok, string(body))
		p := r.problem(t)
		if r.status != 422 || p.Type != api.ProblemInvalidJob || p.Field != c.field || p.Detail != "steps[1]: "+want.Error() {
			t.Errorf("%+v: %d %s; want 422 field %q detail %q", c.step, r.status, r.body, c.field, "steps[1]: "+want.Error())
		}
	}
}

func TestFanOutIdempotency(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token("alice", []string{"a"}, "read", "submit")
	ctx := t.Context()
	phones := func(serials ...string) []protocol.Device {
		var ds []protocol.Device
		for _, s := range serials {
			ds = append(ds, protocol.Device{Serial: s, State: protocol.DeviceReady, Model: "Pixel 7"})
		}
		return ds
	}
	if _, _, err := e.store.AgentHello(ctx, jobstore.AgentHello{AgentID: "pc-1", BootID: "b1", Devices: phones("s1", "s2"), Slots: 2}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.AgentHello(ctx, jobstore.AgentHello{AgentID: "pc-2", BootID: "b1", Devices: append(phones("s3"), protocol.Device{Serial: "s4", State: "offline", Model: "Pixel 7"}), Slots: 2}); err != nil {
		t.Fatal(err)
	}
	body := `{"fan_out": true, "device": {"model": "Pixel 7"}, "steps": [{"op": "screenshot"}]}`
	var first, second api.BatchView
	r := e.do("POST", "/api/v1/jobs", tok, body, "Idempotency-Key", "try-1")
	r.decode(t, &first)
	if r.status != 201 || len(first.Jobs) != 3 || first.Batch == "" {
		t.Fatalf("fan-out: %d %s", r.status, r.body)
	}
	for i, j := range first.Jobs {
		if j.Selector.Serial != []string{"s1", "s2", "s3"}[i] || j.Status != jobstore.StatusQueued || j.ID != first.Batch+"-"+string(rune('1'+i)) {
			t.Errorf("job %d: %+v", i, j)
		}
	}
	// Spacing and key order do not make it another request.
	r = e.do("POST", "/api/v1/jobs", tok, `{"steps":[{"op":"screenshot"}],"device":{"model":"Pixel 7"},"fan_out":true}`, "Idempotency-Key", "try-1")
	r.decode(t, &second)
	if r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" || second.Batch != first.Batch || len(second.Jobs) != 3 {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	page, err := e.store.ListJobPage(ctx, jobstore.JobPageFilter{})
	if err != nil || len(page.Jobs) != 3 {
		t.Fatalf("after a retried fan-out: %d jobs, %v; want 3", len(page.Jobs), err)
	}
	r = e.do("POST", "/api/v1/jobs", tok, strings.Replace(body, "screenshot", "ui_dump", 1), "Idempotency-Key", "try-1")
	if p := r.problem(t); r.status != 422 || p.Type != api.ProblemIdempotency || p.Field != "Idempotency-Key" {
		t.Errorf("same key, other body: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/api/v1/jobs", tok, body, "Idempotency-Key", "has space")
	if r.status != 400 {
		t.Errorf("bad key: %d %s", r.status, r.body)
	}
	// Another token's key is its own.
	other := e.token("bob", []string{"a"}, "submit")
	r = e.do("POST", "/api/v1/jobs", other, body, "Idempotency-Key", "try-1")
	var third api.BatchView
	r.decode(t, &third)
	if r.status != 201 || third.Batch == first.Batch {
		t.Errorf("other token, same key: %d %s", r.status, r.body)
	}
}

func TestRateLimit(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	e := newEnv(t, func(o *api.Options) {
		o.Rate, o.Burst = 1, 2
		o.Now = func() time.Time { return now }
	})
	a := e.token("alice", []string{"a"}, "read")
	b := e.token("bob", []string{"a"}, "read")
	for i := range 2 {
		if r := e.do("GET", "/api/v1/agents", a, ""); r.status != 200 {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	r := e.do("GET", "/api/v1/agents", a, "")
	if p := r.problem(t); r.status != http.StatusTooManyRequests || p.Type != api.ProblemRateLimited || r.header.Get("Retry-After") != "1" {
		t.Fatalf("third request: %d %s %v", r.status, r.body, r.header)
	}
	if r := e.do("GET", "/api/v1/agents", b, ""); r.status != 200 {
		t.Errorf("another token: %d", r.status)
	}
	now = now.Add(time.Second)
	if r := e.do("GET", "/api/v1/agents", a, ""); r.status != 200 {
		t.Errorf("after a second: %d", r.status)
	}
}

func TestMountedHandlers(t *testing.T) {
	var seen []string
	mounted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := api.CallerFrom(r.Context())
		j, _ := api.JobFrom(r.Context())
		seen = append(seen, r.Method+" "+r.URL.Path+" "+c.Name+" "+j.ID+" "+boolStr(ok))
		if strings.HasSuffix(r.URL.Path, "/events") {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-store")
			_, _ = io.WriteString(w, `id: 1
event: queued
data: {"id":1,"type":"queued","job_id":"`+j.ID+`","generation":0,"at":"2026-12-01T10:00:00Z","message":"submitted"}

`)
			return
		}
		api.WriteJSON(w, http.StatusOK, map[string]any{"job_id": j.ID, "status": "QUEUED", "generation": 0, "artifacts": []any{}})
	})
	waited := ""
	e := newEnv(t, func(o *api.Options) {
		o.Events, o.Artifacts = mounted, mounted
		o.Waiter = waiterFunc(func(id string, d time.Duration) { waited = id + " " + d.String() })
	})
	tok := e.token("alice", []string{"a"}, "read", "submit")
	r := e.do("POST", "/api/v1/jobs", tok, job)
	var j api.JobView
	r.decode(t, &j)
	if r := e.do("GET", "/api/v1/jobs/"+j.ID+"/events", tok, "", "Last-Event-ID", "0"); r.status != 200 || !bytes.Contains(r.body, []byte("event: queued")) {
		t.Errorf("events: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/jobs/"+j.ID+"/artifacts", tok, ""); r.status != 200 {
		t.Errorf("artifacts: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/events?project=a", tok, ""); r.status != 200 {
		t.Errorf("project events: %d %s", r.status, r.body)
	}
	want := []string{
		"GET /api/v1/jobs/" + j.ID + "/events alice " + j.ID + " true",
		"GET /api/v1/jobs/" + j.ID + "/artifacts alice " + j.ID + " true",
		"GET /api/v1/events alice  true",
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("mounted handlers saw\n%s\nwant\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
	if r := e.do("GET", "/api/v1/jobs/"+j.ID+"?wait=2s", tok, ""); r.status != 200 || waited != j.ID+" 2s" {
		t.Errorf("wait: %d, waited %q", r.status, waited)
	}
	if r := e.do("GET", "/api/v1/jobs/"+j.ID+"/events", "", ""); r.status != 401 || len(seen) != 3 {
		t.Errorf("mounted handler without a token: %d, calls %d", r.status, len(seen))
	}
}

type waiterFunc func(id string, d time.Duration)

func (f waiterFunc) Wait(_ context.Context, id string, d time.Duration) error { f(id, d); return nil }

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func TestOpenAPIServed(t *testing.T) {
	e := newEnv(t, nil)
	r := e.do("GET", "/api/v1/openapi.json", "", "")
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	r.decode(t, &doc)
	if r.status != 200 || doc.OpenAPI != "3.1.0" || doc.Paths["/api/v1/jobs"] == nil || doc.Paths["/api/v1/sessions/{id}/steps"] == nil {
		t.Fatalf("openapi.json: %d %.200s", r.status, r.body)
	}
}

// A job file posted as it is (application/yaml) is read exactly as
// `edgecoord job submit -f` reads it: element steps included, unknown keys
// refused with their place.
func TestSubmitJobFileAsYAML(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token("alice", []string{"a"}, "read", "submit")
	file := `# a survey step by step
project: a
device: {model: "Pixel 7"}
timeout: 2m
steps:
  - op: launch
    package: com.example.shop
  - op: wait_for
    element: {text: "~抹茶.*"}
  - op: extract
    name: price
    element:
      id: com.example.shop:id/price
      below: {text: "抹茶ラテ 350ml"}
    parse: price
    tax: included
`
	r := e.do("POST", "/api/v1/jobs", tok, file, "Content-Type", "application/yaml")
	if r.status != 201 {
		t.Fatalf("job file: %d %s", r.status, r.body)
	}
	var j api.JobView
	r.decode(t, &j)
	var d api.JobDetail
	e.do("GET", "/api/v1/jobs/"+j.ID, tok, "").decode(t, &d)
	st := d.Task.Steps
	if len(st) != 3 || st[2].Element == nil || st[2].Element.Below == nil || st[2].Element.Below.Text != "抹茶ラテ 350ml" || st[2].Tax != "included" || d.Task.TimeoutMS != 120000 {
		t.Fatalf("stored task %+v", d.Task)
	}
	r = e.do("POST", "/api/v1/jobs", tok, strings.Replace(file, "parse: price", "parse: price\n    colour: red", 1), "Content-Type", "application/yaml")
	if p := r.problem(t); r.status != 400 || !strings.Contains(p.Detail, "not a valid job file") || !strings.Contains(p.Detail, "colour") {
		t.Fatalf("unknown key: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/api/v1/jobs", tok, strings.Replace(file, "parse: price", "parse: money", 1), "Content-Type", "application/yaml")
	if p := r.problem(t); r.status != 422 || p.Field != "steps[2].parse" {
		t.Fatalf("bad parse: %d %s", r.status, r.body)
	}
}
