package session_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api/apitest"
	"github.com/edgeagent/edgeagent/testkit/e2e"
)

// newBinaryEnv runs the real edgecoord binary (`edgecoord serve` with
// api.listen, on PostgreSQL, NATS and MinIO) and makes the test's tokens
// with `edgecoord token create`. e.api is a reverse proxy in front of the
// binary's API that checks every exchange through it against
// docs/openapi.yaml, those of examples/python/ai_loop.py included. Agents
// run in the test (startAgent) on the binary's NATS server.
func newBinaryEnv(t *testing.T, leaseTTL time.Duration) *env {
	t.Helper()
	e, servers := baseEnv(t)
	c := servers.StartCoordinator(e2e.CoordinatorOptions{ID: "sessions-test", LeaseTTL: leaseTTL, API: true, Storage: true})
	e.store = c.Store()
	e.bin = c
	e.tokens = map[string]string{
		tokenOperator: c.Token(t, "alice", "lab", "read,submit,operate"),
		tokenReadOnly: c.Token(t, "rita", "lab", "read"),
		tokenOther:    c.Token(t, "oscar", "other", "read,submit,operate"),
	}

	target, err := url.Parse(c.Base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	checked := apitest.NewTransport(t, nil)
	proxy.Transport = checked
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		t.Errorf("proxy %s %s: %v", r.Method, r.URL.Path, err)
		w.WriteHeader(http.StatusBadGateway)
	}
	e.api = httptest.NewServer(proxy)
	t.Cleanup(func() {
		e.api.Close()
		if checked.Checked() == 0 {
			t.Error("no exchange with the API was checked against docs/openapi.yaml")
		}
		t.Logf("%d exchanges with the API checked against docs/openapi.yaml", checked.Checked())
	})
	e.client = http.DefaultClient
	return e
}
