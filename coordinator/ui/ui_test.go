package ui_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/ui"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// forKinds runs fn on each store.
func forKinds(t *testing.T, fn func(t *testing.T, kind string)) {
	for _, k := range kinds {
		t.Run(k, func(t *testing.T) { fn(t, k) })
	}
}

// TestLoginCookie: / sends a visitor without a session to the login page;
// a bad token is a 401 login page with p.error; a good one a session cookie
// (HttpOnly, SameSite=Strict, not Secure over plain HTTP) and a 303 to the
// fleet; the store keeps only the hash of the cookie's secret, so the
// session survives a restart of the coordinator; logout ends it.
func TestLoginCookie(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		e := newEnv(t, kind, nil)
		tok := e.token("ops", []string{"p1"}, "read")
		c := client()
		r := e.get(c, "/ui/")
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/login" {
			t.Fatalf("GET /ui/ without a session: %d %s", r.status, r.header.Get("Location"))
		}
		r = e.get(c, "/ui/login")
		r.one(t, `form#login input[name=token][type=password]`)
		r.one(t, `form#login button[type=submit]`)
		if f := r.one(t, `form#login`); attr(f, "method") != "post" || attr(f, "action") != "/ui/login" {
			t.Errorf("login form %v", f.Attr)
		}

		r = e.do(c, http.MethodPost, "/ui/login", url.Values{"token": {"edg_wrong"}}, nil)
		if r.status != http.StatusUnauthorized || len(r.all(`p.error`)) != 1 {
			t.Fatalf("bad token: %s", r)
		}
		if len(r.header.Values("Set-Cookie")) != 0 {
			t.Errorf("bad token set a cookie: %v", r.header.Values("Set-Cookie"))
		}

		r = e.do(c, http.MethodPost, "/ui/login", url.Values{"token": {tok}}, nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/fleet" {
			t.Fatalf("login: %s", r)
		}
		ck := (&http.Response{Header: r.header}).Cookies()
		if len(ck) != 1 || ck[0].Name != ui.CookieName || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Secure || ck[0].Path != "/ui/" {
			t.Fatalf("session cookie %+v", ck)
		}
		secret := ck[0].Value
		if _, tk, err := e.store.UISession(t.Context(), sha256.Sum256([]byte(secret))); err != nil || tk.Name != "ops" {
			t.Fatalf("session by the hash of the cookie: %+v, %v", tk, err)
		}
		var raw [sha256.Size]byte
		copy(raw[:], secret)
		if _, _, err := e.store.UISession(t.Context(), raw); !errors.Is(err, jobstore.ErrUISessionNotFound) {
			t.Errorf("the store knows the session by its secret: %v", err)
		}
		if r = e.get(c, "/ui/"); r.header.Get("Location") != "/ui/fleet" {
			t.Errorf("GET /ui/ with a session: %d %s", r.status, r.header.Get("Location"))
		}
		if r = e.get(c, "/ui/fleet"); r.status != http.StatusOK {
			t.Fatalf("fleet: %s", r)
		}
		csrf := r.csrf(t)

		// A coordinator restart: a new handler on the store reopened.
		st2 := openStore(t, kind, e.loc)
		h2, err := ui.New(ui.Options{Store: st2, OfflineAfter: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		srv2 := httptest.NewServer(h2)
		defer srv2.Close()
		req, _ := http.NewRequest(http.MethodGet, srv2.URL+"/ui/jobs", nil)
		req.AddCookie(&http.Cookie{Name: ui.CookieName, Value: secret})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ui/jobs" {
			t.Fatalf("the session after a restart: %d at %s", resp.StatusCode, resp.Request.URL)
		}

		r = e.do(c, http.MethodPost, "/ui/logout", url.Values{"csrf": {csrf}}, nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/login" {
			t.Fatalf("logout: %s", r)
		}
		if _, _, err := e.store.UISession(t.Context(), sha256.Sum256([]byte(secret))); !errors.Is(err, jobstore.ErrUISessionNotFound) {
			t.Errorf("session after logout: %v", err)
		}
		req, _ = http.NewRequest(http.MethodGet, e.srv.URL+"/ui/fleet", nil)
		req.AddCookie(&http.Cookie{Name: ui.CookieName, Value: secret})
		resp, err = client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login") {
			t.Errorf("the old cookie after logout: %d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
}

// TestSecureCookieBehindTLS: over TLS the cookie is Secure.
func TestSecureCookieBehindTLS(t *testing.T) {
	e := newEnv(t, "sqlite", nil)
	tok := e.token("ops", []string{"p1"}, "read")
	h, err := ui.New(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(h)
	defer srv.Close()
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.PostForm(srv.URL+"/ui/login", url.Values{"token": {tok}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ck := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(ck) != 1 || !ck[0].Secure || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("login over TLS: %d, cookies %+v", resp.StatusCode, ck)
	}
}

// TestRevokedTokenEndsSession: a session of a revoked token is refused.
func TestRevokedTokenEndsSession(t *testing.T) {
	e := newEnv(t, "sqlite", nil)
	tok := e.token("ops", []string{"p1"}, "read")
	c := e.login(tok)
	if _, err := e.store.RevokeAPIToken(t.Context(), "ops"); err != nil {
		t.Fatal(err)
	}
	if r := e.get(c, "/ui/fleet"); r.status != http.StatusSeeOther {
		t.Errorf("fleet with a revoked token's session: %s", r)
	}
	if r := e.bearerGet(tok, "/ui/fleet"); r.status != http.StatusSeeOther {
		t.Errorf("fleet with a revoked bearer token: %s", r)
	}
}

// TestBearer: every page accepts the API token as a bearer token.
func TestBearer(t *testing.T) {
	e := newEnv(t, "sqlite", nil)
	tok := e.token("ops", []string{"p1"}, "read")
	e.submit("j1", "p1", protocol.DeviceSelector{})
	for _, p := range []string{"/ui/fleet", "/ui/jobs", "/ui/jobs/j1"} {
		if r := e.bearerGet(tok, p); r.status != http.StatusOK {
			t.Errorf("GET %s with a bearer token: %s", p, r)
		}
		if r := e.bearerGet("edg_unknown", p); r.status != http.StatusSeeOther {
			t.Errorf("GET %s with an unknown bearer token: %d", p, r.status)
		}
	}
	// A token without scope read cannot log in.
	sub := e.token("submitter", []string{"p1"}, "submit")
	if r := e.do(client(), http.MethodPost, "/ui/login", url.Values{"token": {sub}}, nil); r.status != http.StatusUnauthorized || !strings.Contains(r.body, "lacks scope read") {
		t.Errorf("login without scope read: %s", r)
	}
}

// inDoubt makes an effect of job id in doubt: reserved by its first
// grant, which is then taken away.
func (e *env) inDoubt(id, agent string, dev protocol.Device) {
	e.t.Helper()
	ctx := e.t.Context()
	l := e.claim(agent, dev)
	if _, err := e.store.ReserveEffect(ctx, l.Token, jobstore.EffectIntent{Key: "pay-" + id, Step: 1, Op: "tap", Attempt: "a1"}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.Reassign(ctx, id, fencing.Owner(agent, "boot-1"), time.Minute); err != nil {
		e.t.Fatal(err)
	}
}

// TestScopesHideButtons: a read token sees no action; operate adds cancel
// and resolve, admin drain and resume, each leading to a confirmation.
func TestScopesHideButtons(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		e := newEnv(t, kind, nil)
		dev := ready("S1", "Pixel 7")
		e.hello("agent-a", dev)
		e.submit("j1", "p1", protocol.DeviceSelector{})
		e.inDoubt("j1", "agent-a", dev)
		for _, tc := range []struct {
			scopes                 []string
			drain, cancel, resolve int
		}{
			{[]string{"read"}, 0, 0, 0},
			{[]string{"read", "operate"}, 0, 1, 2},
			{[]string{"read", "admin"}, 1, 0, 0},
			{[]string{"read", "operate", "admin"}, 1, 1, 2},
		} {
			tok := e.token("t-"+strings.Join(tc.scopes, "-"), []string{"p1"}, tc.scopes...)
			c := e.login(tok)
			fleet, job := e.get(c, "/ui/fleet"), e.get(c, "/ui/jobs/j1")
			if got := len(fleet.all(`a.action-drain[data-agent=agent-a]`)); got != tc.drain {
				t.Errorf("%v: %d drain buttons, want %d", tc.scopes, got, tc.drain)
			}
			if got := len(job.all(`a.action-cancel`)); got != tc.cancel {
				t.Errorf("%v: %d cancel buttons, want %d", tc.scopes, got, tc.cancel)
			}
			if got := len(job.all(`a.action-resolve`)); got != tc.resolve {
				t.Errorf("%v: %d resolve buttons, want %d", tc.scopes, got, tc.resolve)
			}
			if tc.drain+tc.cancel+tc.resolve == 0 {
				for _, p := range []reply{fleet, job} {
					for _, a := range p.all(`a`) {
						if strings.HasPrefix(attr(a, "class"), "action-") {
							t.Errorf("read token sees %v", a.Attr)
						}
					}
				}
				if r := e.get(c, "/ui/agents/agent-a/drain"); r.status != http.StatusForbidden {
					t.Errorf("read token's drain confirmation: %d", r.status)
				}
			}
			for _, a := range append(fleet.all(`a.action-drain`), job.all(`a.action-cancel`)...) {
				r := e.get(c, attr(a, "href"))
				r.one(t, `form#confirm button[type=submit]`)
				r.one(t, `form#confirm input[name=csrf]`)
			}
		}
	})
}

// TestActions: each action goes through its confirmation form, needs the
// CSRF value (a forged POST is a 403 that changes nothing), acts through
// the store as the API does, is recorded with the token's name, and
// answers 303 back to its page.
func TestActions(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		e := newEnv(t, kind, nil)
		ctx := t.Context()
		dev := ready("S1", "Pixel 7")
		e.hello("agent-a", dev)
		e.submit("j1", "p1", protocol.DeviceSelector{})
		e.inDoubt("j1", "agent-a", dev)
		e.submit("j2", "p1", protocol.DeviceSelector{})
		tok := e.token("ops", []string{"p1"}, "read", "operate", "admin")
		c := e.login(tok)

		confirm := e.get(c, "/ui/agents/agent-a/drain")
		form := confirm.one(t, `form#confirm`)
		csrf := attr(confirm.one(t, `form#confirm input[name=csrf]`), "value")
		action := attr(form, "action")
		for name, f := range map[string]url.Values{"no csrf": {}, "wrong csrf": {"csrf": {"x" + csrf}}} {
			if r := e.do(c, http.MethodPost, action, f, nil); r.status != http.StatusForbidden {
				t.Errorf("drain with %s: %s", name, r)
			}
		}
		if r := e.do(c, http.MethodPost, action, url.Values{"csrf": {csrf}}, map[string]string{"Origin": "https://evil.example"}); r.status != http.StatusForbidden {
			t.Errorf("drain from another origin: %d", r.status)
		}
		// The CSRF value of another session is no good either.
		other := e.login(tok)
		if r := e.do(other, http.MethodPost, action, url.Values{"csrf": {csrf}}, nil); r.status != http.StatusForbidden {
			t.Errorf("drain with another session's csrf: %d", r.status)
		}
		if a, _ := e.store.GetAgent(ctx, "agent-a"); a.Draining {
			t.Fatal("a refused POST drained the agent")
		}
		r := e.do(c, http.MethodPost, action, url.Values{"csrf": {csrf}}, nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/fleet" {
			t.Fatalf("drain: %s", r)
		}
		if a, _ := e.store.GetAgent(ctx, "agent-a"); !a.Draining {
			t.Fatal("agent not draining after the drain")
		}
		fleet := e.get(c, "/ui/fleet")
		if st := text(fleet.one(t, `tr[data-agent=agent-a] td.state`)); st != "draining" {
			t.Errorf("agent state %q after the drain", st)
		}
		fleet.one(t, `a.action-resume[data-agent=agent-a]`)

		// Cancel, with a reason.
		confirm = e.get(c, "/ui/jobs/j2/cancel")
		r = e.do(c, http.MethodPost, attr(confirm.one(t, `form#confirm`), "action"), url.Values{"csrf": {csrf}, "text": {"wrong phone"}}, nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/jobs/j2" {
			t.Fatalf("cancel: %s", r)
		}
		if j, _ := e.store.Get(ctx, "j2"); j.Status != jobstore.StatusCancelled || j.FailReason != "wrong phone" {
			t.Errorf("j2 after the cancel: %s %q", j.Status, j.FailReason)
		}

		// Resolve.
		job := e.get(c, "/ui/jobs/j1")
		var retry string
		for _, a := range job.all(`a.action-resolve`) {
			if attr(a, "data-decision") == "retry" {
				retry = attr(a, "href")
			}
		}
		confirm = e.get(c, retry)
		f := url.Values{"csrf": {csrf}}
		for _, in := range confirm.all(`form#confirm input[type=hidden]`) {
			f.Set(attr(in, "name"), attr(in, "value"))
		}
		f.Set("csrf", csrf)
		r = e.do(c, http.MethodPost, "/ui/effects/resolve", f, nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/jobs/j1" {
			t.Fatalf("resolve: %s", r)
		}
		if eff, _ := e.store.GetEffect(ctx, "pay-j1"); eff.Resolution != jobstore.ResolveRetry || !strings.Contains(eff.Note, "ops") {
			t.Errorf("effect after resolve: %s %q", eff.Resolution, eff.Note)
		}

		acts, err := e.store.UIActions(ctx, jobstore.UIActionFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, a := range acts {
			got = append(got, a.TokenName+":"+a.Action+":"+a.Target)
		}
		if want := "ops:drain:agent-a ops:cancel:j2 ops:resolve:pay-j1"; strings.Join(got, " ") != want {
			t.Errorf("recorded actions %v, want %s", got, want)
		}
		if r := e.get(c, "/ui/jobs/j2"); !strings.Contains(text(r.one(t, `ul#actions`)), "cancel by ops") {
			t.Errorf("the job page does not say who cancelled:\n%s", r.body)
		}
	})
}

// TestEscaping: what agents, phones and researchers supply is escaped: a
// tag <script>alert(1)</script> is text, never markup.
func TestEscaping(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		e := newEnv(t, kind, nil)
		const xss = `<script>alert(1)</script>`
		dev := protocol.Device{Serial: "S1", State: protocol.DeviceResting, Model: `"><img src=x onerror=alert(2)>`, Tags: []string{xss}, Reason: xss}
		e.hello("agent-a", dev)
		e.submit("j1", "p1", protocol.DeviceSelector{Tags: []string{xss}})
		if _, err := e.store.Cancel(t.Context(), "j1", xss); err != nil {
			t.Fatal(err)
		}
		tok := e.token("ops", []string{"p1"}, "read", "operate", "admin")
		c := e.login(tok)
		for _, p := range []string{"/ui/fleet", "/ui/jobs", "/ui/jobs/j1"} {
			r := e.get(c, p)
			if r.status != http.StatusOK {
				t.Fatalf("%s: %s", p, r)
			}
			if strings.Contains(r.body, "<script>alert") || strings.Contains(r.body, "<img src=x") {
				t.Errorf("%s carries the markup unescaped:\n%s", p, r.body)
			}
			for _, s := range r.all(`script`) {
				if attr(s, "src") != "/ui/static/app.js" || text(s) != "" {
					t.Errorf("%s has a script other than app.js: %v %q", p, s.Attr, text(s))
				}
			}
			for _, img := range r.all(`img`) {
				if _, ok := attrOK(img, "onerror"); ok {
					t.Errorf("%s has an img with onerror", p)
				}
			}
		}
		fleet := e.get(c, "/ui/fleet")
		if got := text(fleet.one(t, `tr[data-phone=agent-a/S1] td.tags`)); got != xss {
			t.Errorf("tags cell %q, want the tag as text", got)
		}
		if !strings.Contains(fleet.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("the fleet does not show the tag escaped")
		}
	})
}

