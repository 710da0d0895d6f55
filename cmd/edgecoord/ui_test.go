package main

import (
	"bufio"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/coordinator/ui"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// uiGet fetches a dashboard page with c.
func uiGet(t *testing.T, c *http.Client, u string) (int, http.Header, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return resp.StatusCode, resp.Header, b.String()
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestUIBinary drives the dashboard of the real edgecoord serve
// (PostgreSQL, NATS, an agent): login sets the session cookie, the fleet
// shows the agent online, a job submitted through the API reaches
// SUCCEEDED on the dashboard's event stream, the drain button's form
// drains the agent (checked in the database, recorded with the token's
// name), a read-only token sees no action and its forged POST is refused,
// every route docs/ui.md lists is served, and no token reaches the log.
func TestUIBinary(t *testing.T) {
	env := e2e.NewEnv(t)
	ns := env.NATS()
	b := startAPIBinary(t, env)
	coordtest.Start(t, coordtest.Options{ID: "pc-1", URL: ns.ClientURL(), Slots: 1,
		Devices: []protocol.Device{{Serial: "P1", State: protocol.DeviceReady, Model: "Pixel 7", Tags: []string{"lab"}}}})
	ops := b.Token(t, "ops", "lab", "read,submit,operate,admin")
	reader := b.Token(t, "rita", "lab", "read")

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(b.Base+"/ui/login", url.Values{"token": {ops}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ck := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/fleet" || len(ck) != 1 ||
		ck[0].Name != ui.CookieName || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("login: %d %s %+v", resp.StatusCode, resp.Header.Get("Location"), ck)
	}
	testenv.Eventually(t, 10*time.Second, "the fleet shows pc-1 online", func() bool {
		code, hdr, body := uiGet(t, c, b.Base+"/ui/fleet")
		return code == http.StatusOK && strings.Contains(hdr.Get("Content-Security-Policy"), "frame-ancestors 'none'") &&
			regexp.MustCompile(`data-agent="pc-1"[^>]*>\s*<td class="id">pc-1</td>\s*<td class="state">online</td>`).MatchString(body)
	})

	// Live: a job submitted through the API turns SUCCEEDED on the stream.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, b.Base+"/ui/events", nil)
	stream, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("events: %d", stream.StatusCode)
	}
	if r := b.call(t, "POST", "/api/v1/jobs", ops, `{"id": "ui-1", "device": {"serial": "P1"}, "steps": [{"op": "screenshot", "name": "s.png"}]}`); r.status != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	sc := bufio.NewScanner(stream.Body)
	for done := false; !done; {
		if !sc.Scan() {
			t.Fatalf("event stream ended: %v", sc.Err())
		}
		line := sc.Text()
		done = strings.HasPrefix(line, "data: ") && strings.Contains(line, `"id":"ui-1"`) && strings.Contains(line, `"status":"SUCCEEDED"`)
	}
	if _, _, body := uiGet(t, c, b.Base+"/ui/jobs/ui-1"); !strings.Contains(body, `<li data-generation="1">`) || !strings.Contains(body, `id="job-status" class="status status-succeeded">SUCCEEDED<`) {
		t.Errorf("job page:\n%s", body)
	}

	// Drain through the confirmation form.
	_, _, page := uiGet(t, c, b.Base+"/ui/agents/pc-1/drain")
	m := csrfField.FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, `id="confirm"`) {
		t.Fatalf("drain confirmation:\n%s", page)
	}
	resp, err = c.PostForm(b.Base+"/ui/agents/pc-1/drain", url.Values{"csrf": {m[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("drain: %d", resp.StatusCode)
	}
	st, err := pgstore.OpenExisting(t.Context(), b.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if a, err := st.GetAgent(t.Context(), "pc-1"); err != nil || !a.Draining {
		t.Errorf("pc-1 after the drain: draining %v, %v", a.Draining, err)
	}
	acts, err := st.UIActions(t.Context(), jobstore.UIActionFilter{Target: "pc-1"})
	if err != nil || len(acts) != 1 || acts[0].TokenName != "ops" || acts[0].Action != jobstore.UIActionDrain {
		t.Errorf("recorded actions %+v, %v", acts, err)
	}

	// A read-only token: no buttons, and its forged POST is refused.
	rc := &http.Client{CheckRedirect: c.CheckRedirect}
	get := func(path string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, b.Base+path, nil)
		req.Header.Set("Authorization", "Bearer "+reader)
		resp, err := rc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			sb.WriteString(sc.Text())
		}
		return resp.StatusCode, sb.String()
	}
	for _, p := range []string{"/ui/fleet", "/ui/jobs/ui-1"} {
		if code, body := get(p); code != http.StatusOK || strings.Contains(body, "action-") {
			t.Errorf("read-only %s: %d, buttons: %v", p, code, strings.Contains(body, "action-"))
		}
	}
	req, _ = http.NewRequest(http.MethodPost, b.Base+"/ui/agents/pc-1/resume", strings.NewReader("csrf=forged"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+reader)
	if resp, err := rc.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("forged POST: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// Every route of docs/ui.md is served: none answers the 404 of an
	// unknown page.
	doc, err := os.ReadFile("../../docs/ui.md")
	if err != nil {
		t.Fatal(err)
	}
	routes := regexp.MustCompile("(?m)^\\| `(GET|POST) (/ui/[^`]*|/favicon\\.ico)` \\|").FindAllStringSubmatch(string(doc), -1)
	if len(routes) < 15 {
		t.Fatalf("docs/ui.md lists %d routes", len(routes))
	}
	fill := strings.NewReplacer("/agents/{id}", "/agents/pc-1", "/schedules/{id}", "/schedules/sch-000000000000", "/jobs/{id}", "/jobs/ui-1", "{gen}", "1", "{name}", "s.png", "{file}", "app.js", "{project}", "lab")
	for _, r := range routes {
		path := fill.Replace(r[2])
		req, _ := http.NewRequest(r[1], b.Base+path, strings.NewReader(""))
		req.Header.Set("Authorization", "Bearer "+ops)
		if r[1] == http.MethodPost {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := rc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		if resp.Header.Get("Content-Type") != "text/event-stream" { // a stream does not end
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				sb.WriteString(sc.Text())
			}
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound && strings.Contains(sb.String(), "has no page") || resp.StatusCode == http.StatusMethodNotAllowed {
			t.Errorf("%s %s (docs/ui.md) is not served: %d", r[1], path, resp.StatusCode)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: no security headers", r[1], path)
		}
	}
	// The icon a browser asks for by itself leads to the embedded SVG.
	if resp, err := http.Get(b.Base + "/favicon.ico"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" || resp.Request.URL.Path != "/ui/static/favicon.svg" {
			t.Errorf("GET /favicon.ico: %d %s at %s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Request.URL.Path)
		}
	}
	if code, _ := get("/ui/no-such-page"); code != http.StatusNotFound {
		t.Errorf("an unknown page: %d", code)
	}
	for _, tok := range []string{ops, reader} {
		if strings.Contains(b.Log(), tok) {
			t.Error("a token reached the coordinator's log")
		}
	}
}
