package mcp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env runs the real edgecoord binary (`edgecoord serve` with api.listen,
// on PostgreSQL, NATS and MinIO), with the test's API tokens made by
// `edgecoord token create`. Agents with simulated phones run in the test
// on the binary's NATS server.
type env struct {
	t      *testing.T
	ctx    context.Context
	base   string // the API's http://host:port
	store  *pgstore.Store
	pre    *coordinator.S3Presigner
	tokens map[string]string // by token name: alice, rita, oscar
	// servers are the NATS, PostgreSQL and MinIO of the test.
	servers *e2e.Env
	// bin is the edgecoord binary.
	bin *e2e.Coordinator
}

// Token names of the test: alice may act in project lab, rita may only
// read lab, oscar may act in project other.
const (
	alice = "alice"
	rita  = "rita"
	oscar = "oscar"
)

// newEnv starts the binary with api.mcp_idle_timeout idle and extra
// (YAML) merged into its config.
func newEnv(t *testing.T, leaseTTL, idle time.Duration, extra ...string) *env {
	t.Helper()
	servers := e2e.NewEnv(t)
	mio := servers.MinIO()
	pre, err := coordinator.NewS3Presigner(coordinator.S3Options{Endpoint: mio.Endpoint, Region: "us-east-1", Bucket: mio.Bucket, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey})
	if err != nil {
		t.Fatalf("new presigner: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{t: t, ctx: ctx, pre: pre, servers: servers}
	t.Cleanup(cancel)

	c := servers.StartCoordinator(e2e.CoordinatorOptions{ID: "mcp-test", LeaseTTL: leaseTTL, API: true, Storage: true,
		Extra: fmt.Sprintf("api:\n  mcp_idle_timeout: %s\n", idle) + strings.Join(extra, "")})
	e.base, e.store, e.bin = c.Base, c.Store(), c
	e.tokens = map[string]string{
		alice: c.Token(t, alice, "lab", "read,submit,operate"),
		rita:  c.Token(t, rita, "lab", "read"),
		oscar: c.Token(t, oscar, "other", "read,submit,operate"),
	}
	return e
}

// bearer adds the token to every request, as an MCP client configured
// with an Authorization header does.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connect opens an MCP client session on the binary's /mcp with the
// token of name, using the SDK's own client.
func (e *env) connect(name string) *sdk.ClientSession {
	e.t.Helper()
	tok, ok := e.tokens[name]
	if !ok {
		tok = name
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "mcp-test", Version: "1"}, nil)
	tr := &sdk.StreamableClientTransport{Endpoint: e.base + api.MCPPath,
		HTTPClient: &http.Client{Transport: bearer{token: tok, next: http.DefaultTransport}}, DisableStandaloneSSE: true}
	cs, err := c.Connect(e.ctx, tr, nil)
	if err != nil {
		e.t.Fatalf("connect to %s as %s: %v", api.MCPPath, name, err)
	}
	e.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// startAgent runs agent id in the test process with one simulated phone
// (serial sim-<id>) until the test ends or Kill.
func (e *env) startAgent(id string, phone capture.SimOptions) *e2e.SimAgent {
	e.t.Helper()
	return e.servers.StartSimAgent(e2e.SimAgentOptions{ID: id, Phone: phone})
}

// get reads object key from storage.
func (e *env) get(key string) []byte {
	e.t.Helper()
	u, err := e.pre.PresignGet(e.ctx, key, time.Minute)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.Get(u)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: %d %v", key, resp.StatusCode, err)
	}
	return b
}