// TestProjectIsolation: jobs of projects a token does not cover appear on
// no page, their pages and streams answer 404 (recorded like the API's
// refusals), and a phone running one shows no job id.
func TestProjectIsolation(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		e := newEnv(t, kind, nil)
		dev := ready("S1", "Pixel 7")
		e.hello("agent-a", dev)
		e.submit("theirs", "p2", protocol.DeviceSelector{})
		e.claim("agent-a", dev)
		e.submit("mine", "p1", protocol.DeviceSelector{})
		tok := e.token("ops", []string{"p1"}, "read", "operate", "admin")
		c := e.login(tok)
		jobs := e.get(c, "/ui/jobs")
		jobs.one(t, `tr[data-job=mine]`)
		if strings.Contains(jobs.body, "theirs") {
			t.Errorf("the job list shows another project's job")
		}
		for _, p := range []string{"/ui/jobs/theirs", "/ui/jobs/theirs/cancel", "/ui/events?job=theirs", "/ui/jobs/theirs/artifacts/1/s.png"} {
			r := e.get(c, p)
			if r.status != http.StatusNotFound && !(strings.Contains(p, "artifacts") && r.status == http.StatusServiceUnavailable) {
				t.Errorf("GET %s: %d, want 404", p, r.status)
			}
		}
		if r := e.get(c, "/ui/jobs?project=p2"); r.status != http.StatusForbidden && r.status != http.StatusBadRequest || strings.Contains(r.body, `data-job="theirs"`) {
			t.Errorf("jobs of p2: %d", r.status)
		}
		r := e.do(c, http.MethodPost, "/ui/jobs/theirs/cancel", url.Values{"csrf": {e.get(c, "/ui/fleet").csrf(t)}}, nil)
		if r.status != http.StatusNotFound {
			t.Errorf("cancel of another project's job: %d", r.status)
		}
		if j, _ := e.store.Get(t.Context(), "theirs"); j.Status != jobstore.StatusInProgress {
			t.Errorf("another project's job is %s", j.Status)
		}
		fleet := e.get(c, "/ui/fleet")
		if got := text(fleet.one(t, `tr[data-phone=agent-a/S1] td.job`)); got != "busy" {
			t.Errorf("phone's job cell %q, want busy without the id", got)
		}
		ds, err := e.store.APIDenials(t.Context())
		var n int64
		for _, d := range ds {
			if d.TokenName != "ops" || d.Project != "p2" {
				t.Errorf("recorded denial %+v", d)
			}
			n += d.Count
		}
		if err != nil || n < 3 {
			t.Errorf("recorded denials %+v, %v", ds, err)
		}
	})
}

