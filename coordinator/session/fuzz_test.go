package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/session"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// emptyStore is a store without agents or jobs: every request the fuzzer
// makes ends at validation, at the busy answer of an open or at an unknown
// session.
type emptyStore struct{}

func (emptyStore) Submit(context.Context, jobstore.JobSpec) (jobstore.Job, error) {
	return jobstore.Job{}, errors.New("no submit in the fuzz store")
}
func (emptyStore) Get(context.Context, string) (jobstore.Job, error) {
	return jobstore.Job{}, jobstore.ErrNotFound
}
func (emptyStore) Cancel(context.Context, string, string) (fencing.Token, error) {
	return fencing.Token{}, jobstore.ErrNotFound
}
func (emptyStore) Agents(context.Context) ([]jobstore.Agent, error) { return nil, nil }
func (emptyStore) GetAgent(context.Context, string) (jobstore.Agent, error) {
	return jobstore.Agent{}, jobstore.ErrAgentNotFound
}
func (emptyStore) Artifacts(context.Context, string, int64) ([]jobstore.ArtifactRecord, error) {
	return nil, nil
}

// FuzzSessionHandler: any method, path and body gets a reply that is a
// success or an RFC 9457 problem whose status is the reply's (a 400 naming
// its field), never a panic or a 500.
func FuzzSessionHandler(f *testing.F) {
	ns := testenv.NATS(f)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		f.Fatal(err)
	}
	defer nc.Close()
	m, err := session.New(session.Options{Store: emptyStore{}, Conn: nc, Log: zerolog.Nop()})
	if err != nil {
		f.Fatal(err)
	}
	h := session.NewHandler(m, testAuth)
	for _, s := range []struct{ method, path, body string }{
		{"POST", "", `{"project": "lab", "device": {"serial": "x"}, "idle_timeout": "5m", "wait": "1s"}`},
		{"POST", "", `{"idle_timeout": 5}`},
		{"POST", "", `{"device": {"tags": [1]}}`},
		{"POST", "/s-abc.1/steps", `{"steps": [{"op": "tap", "x": 1, "y": 2}, {"op": "screenshot", "name": "a"}]}`},
		{"POST", "/s-abc.1/steps", `{"steps": [{"op": "text", "text": "grüße"}]}`},
		{"POST", "/x/steps", `{"steps": [{"op": "swipe", "x2": -1}]}`},
		{"GET", "/s-abc.1", ``},
		{"DELETE", "/s-abc.99999999999999999999", ``},
		{"PATCH", "/a/b/c", `{}`},
	} {
		f.Add(s.method, s.path, s.body)
	}
	f.Fuzz(func(t *testing.T, method, path, body string) {
		if !strings.HasPrefix(path, "/") && path != "" || strings.ContainsAny(path, " ?#%\r\n\t") {
			return
		}
		req, err := http.NewRequest(method, "http://coord"+session.PathPrefix+path, strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer "+tokenOperator)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code < 400 {
			return
		}
		var p struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
			Field  string `json:"field"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s %s %q: %d %q is not a problem document: %v", method, path, body, rec.Code, rec.Body.String(), err)
		}
		if p.Status != rec.Code || p.Type == "" || rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s %q: %d %s", method, path, body, rec.Code, rec.Body.String())
		}
		if rec.Code == http.StatusBadRequest && p.Field == "" {
			t.Fatalf("%s %s %q: 400 without a field: %s", method, path, body, rec.Body.String())
		}
	})
}
