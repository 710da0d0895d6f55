package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/api/apitest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// startLimitsBinary is edgecoord serve from the real binary with the HTTP
// API and extra, the api section's limits under test.
func startLimitsBinary(t *testing.T, env *e2e.Env, extra string) *apiBinary {
	t.Helper()
	c := env.StartCoordinator(e2e.CoordinatorOptions{ID: "limits-test", API: true, LogLevel: "debug", Extra: extra})
	return &apiBinary{Coordinator: c, client: apitest.Client(t)}
}

// open sends GET path with token through client and returns the answer,
// whatever its status; its body is closed when the test ends. A guard
// against a hang ends it after 90s.
func (b *apiBinary) open(t *testing.T, client *http.Client, path, token string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	req, err := http.NewRequestWithContext(ctx, "GET", b.Base+path, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return resp
}

// wantRefused checks that resp is a 429 with Retry-After whose body names
// want.
func wantRefused(t *testing.T, what string, resp *http.Response, want string) {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), want) {
		t.Fatalf("%s: %d Retry-After %q %s; want 429 with Retry-After naming %s", what, resp.StatusCode, resp.Header.Get("Retry-After"), body, want)
	}
}

// wantStream checks that resp is an open event stream.
func wantStream(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %d %s %s; want an event stream", what, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

// TestAPIStreamCapsBinary: event streams and long polls, of the API and of
// the dashboard alike, are capped per token and per process; past a cap
// the answer is 429 with Retry-After, and a stream that ends frees its
// slot.
func TestAPIStreamCapsBinary(t *testing.T) {
	t.Parallel()
	env := e2e.NewEnv(t)
	b := startLimitsBinary(t, env, `
api:
  max_streams_per_token: 2
  max_streams: 3
`)
	alice := b.Token(t, "alice", "lab", "read,submit")
	bob := b.Token(t, "bob", "lab", "read")
	ui := &http.Client{}

	// A job no phone can run stays queued, for the long poll.
	r := b.call(t, "POST", "/api/v1/jobs", alice, `{"project": "lab", "device": {"serial": "no-such-phone"}, "steps": [{"op": "wait"}]}`)
	var job api.JobView
	r.into(t, &job)
	if r.status != 201 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}

	first := b.open(t, b.client, "/api/v1/events", alice)
	wantStream(t, "alice's first stream", first)
	wantStream(t, "alice's dashboard stream", b.open(t, ui, "/ui/events", alice))
	wantRefused(t, "alice's third stream", b.open(t, b.client, "/api/v1/events", alice), "api.max_streams_per_token")
	wantRefused(t, "alice's long poll past her cap", b.open(t, b.client, "/api/v1/jobs/"+job.ID+"?wait=30s", alice), "api.max_streams_per_token")
	wantRefused(t, "alice's job stream past her cap", b.open(t, b.client, "/api/v1/jobs/"+job.ID+"/events", alice), "api.max_streams_per_token")
	wantRefused(t, "alice's dashboard stream past her cap", b.open(t, ui, "/ui/events", alice), "api.max_streams_per_token")
	// Requests that are not streams are not counted.
	if r := b.call(t, "GET", "/api/v1/jobs/"+job.ID, alice, ""); r.status != 200 {
		t.Fatalf("show at the stream cap: %d %s", r.status, r.body)
	}

	// The process's cap: bob's first stream is the third in all.
	wantStream(t, "bob's first stream", b.open(t, b.client, "/api/v1/events", bob))
	wantRefused(t, "bob's second stream past the process's cap", b.open(t, b.client, "/api/v1/jobs/"+job.ID+"?wait=30s", bob), "api.max_streams")

	// A stream that ends frees its slot.
	first.Body.Close()
	testenv.Eventually(t, 30*time.Second, "a slot freed by a closed stream", func() bool {
		resp := b.open(t, b.client, "/api/v1/events", alice)
		if resp.StatusCode == http.StatusTooManyRequests {
			resp.Body.Close()
			return false
		}
		wantStream(t, "alice's stream after one ended", resp)
		return true
	})
	b.MustCleanShutdown(t)
}

// TestAPIRateLimitCoversDashboardBinary: a token's requests to the
// dashboard come out of the same rate limit as its API and MCP requests.
func TestAPIRateLimitCoversDashboardBinary(t *testing.T) {
	env := e2e.NewEnv(t)
	b := startLimitsBinary(t, env, `
api:
  rate: 1
  burst: 3
`)
	alice := b.Token(t, "alice", "lab", "read")
	for i := range 3 {
		if r := b.call(t, "GET", "/api/v1/jobs", alice, ""); r.status != 200 {
			t.Fatalf("request %d within the burst: %d %s", i+1, r.status, r.body)
		}
	}
	ui := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	wantRefused(t, "a dashboard page past the token's burst", b.open(t, ui, "/ui/fleet", alice), "requests per second")
	wantRefused(t, "a dashboard stream past the token's burst", b.open(t, ui, "/ui/events", alice), "requests per second")
	b.MustCleanShutdown(t)
}

