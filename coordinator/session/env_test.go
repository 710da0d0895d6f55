package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api/apitest"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/coordinator/session"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
	"github.com/edgeagent/edgeagent/uploader"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Bearer tokens of the test API (a stand-in for the API's token store).
const (
	tokenOperator = "tok-operator" // project lab, operate scope
	tokenReadOnly = "tok-read"     // project lab, no operate scope
	tokenOther    = "tok-other"    // project other, operate scope
)

// testAuth is a trivial bearer check standing in for the API's.
func testAuth(r *http.Request) (session.Caller, bool) {
	switch strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") {
	case tokenOperator:
		return session.Caller{Name: "alice", Projects: []string{"lab"}, CanOperate: true}, true
	case tokenReadOnly:
		return session.Caller{Name: "rita", Projects: []string{"lab"}}, true
	case tokenOther:
		return session.Caller{Name: "oscar", Projects: []string{"other"}, CanOperate: true}, true
	}
	return session.Caller{}, false
}

// env is a coordinator (PostgreSQL, embedded NATS, MinIO) serving the
// sessions API over HTTP, and agents with simulated phones. newEnv serves
// the handler alone on an httptest server, in front of an in-process
// coordinator (tests of the handler); newBinaryEnv runs the real
// edgecoord binary with its API (binary_test.go). Every exchange is
// checked against docs/openapi.yaml (coordinator/api/apitest).
type env struct {
	t      *testing.T
	ctx    context.Context
	url    string // NATS
	store  *pgstore.Store
	coord  *coordinator.Server // nil with the binary
	bin    *e2e.Coordinator    // the edgecoord binary; nil without it
	mgr    *session.Manager    // nil with the binary
	pre    *coordinator.S3Presigner
	s3     *uploader.S3
	api    *httptest.Server
	client *http.Client
	// tokens maps the test's token names (tokenOperator, ...) to the
	// tokens the API takes; a name not in it is sent as it is.
	tokens map[string]string
	// servers are the NATS, PostgreSQL and MinIO of the test.
	servers *e2e.Env

	lastType string // Content-Type of the last reply of call
}

// token is the bearer token the API takes for the test's name.
func (e *env) token(name string) string {
	if tok, ok := e.tokens[name]; ok {
		return tok
	}
	return name
}

// baseEnv starts NATS, PostgreSQL and MinIO and returns the env without
// a coordinator, and the servers it runs on.
func baseEnv(t *testing.T) (*env, *e2e.Env) {
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
	e := &env{t: t, ctx: ctx, url: servers.NATSURL(), pre: pre, s3: s3, servers: servers}
	t.Cleanup(cancel)
	return e, servers
}

func newEnv(t *testing.T, leaseTTL time.Duration) *env {
	t.Helper()
	e, servers := baseEnv(t)
	st, err := pgstore.Open(e.ctx, servers.Postgres())
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	e.store = st
	ctx, cancel := context.WithCancel(e.ctx)
	nc := e.conn("coord", coordinator.InboxPrefix)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	e.coord = coordinator.New(nc, st, coordinator.Options{
		LeaseTTL: leaseTTL, ReapInterval: 100 * time.Millisecond, ScheduleInterval: 50 * time.Millisecond,
		HeartbeatEvery: 200 * time.Millisecond, Presigner: e.pre, Log: log,
	})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := e.coord.Run(ctx); err != nil {
			t.Errorf("coordinator: %v", err)
		}
	})
	e.mgr = e.newManager(nc)
	e.api = httptest.NewServer(e.handler(e.mgr))
	e.client = apitest.Client(t)
	t.Cleanup(func() {
		e.api.Close()
		cancel()
		wg.Wait()
	})
	return e
}

// newManager is a session manager on the coordinator's connection nc, as
// the coordinator process builds it.
func (e *env) newManager(nc *nats.Conn) *session.Manager {
	m, err := session.New(session.ForServer(e.coord, e.store, nc, zerolog.New(zerolog.NewTestWriter(e.t)).Level(zerolog.WarnLevel)))
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// handler mounts the sessions handler alone, with the test's bearer check.
func (e *env) handler(m *session.Manager) http.Handler {
	mux := http.NewServeMux()
	h := session.NewHandler(m, testAuth)
	mux.Handle(session.PathPrefix, h)
	mux.Handle(session.PathPrefix+"/", h)
	return mux
}

func (e *env) conn(name, inbox string) *nats.Conn {
	e.t.Helper()
	nc, err := nats.Connect(e.url, nats.Name(name), nats.CustomInboxPrefix(inbox),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		e.t.Fatalf("connect nats: %v", err)
	}
	e.t.Cleanup(nc.Close)
	return nc
}

// startAgent runs agent id in the test process with one simulated phone
// (serial sim-<id>) until the test ends or Kill.
func (e *env) startAgent(id string, phone capture.SimOptions) *e2e.SimAgent {
	e.t.Helper()
	return e.servers.StartSimAgent(e2e.SimAgentOptions{ID: id, Phone: phone})
}

// call makes one API request and decodes the JSON reply into out (when not
// nil); it returns the status and the raw body.
func (e *env) call(method, path, token string, body any, out any) (int, []byte) {
	e.t.Helper()
	var (
		rd  io.Reader
		raw []byte
	)
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		raw = data
	}
	if body != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(e.ctx, method, e.api.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token(token))
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	e.lastType = resp.Header.Get("Content-Type")
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
	return resp.StatusCode, data
}

// problem is the RFC 9457 document the API answers errors with.
type problem struct {
	Type          string               `json:"type"`
	Title         string               `json:"title"`
	Status        int                  `json:"status"`
	Detail        string               `json:"detail"`
	Field         string               `json:"field"`
	JobID         string               `json:"job_id"`
	Generation    *int64               `json:"generation"`
	LastStep      *int                 `json:"last_step"`
	SessionStatus string               `json:"session_status"`
	Steps         []session.StepResult `json:"steps"`
}

func (e *env) wantProblem(what string, status int, body []byte, gotStatus int, contains ...string) problem {
	e.t.Helper()
	var p problem
	if err := json.Unmarshal(body, &p); err != nil {
		e.t.Fatalf("%s: decode problem %s: %v", what, body, err)
	}
	if gotStatus != status || p.Status != status || p.Type == "" || p.Title == "" {
		e.t.Fatalf("%s: status %d, problem %s; want %d", what, gotStatus, body, status)
	}
	if e.lastType != "application/problem+json" {
		e.t.Fatalf("%s: Content-Type %q, want application/problem+json", what, e.lastType)
	}
	for _, c := range contains {
		if !strings.Contains(string(body), c) {
			e.t.Fatalf("%s: problem %s does not contain %q", what, body, c)
		}
	}
	return p
}
