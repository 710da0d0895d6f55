package session_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/api/apitest"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// newBinaryEnv runs the real edgecoord binary (`edgecoord serve` with
// api.listen, on PostgreSQL, NATS and MinIO) and makes the test's tokens
// with `edgecoord token create`. e.api is a reverse proxy in front of the
// binary's API that checks every exchange through it against
// docs/openapi.yaml, those of examples/python/ai_loop.py included. Agents
// run in the test (startAgent) on the binary's NATS server.
func newBinaryEnv(t *testing.T, leaseTTL time.Duration) *env {
	t.Helper()
	e, dsn, mio := baseEnv(t)
	bin := testenv.Binary(t, "edgecoord")
	apiAddr := testenv.FreeAddr(t)
	config := filepath.Join(t.TempDir(), "edgecoord.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `coordinator_id: sessions-test
log:
  level: info
nats:
  url: %s
  request_timeout: 2s
store:
  driver: postgres
  dsn: %s
storage:
  endpoint: %s
  secure: false
  region: us-east-1
  bucket: %s
  access_key: %s
  secret_key: %s
lease:
  ttl: %s
  reap_interval: 100ms
scheduler:
  interval: 50ms
agents:
  heartbeat: 200ms
  offline_after: 3s
metrics:
  listen: ""
api:
  listen: %s
  rate: 1000
  burst: 1000
`, e.url, dsn, mio.Endpoint, mio.Bucket, mio.AccessKey, mio.SecretKey, leaseTTL, apiAddr), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr testenv.LockedBuffer
	cmd := exec.Command(bin, "serve", "-c", config)
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("edgecoord serve printed:\n%s", stderr.String())
		}
	})
	base := "http://" + apiAddr
	testenv.Eventually(t, 30*time.Second, "edgecoord serve ready with its API", func() bool {
		resp, err := http.Get(base + "/api/v1/openapi.json")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	st, err := pgstore.OpenExisting(e.ctx, dsn)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	e.store = st

	e.tokens = map[string]string{}
	for name, args := range map[string][]string{
		tokenOperator: {"--name", "alice", "--project", "lab", "--scopes", "read,submit,operate"},
		tokenReadOnly: {"--name", "rita", "--project", "lab", "--scopes", "read"},
		tokenOther:    {"--name", "oscar", "--project", "other", "--scopes", "read,submit,operate"},
	} {
		var out, errOut bytes.Buffer
		c := exec.CommandContext(t.Context(), bin, append(append([]string{"token", "create"}, args...), "-c", config)...)
		c.Stdout, c.Stderr = &out, &errOut
		if err := c.Run(); err != nil {
			t.Fatalf("edgecoord token create %v: %v: %s", args, err, errOut.String())
		}
		tok := strings.TrimSpace(out.String())
		if !strings.HasPrefix(tok, api.TokenPrefix) {
			t.Fatalf("edgecoord token create %v printed %q", args, out.String())
		}
		e.tokens[name] = tok
	}

	target, err := url.Parse(base)
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