// TestAPISlowBodyBinary: a client that sends its request body at 1 byte/s
// is cut off by api.read_timeout, with or without a token, while an event
// stream opened before, older than that timeout, keeps delivering; a
// kept-alive connection with no request is closed after api.idle_timeout.
func TestAPISlowBodyBinary(t *testing.T) {
	t.Parallel() // waits on slots and timeouts most of its time; its servers are its own
	env := e2e.NewEnv(t)
	b := startLimitsBinary(t, env, `
api:
  read_timeout: 2s
  idle_timeout: 1s
`)
	alice := b.Token(t, "alice", "lab", "read,submit")
	s := b.openStream(t, "/api/v1/events", alice)
	u, err := url.Parse(b.Base)
	if err != nil {
		t.Fatal(err)
	}

	type cut struct {
		reply string
		err   error
	}
	slow := func(token string) <-chan cut {
		out := make(chan cut, 1)
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		hdr := "POST /api/v1/jobs HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n"
		if token != "" {
			hdr += "Authorization: Bearer " + token + "\r\n"
		}
		if _, err := io.WriteString(conn, hdr+"\r\n{"); err != nil {
			t.Fatal(err)
		}
		go func() {
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for range tick.C {
				if _, err := io.WriteString(conn, " "); err != nil {
					return
				}
			}
		}()
		go func() {
			// A guard against a hang, so that the test ends with the logs.
			_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
			reply, err := io.ReadAll(conn)
			out <- cut{string(reply), err}
		}()
		return out
	}
	withToken, without := slow(alice), slow("")
	for what, ch := range map[string]<-chan cut{"with a token": withToken, "without a token": without} {
		c := <-ch
		var ne net.Error
		if errors.As(c.err, &ne) && ne.Timeout() {
			t.Fatalf("a body sent at 1 byte/s %s still held its connection after 60s (reply so far %q)", what, c.reply)
		}
		if what == "with a token" && !strings.Contains(c.reply, "api.read_timeout") {
			t.Errorf("the answer to a body cut off does not name api.read_timeout: %q", c.reply)
		}
		t.Logf("slow body %s: the coordinator answered %q and closed the connection (%v)", what, firstLine(c.reply), c.err)
	}

	// A kept-alive connection left idle after its request is closed.
	idle, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := io.WriteString(idle, "GET /api/v1/openapi.json HTTP/1.1\r\nHost: "+u.Host+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(idle)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("GET /api/v1/openapi.json: %d, close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	// A guard against a hang, so that the test ends with the logs.
	_ = idle.SetReadDeadline(time.Now().Add(60 * time.Second))
	if _, err := rd.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("a kept-alive connection with no request: read %v; want it closed by api.idle_timeout", err)
	}

	// The stream is older than the read timeout and still delivers.
	r := b.call(t, "POST", "/api/v1/jobs", alice, `{"project": "lab", "device": {"serial": "no-such-phone"}, "steps": [{"op": "wait"}]}`)
	var job api.JobView
	r.into(t, &job)
	if r.status != 201 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	for {
		f, ok := s.next(t)
		if !ok {
			t.Fatal("the event stream ended before the job's queued event")
		}
		if f.data.JobID == job.ID && f.event == jobstore.EventQueued {
			break
		}
	}
	b.MustCleanShutdown(t)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\r\n")
	return line
}

// mcpInit opens an MCP client session for token: the status and the
// session id of the answer.
func (b *apiBinary) mcpInit(t *testing.T, token, padding string) (int, string, string) {
	t.Helper()
	body := `{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "limits-test", "version": "1"}` + padding + `}}`
	req, err := http.NewRequestWithContext(t.Context(), "POST", b.Base+api.MCPPath, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
		t.Errorf("MCP 429 without Retry-After: %s", data)
	}
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(data)
}

// TestMCPLimitsBinary: an MCP request body is bounded by api.max_body_bytes
// like the API's, and the MCP client sessions one token holds open by
// api.max_mcp_sessions_per_token; a session that ends frees its slot.
func TestMCPLimitsBinary(t *testing.T) {
	env := e2e.NewEnv(t)
	b := startLimitsBinary(t, env, `
api:
  max_body_bytes: 64KiB
  max_mcp_sessions_per_token: 2
`)
	alice := b.Token(t, "alice", "lab", "read")
	bob := b.Token(t, "bob", "lab", "read")

	code, _, body := b.mcpInit(t, alice, `, "padding": "`+strings.Repeat("x", 100<<10)+`"`)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "api.max_body_bytes") {
		t.Fatalf("an MCP request of 100 KiB with api.max_body_bytes 64KiB: %d %.300s; want 413", code, body)
	}

	var ids []string
	for i := range 2 {
		code, id, body := b.mcpInit(t, alice, "")
		if code != http.StatusOK || id == "" {
			t.Fatalf("MCP session %d of alice: %d %q %.300s", i+1, code, id, body)
		}
		ids = append(ids, id)
	}
	if code, _, body := b.mcpInit(t, alice, ""); code != http.StatusTooManyRequests || !strings.Contains(body, "api.max_mcp_sessions_per_token") {
		t.Fatalf("alice's third MCP session: %d %.300s; want 429", code, body)
	}
	if code, id, body := b.mcpInit(t, bob, ""); code != http.StatusOK || id == "" {
		t.Fatalf("bob's MCP session while alice is at her cap: %d %.300s", code, body)
	}

	// Ending one of alice's sessions frees its slot.
	req, err := http.NewRequestWithContext(t.Context(), "DELETE", b.Base+api.MCPPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+alice)
	req.Header.Set("Mcp-Session-Id", ids[0])
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("DELETE of an MCP session: %d", resp.StatusCode)
	}
	testenv.Eventually(t, 30*time.Second, "a slot freed by an ended MCP session", func() bool {
		code, _, _ := b.mcpInit(t, alice, "")
		return code == http.StatusOK
	})
	b.MustCleanShutdown(t)
}