// TestPagination: the job list pages newest first, PageSize a page, with
// a.next to the older ones, no job twice, filters kept.
func TestPagination(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		e := newEnv(t, kind, nil)
		n := 2*ui.PageSize + 7
		var jobs []jobstore.JobSpec
		for i := range n {
			jobs = append(jobs, jobstore.JobSpec{ID: "job-" + string(rune('a'+i/26)) + string(rune('a'+i%26)), Project: "p1",
				Task: protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}}})
		}
		if _, err := e.store.SubmitAll(t.Context(), jobs); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Cancel(t.Context(), jobs[0].ID, "x"); err != nil {
			t.Fatal(err)
		}
		tok := e.token("ops", []string{"p1"}, "read")
		c := e.login(tok)
		seen := map[string]bool{}
		var order []string
		path := "/ui/jobs"
		for pages := 0; path != ""; pages++ {
			r := e.get(c, path)
			rows := r.all(`table#jobs tr[data-job]`)
			if pages < 2 && len(rows) != ui.PageSize || pages == 2 && len(rows) != 7 || pages > 2 {
				t.Fatalf("page %d has %d rows", pages, len(rows))
			}
			for _, tr := range rows {
				id := attr(tr, "data-job")
				if seen[id] {
					t.Fatalf("job %s on two pages", id)
				}
				seen[id] = true
				order = append(order, id)
			}
			path = ""
			if next := r.all(`a.next`); len(next) == 1 {
				path = attr(next[0], "href")
			}
		}
		if len(seen) != n || order[0] != jobs[n-1].ID || order[n-1] != jobs[0].ID {
			t.Errorf("%d jobs, first %s last %s", len(seen), order[0], order[n-1])
		}
		r := e.get(c, "/ui/jobs?status=CANCELLED")
		if rows := r.all(`tr[data-job]`); len(rows) != 1 || text(r.one(t, `tr[data-job] td.status`)) != "CANCELLED" {
			t.Errorf("cancelled jobs: %d rows", len(rows))
		}
		if r := e.get(c, "/ui/jobs?status=NOPE"); r.status != http.StatusBadRequest || !strings.Contains(text(r.one(t, `p.error`)), "status") {
			t.Errorf("bad status: %s", r)
		}
		if r := e.get(c, "/ui/jobs?cursor=zzz"); r.status != http.StatusBadRequest {
			t.Errorf("bad cursor: %d", r.status)
		}
	})
}

