package apitest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// recorder collects the errors the transport reports.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestTransportCatchesDrift: a response the document does not describe, a
// request it rejects that the server accepts, an undocumented route, a
// Parquet file without its footer and a Parquet file where the document
// declares none are each reported; a matching exchange is not.
func TestTransportCatchesDrift(t *testing.T) {
	var status int
	var body, ctype string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	agent := `{"id":"pc-1","online":true,"draining":false,"agent_draining":false,"slots":1,"phones":[]}`
	problem := `{"type":"urn:edgeagent:problem:invalid-request","title":"Bad Request","status":400,"detail":"x"}`
	for _, c := range []struct {
		name, method, path, reqBody string
		status                      int
		ctype, body                 string
		want                        string // "" for no error
	}{
		{"matches", "POST", "/api/v1/agents/pc-1/drain", "", 200, "application/json", agent, ""},
		{"undocumented member", "POST", "/api/v1/agents/pc-1/drain", "", 200, "application/json", strings.Replace(agent, `"slots"`, `"colour":1,"slots"`, 1), "does not match"},
		{"undocumented status", "POST", "/api/v1/agents/pc-1/drain", "", 418, "application/problem+json", problem, "does not match"},
		{"accepted a rejected request", "POST", "/api/v1/jobs", `{"colour": 1}`, 201, "application/json", `{}`, "rejects"},
		{"refused a rejected request", "POST", "/api/v1/jobs", `{"colour": 1}`, 400, "application/problem+json", problem, ""},
		{"error without a problem document", "GET", "/api/v1/jobs", "", 400, "application/json", problem, "not a problem document"},
		{"undocumented route", "GET", "/api/v1/elsewhere", "", 200, "application/json", `{}`, "not in docs/openapi.yaml"},
		{"whole parquet file", "GET", "/api/v1/projects/lab/observations?format=parquet", "", 200, ParquetMediaType, "PAR1\x15\x00PAR1", ""},
		{"parquet file without its footer", "GET", "/api/v1/projects/lab/observations?format=parquet", "", 200, ParquetMediaType, "PAR1\x15\x00\x15", "not a whole Parquet file"},
		{"parquet where the document has none", "GET", "/api/v1/agents", "", 200, ParquetMediaType, "PAR1PAR1", "declares no"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			status, ctype, body = c.status, c.ctype, c.body
			client := &http.Client{Transport: NewTransport(rec, nil)}
			var rd io.Reader
			if c.reqBody != "" {
				rd = strings.NewReader(c.reqBody)
			}
			req, _ := http.NewRequest(c.method, srv.URL+c.path, rd)
			req.Header.Set("Authorization", "Bearer x")
			if c.reqBody != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(got) != c.body {
				t.Errorf("body %q reached the caller, want %q", got, c.body)
			}
			errs := strings.Join(rec.errs, "\n")
			if c.want == "" && errs != "" || c.want != "" && !strings.Contains(errs, c.want) {
				t.Errorf("reported %q, want %q", errs, c.want)
			}
		})
	}
}

// TestTransportChecksEvents: each frame of an event stream is checked as
// it is read: an Event of the document passes; data missing a required
// member, an undocumented member, or an id or type other than the frame's
// is reported.
func TestTransportChecksEvents(t *testing.T) {
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	ev := `{"id":7,"type":"queued","job_id":"j1","project":"lab","generation":0,"at":"2026-12-01T10:04:05Z","message":"submitted by alice"}`
	head := "retry: 2000\n: stream open\n\n"
	for _, c := range []struct {
		name, body, want string
	}{
		{"matches", head + "id: 7\nevent: queued\ndata: " + ev + "\n\n: heartbeat\n\n", ""},
		{"missing member", "id: 7\nevent: queued\ndata: " + strings.Replace(ev, `"message":"submitted by alice"`, `"detail":"x"`, 1) + "\n\n", "message"},
		{"undocumented member", "id: 7\nevent: queued\ndata: " + strings.Replace(ev, `"id":7`, `"id":7,"colour":1`, 1) + "\n\n", "colour"},
		{"other id", "id: 8\nevent: queued\ndata: " + ev + "\n\n", "the data's id"},
		{"other type", "id: 7\nevent: granted\ndata: " + ev + "\n\n", "the data's type"},
		{"not json", "id: 7\nevent: queued\ndata: {\n\n", "not JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			body = c.body
			client := &http.Client{Transport: NewTransport(rec, nil)}
			req, _ := http.NewRequest("GET", srv.URL+"/api/v1/jobs/j1/events", nil)
			req.Header.Set("Authorization", "Bearer x")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(got) != c.body {
				t.Errorf("body %q reached the caller, want %q", got, c.body)
			}
			errs := strings.Join(rec.errs, "\n")
			if c.want == "" && errs != "" || c.want != "" && !strings.Contains(errs, c.want) {
				t.Errorf("reported %q, want %q", errs, c.want)
			}
		})
	}
}
