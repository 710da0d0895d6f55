package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/protocol"
)

// FuzzHandlers sends arbitrary requests to the API: whatever the method,
// path, body or Idempotency-Key, the handler answers without a panic or a
// 500, in JSON, and every error is a problem document whose status is the
// reply's.
func FuzzHandlers(f *testing.F) {
	for _, s := range []struct{ method, path, body, key string }{
		{"POST", "/api/v1/jobs", `{"device": {"model": "Pixel 7"}, "steps": [{"op": "screenshot", "name": "a.png"}], "timeout": "90s"}`, ""},
		{"POST", "/api/v1/jobs", `{"fan_out": true, "device": {"tags": ["lab"]}, "steps": [{"op": "tap", "x": 1, "y": 2}]}`, "k1"},
		{"POST", "/api/v1/jobs", `{"id": "j1", "steps": [{"op": "dance"}], "not_before": "2026-01-02T03:04:05Z"}`, ""},
		{"POST", "/api/v1/jobs", `{"steps": [{"op": "text", "text": "\u00e9"}], "priority": 1e99}`, ""},
		{"POST", "/api/v1/jobs", `[1, 2]`, ""},
		{"GET", "/api/v1/jobs?status=queued,failed&limit=3&cursor=ajE6Mw", "", ""},
		{"GET", "/api/v1/jobs/j1?wait=1ms", "", ""},
		{"POST", "/api/v1/jobs/j1/cancel", `{"reason": "x"}`, ""},
		{"GET", "/api/v1/agents", "", ""},
		{"POST", "/api/v1/agents/pc-1/drain", "", ""},
		{"PUT", "/api/v1/sessions/x", "{}", ""},
		{"GET", "/api/v1/../../etc/passwd", "", ""},
	} {
		f.Add(s.method, s.path, s.body, s.key)
	}
	st, err := sqlitestore.Open(f.Context(), filepath.Join(f.TempDir(), "jobs.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	secret, hash, err := api.NewToken()
	if err != nil {
		f.Fatal(err)
	}
	if _, err := st.CreateAPIToken(f.Context(), jobstore.APIToken{Name: "fuzz", Hash: hash, Projects: []string{"default", "lab"}, Scopes: jobstore.Scopes}); err != nil {
		f.Fatal(err)
	}
	if _, _, err := st.AgentHello(f.Context(), jobstore.AgentHello{AgentID: "pc-1", BootID: "b", Slots: 1,
		Devices: []protocol.Device{{Serial: "P1", State: protocol.DeviceReady, Tags: []string{"lab"}}}}); err != nil {
		f.Fatal(err)
	}
	h, err := api.New(api.Options{Store: st, OfflineAfter: time.Hour, Rate: 1e9, Burst: 1 << 30, MaxBodyBytes: 4096})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, path, body, key string) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequest(method, "http://api.test"+path, strings.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusNotImplemented {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		if method == http.MethodHead {
			return
		}
		var doc map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil && rec.Code != http.StatusMovedPermanently {
			t.Fatalf("%s %s: %d, not JSON: %q", method, path, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("%s %s: %d with %q", method, path, rec.Code, ct)
			}
			if s, _ := doc["status"].(float64); int(s) != rec.Code || doc["type"] == "" || doc["title"] == "" {
				t.Fatalf("%s %s: %d with problem %s", method, path, rec.Code, rec.Body)
			}
		}
	})
}