// sse reads the events of a stream.
type sse struct {
	sc   *bufio.Scanner
	resp *http.Response
}

func (e *env) stream(c *http.Client, path string) *sse {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.t.Context(), http.MethodGet, e.srv.URL+path, nil)
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		e.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &sse{sc: bufio.NewScanner(resp.Body), resp: resp}
}

// next returns the data of the next "job" event.
func (s *sse) next(t *testing.T) string {
	t.Helper()
	event := ""
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "job":
			return strings.TrimPrefix(line, "data: ")
		}
	}
	t.Fatalf("stream ended: %v", s.sc.Err())
	return ""
}

// TestLiveStatus: /ui/events, with the session cookie, sends each change
// of the caller's jobs with the job's new status, and nothing of other
// projects; ?job= follows one job.
func TestLiveStatus(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		e := newEnv(t, kind, nil)
		ctx := t.Context()
		dev := ready("S1", "Pixel 7")
		e.hello("agent-a", dev)
		tok := e.token("ops", []string{"p1"}, "read")
		c := e.login(tok)
		if r := e.get(client(), "/ui/events"); r.status != http.StatusUnauthorized {
			t.Errorf("events without a session: %d", r.status)
		}
		all := e.stream(c, "/ui/events")
		e.submit("other", "p2", protocol.DeviceSelector{Serial: "none"})
		e.submit("live", "p1", protocol.DeviceSelector{})
		if d := all.next(t); !strings.Contains(d, `"id":"live"`) || !strings.Contains(d, `"status":"QUEUED"`) {
			t.Fatalf("first event %s", d)
		}
		one := e.stream(c, "/ui/events?job=live")
		l := e.claim("agent-a", dev)
		if d := all.next(t); !strings.Contains(d, `"status":"IN_PROGRESS"`) || !strings.Contains(d, `"agent":"agent-a"`) {
			t.Fatalf("grant event %s", d)
		}
		if d := one.next(t); !strings.Contains(d, `"status":"IN_PROGRESS"`) {
			t.Fatalf("job stream's first event %s", d)
		}
		if err := e.store.Commit(ctx, l.Token, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if d := all.next(t); !strings.Contains(d, `"status":"SUCCEEDED"`) {
			t.Fatalf("end event %s", d)
		}
		if d := one.next(t); !strings.Contains(d, `"status":"SUCCEEDED"`) {
			t.Fatalf("job stream's second event %s", d)
		}
	})
}

