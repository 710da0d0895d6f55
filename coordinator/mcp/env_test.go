package mcp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
	"github.com/edgeagent/edgeagent/uploader"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env runs the real edgecoord binary (`edgecoord serve` with api.listen,
// on PostgreSQL, NATS and MinIO), with the test's API tokens made by
// `edgecoord token create`. Agents with simulated phones run in the test
// on the binary's NATS server.
type env struct {
	t      *testing.T
	ctx    context.Context
	nats   string
	base   string // the API's http://host:port
	store  *pgstore.Store
	pre    *coordinator.S3Presigner
	s3     *uploader.S3
	tokens map[string]string // by token name: alice, rita, oscar
	wg     sync.WaitGroup
}

// Token names of the test: alice may act in project lab, rita may only
// read lab, oscar may act in project other.
const (
	alice = "alice"
	rita  = "rita"
	oscar = "oscar"
)

func newEnv(t *testing.T, leaseTTL, idle time.Duration) *env {
	t.Helper()
	servers := e2e.NewEnv(t)
	mio := servers.MinIO()
	s3, err := uploader.NewS3(uploader.S3Options{Endpoint: mio.Endpoint, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey, Bucket: mio.Bucket})
	if err != nil {
		t.Fatalf("new s3: %v", err)
	}
	pre, err := coordinator.NewS3Presigner(coordinator.S3Options{Endpoint: mio.Endpoint, Region: "us-east-1", Bucket: mio.Bucket, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey})
	if err != nil {
		t.Fatalf("new presigner: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{t: t, ctx: ctx, nats: servers.NATSURL(), pre: pre, s3: s3}
	t.Cleanup(func() {
		cancel()
		e.wg.Wait()
	})

	c := servers.StartCoordinator(e2e.CoordinatorOptions{ID: "mcp-test", LeaseTTL: leaseTTL, API: true, Storage: true,
		Extra: fmt.Sprintf("api:\n  mcp_idle_timeout: %s\n", idle)})
	e.base, e.store = c.Base, c.Store()
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

func (e *env) conn(name, inbox string) *nats.Conn {
	e.t.Helper()
	nc, err := nats.Connect(e.nats, nats.Name(name), nats.CustomInboxPrefix(inbox),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		e.t.Fatalf("connect nats: %v", err)
	}
	e.t.Cleanup(nc.Close)
	return nc
}

// simAgent is an agent of the test; phone is its simulated phone (nil
// with phones over adb).
type simAgent struct {
	id    string
	a     *agent.Agent
	phone *capture.Simulated
	nc    *nats.Conn
	stop  context.CancelFunc
	done  chan struct{}
}

// startAgent runs agent id with one simulated phone (serial sim-<id>) until
// the test ends or kill.
func (e *env) startAgent(id string, phone capture.SimOptions) *simAgent {
	e.t.Helper()
	if phone.Serial == "" {
		phone.Serial = "sim-" + id
	}
	if phone.Width == 0 {
		phone.Width, phone.Height = 180, 320
	}
	sim := capture.NewSimulated(phone)
	inv := capture.NewInventory()
	if err := inv.Add(sim); err != nil {
		e.t.Fatal(err)
	}
	sa := e.startAgentWith(id, agent.InventoryPhones(inv, "", capture.OpLogOptions{}))
	sa.phone = sim
	return sa
}

// startAgentWith runs agent id with phones until the test ends or kill.
func (e *env) startAgentWith(id string, phones agent.Phones) *simAgent {
	e.t.Helper()
	sa := &simAgent{id: id, done: make(chan struct{})}
	sa.nc = e.conn(id, protocol.InboxPrefix(id))
	a, err := agent.New(agent.Options{
		AgentID: id, Conn: sa.nc, Phones: phones,
		Store: e.s3, SafetyMargin: 200 * time.Millisecond, RequestTimeout: time.Second,
		Log: zerolog.New(zerolog.NewTestWriter(e.t)).Level(zerolog.WarnLevel),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	sa.a = a
	ctx, cancel := context.WithCancel(e.ctx)
	sa.stop = cancel
	e.wg.Go(func() {
		defer close(sa.done)
		_ = a.Run(ctx)
	})
	e.t.Cleanup(cancel)
	testenv.Eventually(e.t, 10*time.Second, "agent "+id+" connected", a.Ready)
	return sa
}

// kill ends the agent as a crash would: its connection goes first, so it
// sends nothing more, then its process.
func (sa *simAgent) kill() {
	sa.nc.Close()
	sa.stop()
	<-sa.done
}

// ops counts the phone's operations by op.
func (sa *simAgent) ops() map[string]int {
	n := map[string]int{}
	for _, c := range sa.phone.History() {
		n[c.Op]++
	}
	return n
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
