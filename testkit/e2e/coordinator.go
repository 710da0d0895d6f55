package e2e

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// CoordinatorOptions are what a test chooses of an edgecoord config; the
// rest is fixed for fast tests (scheduler every 50ms, agents' heartbeat
// every 200ms and offline after 3s, reaper every 100ms, /metrics on).
type CoordinatorOptions struct {
	// ID is coordinator_id; default "e2e".
	ID string
	// LeaseTTL is lease.ttl; default 3s.
	LeaseTTL time.Duration
	// API turns the HTTP API (and the dashboard, MCP) on at a free
	// address, with a rate limit no test reaches (1000/s).
	API bool
	// Storage puts artifacts in the Env's MinIO bucket (storage section).
	Storage bool
	// LogLevel is log.level; default info.
	LogLevel string
	// Extra is YAML merged into the config: a mapping present in both is
	// merged key by key, anything else replaces the default.
	Extra string
}

// Coordinator is an edgecoord config on the Env's servers and, once
// started, its `edgecoord serve` process.
type Coordinator struct {
	env *Env
	// Config is the path of the config file.
	Config string
	// DSN is the PostgreSQL database of its store.
	DSN string
	// Base is the API's http://host:port ("" without API).
	Base string
	// MetricsAddr is host:port of /metrics, /healthz and /readyz.
	MetricsAddr string
	// Process is the running `edgecoord serve` (nil before Start).
	*Process

	storeOnce sync.Once
	store     *pgstore.Store
}

// StartCoordinator writes a config from opts and starts `edgecoord serve`
// with it, once it is ready: /readyz answers 200 and, with the API, so does
// GET /api/v1/openapi.json.
func (e *Env) StartCoordinator(opts CoordinatorOptions) *Coordinator {
	e.t.Helper()
	c := e.NewCoordinator(opts)
	c.Start()
	return c
}

// NewCoordinator writes a config from opts without starting serve, for the
// commands that work on the store alone (job wait, artifact get, token).
func (e *Env) NewCoordinator(opts CoordinatorOptions) *Coordinator {
	e.t.Helper()
	if opts.ID == "" {
		opts.ID = "e2e"
	}
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = 3 * time.Second
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "info"
	}
	c := &Coordinator{env: e, DSN: e.Postgres(), MetricsAddr: testenv.FreeAddr(e.t)}
	cfg := map[string]any{
		"coordinator_id": opts.ID,
		"log":            map[string]any{"level": opts.LogLevel},
		"nats":           map[string]any{"url": e.NATSURL(), "request_timeout": "2s"},
		"store":          map[string]any{"driver": "postgres", "dsn": c.DSN},
		"lease":          map[string]any{"ttl": opts.LeaseTTL.String(), "reap_interval": "100ms"},
		"scheduler":      map[string]any{"interval": "50ms"},
		"agents":         map[string]any{"heartbeat": "200ms", "offline_after": "3s"},
		"metrics":        map[string]any{"listen": c.MetricsAddr},
	}
	if opts.Storage {
		m := e.MinIO()
		cfg["storage"] = map[string]any{"endpoint": m.Endpoint, "secure": false, "region": "us-east-1",
			"bucket": m.Bucket, "access_key": m.AccessKey, "secret_key": m.SecretKey}
	}
	if opts.API {
		addr := testenv.FreeAddr(e.t)
		c.Base = "http://" + addr
		cfg["api"] = map[string]any{"listen": addr, "rate": 1000, "burst": 1000}
	}
	c.Config = e.writeConfig("edgecoord", cfg, opts.Extra)
	return c
}

// Start starts `edgecoord serve` and waits until it is ready; it may be
// called again once the process has exited.
func (c *Coordinator) Start() *Process {
	t := c.env.t
	t.Helper()
	p := Start(t, Command{Path: testenv.Binary(t, "edgecoord"), Args: []string{"serve", "-c", c.Config}, Name: "edgecoord serve"})
	c.Process = p
	client := &http.Client{Timeout: 5 * time.Second} // a probe, polled again when it times out
	ready := func(url string) bool {
		if p.Exited() {
			t.Fatalf("edgecoord serve exited (status %d) before it was ready", p.cmd.ProcessState.ExitCode())
		}
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	testenv.Eventually(t, WaitTimeout, "edgecoord serve ready", func() bool { return ready("http://" + c.MetricsAddr + "/readyz") })
	if c.Base != "" {
		testenv.Eventually(t, WaitTimeout, "edgecoord serve ready with its API", func() bool { return ready(c.Base + "/api/v1/openapi.json") })
	}
	return p
}

// CLI runs `edgecoord <args> -c <config>` and returns what it printed and
// its exit status.
func (c *Coordinator) CLI(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return Run(t, Command{Path: testenv.Binary(t, "edgecoord"), Args: append(append([]string(nil), args...), "-c", c.Config)})
}

// Token makes an API token with `edgecoord token create` for projects
// (comma-separated) with scopes and returns it; the command must exit 0,
// print the token alone and warn on stderr that it is shown this once.
func (c *Coordinator) Token(t testing.TB, name, projects, scopes string) string {
	t.Helper()
	out, errOut, code := c.CLI(t, "token", "create", "--name", name, "--project", projects, "--scopes", scopes)
	tok := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(tok, api.TokenPrefix) || strings.Contains(tok, "\n") || !strings.Contains(errOut, "shown this once") {
		t.Fatalf("edgecoord token create --name %s: exit %d, stdout %q, stderr %q", name, code, out, errOut)
	}
	return tok
}

// Store is the coordinator's store, opened on the same database (without
// migrating it), closed when the test ends.
func (c *Coordinator) Store() *pgstore.Store {
	t := c.env.t
	t.Helper()
	c.storeOnce.Do(func() {
		st, err := pgstore.OpenExisting(context.Background(), c.DSN)
		if err != nil {
			t.Fatalf("open the coordinator's store: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		c.store = st
	})
	if c.store == nil {
		t.Fatal("the coordinator's store could not be opened")
	}
	return c.store
}