// TestSecurityHeaders: every answer under /ui/ carries the headers of
// docs/ui.md, the 404 of an unknown page included.
func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t, "sqlite", func(o *ui.Options) { o.StorageOrigin = "http://127.0.0.1:9000" })
	tok := e.token("ops", []string{"p1"}, "read")
	c := e.login(tok)
	for _, p := range []string{"/ui/login", "/ui/fleet", "/ui/jobs", "/ui/projects/p1/observations", "/ui/nope", "/ui/static/app.js", "/ui/static/style.css", "/ui/"} {
		r := e.get(c, p)
		if p == "/ui/nope" && r.status != http.StatusNotFound {
			t.Errorf("%s: %d", p, r.status)
		}
		csp := r.header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "frame-ancestors 'none'", "script-src 'self';", "img-src 'self' http://127.0.0.1:9000"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", p, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP %q allows inline script", p, csp)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("%s: headers %v", p, r.header)
		}
	}
	if r := e.get(c, "/ui/static/app.js"); r.status != http.StatusOK || !strings.Contains(r.header.Get("Content-Type"), "javascript") || !strings.Contains(r.body, "EventSource") {
		t.Errorf("app.js: %d %s", r.status, r.header.Get("Content-Type"))
	}
	if _, err := ui.New(ui.Options{Store: e.store, StorageOrigin: "minio:9000"}); err == nil || !strings.Contains(err.Error(), "storage origin") {
		t.Errorf("a storage origin without a scheme: %v", err)
	}
}