// TestRevokedTokenEndsWhatIsOpenBinary: after edgecoord token revoke, the
// token's open event streams (API and dashboard) end, its long poll is
// answered 401, its MCP client session and its phone session end and the
// phone is free again, within seconds and without the token's next
// request.
func TestRevokedTokenEndsWhatIsOpenBinary(t *testing.T) {
	t.Parallel()
	env := e2e.NewEnv(t)
	b := startLimitsBinary(t, env, `
lease:
  reap_interval: 200ms
`)
	env.StartSimAgent(e2e.SimAgentOptions{ID: "pc-1", Phone: capture.SimOptions{Model: "Pixel 7"}, RequestTimeout: 2 * time.Second})
	alice := b.Token(t, "alice", "lab", "read,submit,operate")
	root := b.Token(t, "root", "lab", "read,submit,operate")

	r := b.call(t, "POST", "/api/v1/sessions", alice, `{"project": "lab", "device": {"serial": "sim-pc-1"}}`)
	var sess struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	r.into(t, &sess)
	if r.status != 201 || sess.Status != "open" {
		t.Fatalf("open a phone session: %d %s", r.status, r.body)
	}
	r = b.call(t, "POST", "/api/v1/jobs", alice, `{"project": "lab", "device": {"serial": "no-such-phone"}, "steps": [{"op": "wait"}]}`)
	var job api.JobView
	r.into(t, &job)
	if r.status != 201 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	if code, id, body := b.mcpInit(t, alice, ""); code != 200 || id == "" {
		t.Fatalf("open an MCP session: %d %.300s", code, body)
	}

	apiStream := b.open(t, b.client, "/api/v1/events", alice)
	wantStream(t, "API stream", apiStream)
	uiStream := b.open(t, &http.Client{}, "/ui/events", alice)
	wantStream(t, "dashboard stream", uiStream)
	type polled struct {
		status int
		body   string
		err    error
	}
	poll := make(chan polled, 1)
	go func() {
		req, err := http.NewRequestWithContext(t.Context(), "GET", b.Base+"/api/v1/jobs/"+job.ID+"?wait=5m", nil)
		if err != nil {
			poll <- polled{err: err}
			return
		}
		req.Header.Set("Authorization", "Bearer "+alice)
		resp, err := b.client.Do(req)
		if err != nil {
			poll <- polled{err: err}
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		poll <- polled{resp.StatusCode, string(data), err}
	}()
	// Until the long poll waits, the revoke could come before it.
	b.WaitForLine(t, "the long poll waiting", func(l string) bool {
		return strings.Contains(l, `"message":"api: stream opened"`) && strings.Contains(l, `"path":"/api/v1/jobs/`+job.ID+`"`)
	})

	if out, errOut, code := b.CLI(t, "token", "revoke", "alice"); code != 0 {
		t.Fatalf("token revoke: exit %d, %q %q", code, out, errOut)
	}

	for what, resp := range map[string]*http.Response{"API stream": apiStream, "dashboard stream": uiStream} {
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatalf("the %s of a revoked token did not end: %v", what, err)
		}
	}
	p := <-poll
	if p.err != nil || p.status != http.StatusUnauthorized || !strings.Contains(p.body, "revoked") {
		t.Fatalf("the long poll of a revoked token: %d %s %v; want 401 naming the revocation", p.status, p.body, p.err)
	}
	testenv.Eventually(t, 30*time.Second, "the revoked token's phone session ended", func() bool {
		r := b.call(t, "GET", "/api/v1/sessions/"+sess.ID, root, "")
		r.into(t, &sess)
		return r.status == 200 && sess.Status != "open"
	})
	e := b.WaitForEntry(t, "api: ended what a revoked token held open")
	if e["token_name"] != "alice" || e["mcp_sessions"] != float64(1) || e["phone_sessions"] != float64(1) {
		t.Errorf("revocation log entry %v: want alice's MCP session and phone session ended", e)
	}
	// The phone is free again: root opens a session on it at once.
	r = b.call(t, "POST", "/api/v1/sessions", root, `{"project": "lab", "device": {"serial": "sim-pc-1"}}`)
	if r.status != 201 {
		t.Fatalf("a session on the phone the revoked token held: %d %s", r.status, r.body)
	}
	b.MustCleanShutdown(t)
}