// TestFleet: agents online, offline (by the database clock) and draining,
// with their phones' state, fix, platform, model, tags, health and current
// job.
func TestFleet(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		// An agent is offline once silent for offlineAfter on the database
		// clock: long enough that the agents greeted below are still
		// online when the page renders on a loaded machine.
		const offlineAfter = 2 * time.Second
		e := newEnv(t, kind, func(o *ui.Options) { o.OfflineAfter = offlineAfter })
		ctx := t.Context()
		level, temp := 81, 36.5
		good := ready("S1", "Pixel 7", "lab")
		good.Facts = &protocol.PhoneFacts{BatteryLevel: &level, BatteryTempC: &temp, AndroidVersion: "14", SDK: 34, ScreenWidth: 1080, ScreenHeight: 2400}
		e.hello("agent-old")
		testenv.Eventually(t, 10*time.Second, "agent-old offline", func() bool {
			a, err := e.store.GetAgent(ctx, "agent-old")
			return err == nil && a.SeenAgo > offlineAfter
		})
		e.hello("agent-a", good, protocol.Device{Serial: "S2", State: protocol.DeviceUnauthorized})
		iphone := ready("S3", "iPhone 15")
		iphone.Platform, iphone.Facts = protocol.PlatformIOS, &protocol.PhoneFacts{IOSVersion: "17.5.1"}
		e.hello("agent-d", iphone)
		if _, err := e.store.SetAgentDraining(ctx, "agent-d", true); err != nil {
			t.Fatal(err)
		}
		e.submit("run", "p1", protocol.DeviceSelector{Serial: "S1"})
		e.claim("agent-a", good)
		c := e.login(e.token("ops", []string{"p1"}, "read"))
		// The live agents beat just before each render; on a busy machine
		// the render may still come more than OfflineAfter later, so the
		// page is drawn again until it shows them live. agent-old never
		// beats again and must show offline every time.
		var r reply
		testenv.Eventually(t, 30*time.Second, "fleet page shows agent-a online and agent-d draining", func() bool {
			for _, id := range []string{"agent-a", "agent-d"} {
				if _, err := e.store.AgentHeartbeat(ctx, jobstore.AgentBeat{AgentID: id, BootID: "boot-1"}); err != nil {
					t.Fatal(err)
				}
			}
			r = e.get(c, "/ui/fleet")
			if got := text(r.one(t, `tr[data-agent=agent-old] td.state`)); got != "offline" {
				t.Fatalf("agent-old is %q, want offline", got)
			}
			return text(r.one(t, `tr[data-agent=agent-a] td.state`)) == "online" && text(r.one(t, `tr[data-agent=agent-d] td.state`)) == "draining"
		})
		if got := text(r.one(t, `tr[data-agent=agent-a] td.running`)); got != "1" {
			t.Errorf("agent-a runs %s", got)
		}
		p := `tr[data-phone=agent-a/S1]`
		if text(r.one(t, p+` td.state`)) != "device" || text(r.one(t, p+` td.model`)) != "Pixel 7" || text(r.one(t, p+` td.tags`)) != "lab" || text(r.one(t, p+` td.job`)) != "run" {
			t.Errorf("phone S1 row: %s", r.body)
		}
		if got := text(r.one(t, p+` td.platform`)); got != protocol.PlatformAndroid {
			t.Errorf("phone S1 platform %q", got)
		}
		if got, h := text(r.one(t, `tr[data-phone=agent-d/S3] td.platform`)), text(r.one(t, `tr[data-phone=agent-d/S3] td.health`)); got != protocol.PlatformIOS || h != "iOS 17.5.1" {
			t.Errorf("iPhone S3: platform %q, health %q", got, h)
		}
		if h := text(r.one(t, p+` td.health`)); !strings.Contains(h, "battery 81%") || !strings.Contains(h, "36.5 °C") || !strings.Contains(h, "Android 14 (SDK 34)") || !strings.Contains(h, "1080×2400") {
			t.Errorf("phone S1 health %q", h)
		}
		if got := text(r.one(t, `tr[data-phone=agent-a/S2] td.state`)); got != "unauthorized" {
			t.Errorf("S2 state %q", got)
		}
		if fix := text(r.one(t, `tr[data-fix=agent-a/S2]`)); !strings.Contains(fix, "USB debugging") {
			t.Errorf("S2 fix %q", fix)
		}
	})
}

// TestLoginNext: login returns to the dashboard page it was sent from,
// never to another site.
func TestLoginNext(t *testing.T) {
	e := newEnv(t, "sqlite", nil)
	tok := e.token("ops", []string{"p1"}, "read")
	r := e.get(client(), "/ui/jobs?status=QUEUED")
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/login?next=%2Fui%2Fjobs%3Fstatus%3DQUEUED" {
		t.Fatalf("a page without a session: %d %s", r.status, r.header.Get("Location"))
	}
	for next, want := range map[string]string{
		"/ui/jobs?status=QUEUED": "/ui/jobs?status=QUEUED",
		"//evil.example/ui/":     "/ui/fleet",
		"https://evil.example/":  "/ui/fleet",
		"/api/v1/jobs":           "/ui/fleet",
		"/ui/\\evil":             "/ui/fleet",
	} {
		r := e.do(client(), http.MethodPost, "/ui/login", url.Values{"token": {tok}, "next": {next}}, nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != want {
			t.Errorf("login with next %q: %d %s, want %s", next, r.status, r.header.Get("Location"), want)
		}
	}
	if r := e.do(client(), http.MethodPost, "/ui/login", url.Values{"token": {tok}}, map[string]string{"Origin": "https://evil.example"}); r.status != http.StatusForbidden {
		t.Errorf("a login posted from another site: %d", r.status)
	}
}

// TestLiveFromRender: an event published between the rendering of a page
// and the opening of its event stream still reaches the page: the page
// carries the event position it was rendered at (body's data-after) and
// the stream opened with ?after= replays from there (docs/ui.md, "Live
// updates").
func TestLiveFromRender(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		e := newEnv(t, kind, nil)
		dev := ready("S1", "Pixel 7")
		e.hello("agent-a", dev)
		e.submit("early", "p1", protocol.DeviceSelector{})
		c := e.login(e.token("ops", []string{"p1"}, "read"))
		for _, page := range []string{"/ui/jobs/early", "/ui/jobs"} {
			r := e.get(c, page)
			if r.status != http.StatusOK {
				t.Fatalf("GET %s: %s", page, r)
			}
			after, ok := attrOK(r.one(t, "body"), "data-after")
			if !ok {
				t.Fatalf("%s: body has no data-after\n%s", page, r.body)
			}
			if n, err := strconv.ParseInt(after, 10, 64); err != nil || n < 0 {
				t.Fatalf("%s: data-after %q", page, after)
			}
			if page != "/ui/jobs/early" {
				continue
			}
			// The job is granted after the render, and the broker has
			// passed that event before the stream connects.
			e.claim("agent-a", dev)
			var moved int64
			testenv.Eventually(t, 10*time.Second, "the broker passes the grant", func() bool {
				moved = e.broker.Cursor()
				return strconv.FormatInt(moved, 10) != after && moved > 0
			})
			s := e.stream(c, "/ui/events?job=early&after="+after)
			if d := s.next(t); !strings.Contains(d, `"status":"IN_PROGRESS"`) {
				t.Fatalf("first event after the render %s", d)
			}
		}
		if r := e.get(c, "/ui/events?after=x"); r.status != http.StatusBadRequest {
			t.Errorf("events after=x: %s", r)
		}
	})
}

// TestLoginRateLimit: after ui.LoginBurst failed logins from one address,
// every login from it (a good token's too) is answered 429 with
// Retry-After and a page saying so, while other addresses still log in
// (docs/ui.md, "Logging in").
func TestLoginRateLimit(t *testing.T) {
	e := newEnv(t, "sqlite", nil)
	good := e.token("ops", []string{"p1"}, "read")
	c := client()
	for i := range ui.LoginBurst {
		if r := e.do(c, http.MethodPost, "/ui/login", url.Values{"token": {"wrong"}}, nil); r.status != http.StatusUnauthorized {
			t.Fatalf("failed login %d: %s", i+1, r)
		}
	}
	for _, tok := range []string{"wrong", good} {
		r := e.do(c, http.MethodPost, "/ui/login", url.Values{"token": {tok}}, nil)
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "Too many failed logins") {
			t.Fatalf("login after %d failures: %s (Retry-After %q)", ui.LoginBurst, r, r.header.Get("Retry-After"))
		}
		if len(r.header.Values("Set-Cookie")) != 0 {
			t.Errorf("a refused login set a cookie")
		}
	}
	// Another address is not limited.
	req := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader(url.Values{"token": {good}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.RemoteAddr = "192.0.2.7:40000"
	rec := httptest.NewRecorder()
	e.srv.Config.Handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther {
		t.Errorf("login from another address: %d %s", rec.Code, rec.Body)
	}
}

// TestPostRefusals: a POST without a session is answered 401, one with a
// session but a missing or wrong CSRF value 403, one with the value but
// without the action's scope 403 (docs/ui.md, "Actions").
func TestPostRefusals(t *testing.T) {
	e := newEnv(t, "sqlite", nil)
	e.hello("agent-a", ready("S1", "Pixel 7"))
	for _, path := range []string{"/ui/agents/agent-a/drain", "/ui/jobs/none/cancel", "/ui/effects/resolve"} {
		if r := e.do(client(), http.MethodPost, path, url.Values{"csrf": {"x"}}, nil); r.status != http.StatusUnauthorized {
			t.Errorf("POST %s without a session: %s", path, r)
		}
	}
	op := e.login(e.token("op", []string{"p1"}, "read", "operate"))
	csrf := e.get(op, "/ui/fleet").csrf(t)
	for name, form := range map[string]url.Values{"no csrf": {}, "a wrong csrf": {"csrf": {"forged"}}} {
		if r := e.do(op, http.MethodPost, "/ui/agents/agent-a/drain", form, nil); r.status != http.StatusForbidden {
			t.Errorf("POST drain with %s: %s", name, r)
		}
	}
	if r := e.do(op, http.MethodPost, "/ui/agents/agent-a/drain", url.Values{"csrf": {csrf}}, nil); r.status != http.StatusForbidden || !strings.Contains(r.body, "lacks scope admin") {
		t.Errorf("POST drain without scope admin: %s", r)
	}
}

// countingGets counts the store's job reads by id.
type countingGets struct {
	ui.Store
	mu sync.Mutex
	n  map[string]int
}

func (c *countingGets) Get(ctx context.Context, id string) (jobstore.Job, error) {
	c.mu.Lock()
	c.n[id]++
	c.mu.Unlock()
	return c.Store.Get(ctx, id)
}

func (c *countingGets) reads(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// TestLiveStreamsShareJobReads: an event's job is read from the store
// once, however many live streams send it.
func TestLiveStreamsShareJobReads(t *testing.T) {
	var counted *countingGets
	e := newEnv(t, "sqlite", func(o *ui.Options) {
		counted = &countingGets{Store: o.Store.(ui.Store), n: map[string]int{}}
		o.Store = counted
	})
	tok := e.token("ops", []string{"p1"}, "read")
	c := e.login(tok)
	const n = 8
	streams := make([]*sse, n)
	for i := range streams {
		streams[i] = e.stream(c, "/ui/events")
	}
	e.submit("shared", "p1", protocol.DeviceSelector{Serial: "none"})
	for i, s := range streams {
		if d := s.next(t); !strings.Contains(d, `"id":"shared"`) || !strings.Contains(d, `"status":"QUEUED"`) {
			t.Fatalf("stream %d: first event %s", i, d)
		}
	}
	if got := counted.reads("shared"); got != 1 {
		t.Errorf("%d streams sent the job's event after %d reads of the job; want 1", n, got)
	}
}
