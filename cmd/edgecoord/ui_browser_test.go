package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/testkit/browsertest"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// envUpdateScreenshots=1 makes TestUIBrowser write its screenshots of the
// dashboard to docs/images (shown in README.md) instead of a temporary
// directory.
const envUpdateScreenshots = "EDGE_UPDATE_SCREENSHOTS"

// xssTag is a phone tag that is a script: the dashboard must show it as
// text. xssFlagTag would set window.xssRan if it
// ever ran, and so would xssReason, the reason of a cancel typed on the
// dashboard and shown on the job page.
const (
	xssTag     = `<script>alert(1)</script>`
	xssFlagTag = `<img src=x onerror="window.xssRan=1;alert(2)">`
	xssReason  = `<script>window.xssRan=1;alert(3)</script>`
)

// uiLab is the real edgecoord binary (serve, with the API and the
// dashboard on PostgreSQL, NATS and MinIO) and two real edgeagent binaries
// with simulated phones.
type uiLab struct {
	*e2e.Coordinator
	store  *pgstore.Store
	client *http.Client // no cookie jar, no redirects followed
}

func startUILab(t *testing.T) *uiLab {
	t.Helper()
	env := e2e.NewEnv(t)
	c := env.StartCoordinator(e2e.CoordinatorOptions{ID: "ui-test", API: true, Storage: true})
	l := &uiLab{Coordinator: c, store: c.Store(),
		client: &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	sim := func(serial string, tags ...string) e2e.Phone {
		return e2e.Phone{Serial: serial, Simulated: true, Tags: append([]string{"lab"}, tags...)}
	}
	env.StartAgent(e2e.AgentOptions{ID: "pc-a", Phones: []e2e.Phone{sim("sim-a1", xssTag, xssFlagTag), sim("sim-a2")}})
	env.StartAgent(e2e.AgentOptions{ID: "pc-b", Phones: []e2e.Phone{sim("sim-b1"), sim("sim-b2")}})
	return l
}

// token creates an API token for project lab with `edgecoord token create`.
func (l *uiLab) token(t *testing.T, name, scopes string) string {
	t.Helper()
	return l.Token(t, name, "lab", scopes)
}

// do sends one request with the plain HTTP client (no cookie jar, no
// redirect followed).
func (l *uiLab) do(t *testing.T, method, path, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, l.Base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := l.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(data)
}

// submit submits a job through the HTTP API and returns its id.
func (l *uiLab) submit(t *testing.T, token, body string) string {
	t.Helper()
	status, _, reply := l.do(t, "POST", "/api/v1/jobs", body, "Authorization", "Bearer "+token, "Content-Type", "application/json")
	var j api.JobView
	if err := json.Unmarshal([]byte(reply), &j); status != http.StatusCreated || err != nil || j.ID == "" {
		t.Fatalf("submit %s: %d %s", body, status, reply)
	}
	return j.ID
}

func (l *uiLab) agent(t *testing.T, id string) jobstore.Agent {
	t.Helper()
	a, err := l.store.GetAgent(t.Context(), id)
	if err != nil {
		t.Fatalf("get agent %s: %v", id, err)
	}
	return a
}

// screenshotPath is where a screenshot of the dashboard goes: docs/images
// with EDGE_UPDATE_SCREENSHOTS=1, else the test's temporary directory.
func screenshotPath(dir, name string) string {
	if os.Getenv(envUpdateScreenshots) == "1" {
		return filepath.Join("..", "..", "docs", "images", name)
	}
	return filepath.Join(dir, name)
}

// jsString quotes s for a JavaScript expression.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// jsText is the trimmed text of the first element matching sel, "" when
// there is none.
func jsText(sel string) string {
	return `((document.querySelector(` + jsString(sel) + `) || {}).textContent || "").trim()`
}

// noXSS checks the page of the tab for the injected markup of the test:
// no dialog opened and the flag it would set is unset.
func noXSS(t *testing.T, tab *browsertest.Tab, where string) {
	t.Helper()
	if browsertest.Eval[bool](t, tab, `window.xssRan !== undefined`) {
		t.Errorf("an injected script ran on %s", where)
	}
	if d := tab.Dialogs(); len(d) != 0 {
		t.Errorf("JavaScript dialogs opened by %s: %q", where, d)
	}
}

// waitLive waits until the page's live updates are connected: the
// dashboard's script shows "live" in #live-state once its event stream is
// open (docs/ui.md). A change made before may not reach the page.
func waitLive(t *testing.T, tab *browsertest.Tab) {
	t.Helper()
	tab.WaitJS(t, 30*time.Second, "the page's live updates connected", jsText(`#live-state`)+` === "live"`)
}

// pageErrors are the errors the tab's pages logged, but for the 403
// answers to the test's own forged POSTs, which the browser logs as failed
// loads.
func pageErrors(tab *browsertest.Tab) []string {
	var out []string
	for _, e := range tab.Errors() {
		if strings.Contains(e, "status of 403") && strings.HasSuffix(e, "/drain") {
			continue
		}
		out = append(out, e)
	}
	return out
}

// noActions is true when no element's class starts an action (.action-*).
const noActions = `document.querySelectorAll('[class^="action-"], [class*=" action-"]').length === 0`

// TestUIBrowser drives the dashboard in headless Chromium against the real
// edgecoord binary (PostgreSQL, NATS, MinIO) and two real edgeagent
// binaries with simulated phones (the pages and their elements are those
// of docs/ui.md): login with a token;
// the fleet with both agents and their phones; a job submitted through the
// API that appears and turns SUCCEEDED without a reload; its page with the
// screenshot decoded and the generation timeline; a forced reassignment
// whose old holder's stale write is refused and listed; drain and resume
// through their confirmation pages, checked in the database, and a cancel
// with its reason, each recorded with its token; a read-only token that
// sees no action, and forged POSTs (no CSRF value, a foreign cookie)
// refused from the browser and from a plain HTTP client; phone tags and a
// cancel reason that are markup, shown as text and never run. It saves
// screenshots of the fleet, the job list and a job page (docs/images with
// EDGE_UPDATE_SCREENSHOTS=1).
func TestUIBrowser(t *testing.T) {
	t.Parallel()                    // its servers, agents and browser are its own
	browser := browsertest.Start(t) // first: skips before the servers start when there is no browser
	l := startUILab(t)
	operator := l.token(t, "olga", "read,submit,operate,admin")
	reader := l.token(t, "rita", "read")
	shots := t.TempDir()

	testenv.Eventually(t, 30*time.Second, "both agents online with their two phones", func() bool {
		for _, id := range []string{"pc-a", "pc-b"} {
			a, err := l.store.GetAgent(t.Context(), id)
			if err != nil || !a.Online(3*time.Second) || len(a.Devices) != 2 {
				return false
			}
		}
		return true
	})

	op := browser.NewTab(t)
	const within = 30 * time.Second
	login := func(tab *browsertest.Tab, token string) {
		t.Helper()
		tab.Do(t, "open /ui/", chromedp.Navigate(l.Base+"/ui/"))
		tab.WaitJS(t, within, "the login page", `location.pathname === "/ui/login" && !!document.querySelector("form#login input[name=token][type=password]")`)
		tab.Do(t, "log in",
			chromedp.SendKeys(`form#login input[name=token]`, token),
			chromedp.Click(`form#login button[type=submit]`))
		tab.WaitJS(t, within, "the fleet page after the login", `location.pathname === "/ui/fleet" && !!document.querySelector("table#agents")`)
	}

	t.Run("login", func(t *testing.T) {
		// A bad token: 401 with the login page and its error.
		status, _, body := l.do(t, "POST", "/ui/login", "token="+url.QueryEscape(api.TokenPrefix+"nope"), "Content-Type", "application/x-www-form-urlencoded")
		if status != http.StatusUnauthorized || !strings.Contains(body, `class="error"`) {
			t.Errorf("login with a bad token: %d\n%.400s", status, body)
		}
		login(op, operator)
		var session bool
		for _, c := range op.Cookies(t) {
			if c.Name == "edgecoord_session" {
				session = true
				if !c.HTTPOnly || c.SameSite != "Strict" {
					t.Errorf("session cookie HttpOnly %v, SameSite %q", c.HTTPOnly, c.SameSite)
				}
				if strings.Contains(operator, c.Value) || strings.Contains(c.Value, operator) {
					t.Error("the session cookie carries the API token")
				}
			}
		}
		if !session {
			t.Fatalf("no edgecoord_session cookie after the login: %v", op.Cookies(t))
		}
	})

	t.Run("fleet", func(t *testing.T) {
		op.Do(t, "open the fleet", chromedp.Navigate(l.Base+"/ui/fleet"))
		for _, a := range []string{"pc-a", "pc-b"} {
			op.WaitJS(t, within, a+" online", jsText(`table#agents tr[data-agent="`+a+`"] td.state`)+` === "online"`)
		}
		for _, p := range []string{"pc-a/sim-a1", "pc-a/sim-a2", "pc-b/sim-b1", "pc-b/sim-b2"} {
			if !browsertest.Eval[bool](t, op, `!!document.querySelector(`+jsString(`table#phones tr[data-phone="`+p+`"] td.state`)+`)`) {
				t.Errorf("the fleet lists no phone %s", p)
			}
		}
		if n := browsertest.Eval[int](t, op, `document.querySelectorAll("table#phones tr[data-phone]").length`); n != 4 {
			t.Errorf("the fleet lists %d phones, want 4", n)
		}
		// The tags are shown as text, and never run.
		tags := browsertest.Eval[string](t, op, jsText(`table#phones tr[data-phone="pc-a/sim-a1"] td.tags`))
		if !strings.Contains(tags, xssTag) || !strings.Contains(tags, xssFlagTag) {
			t.Errorf("tags of pc-a/sim-a1 shown as %q, want the text of %q and %q", tags, xssTag, xssFlagTag)
		}
		if n := browsertest.Eval[int](t, op, `document.querySelectorAll("table#phones script, table#phones img[src=x]").length`); n != 0 {
			t.Errorf("the tags made %d elements", n)
		}
		noXSS(t, op, "the fleet")
		// The operator sees the drain buttons.
		for _, a := range []string{"pc-a", "pc-b"} {
			if !browsertest.Eval[bool](t, op, `!!document.querySelector('a.action-drain[data-agent="`+a+`"]')`) {
				t.Errorf("no drain button for %s", a)
			}
		}
	})

	var jobID string
	t.Run("job list updates live", func(t *testing.T) {
		op.Do(t, "open the job list", chromedp.Click(`nav a#nav-jobs`))
		op.WaitJS(t, within, "the job list", `location.pathname === "/ui/jobs" && !!document.querySelector("table#jobs") && !!document.querySelector("form#filter select[name=status]")`)
		// Set on this page: a reload would lose it.
		browsertest.Eval[int](t, op, `window.notReloaded = 1`)
		waitLive(t, op)
		jobID = l.submit(t, operator, `{"device": {"serial": "sim-a1"}, "steps": [{"op": "screenshot", "name": "home.png"}], "timeout": "90s"}`)
		row := `table#jobs tr[data-job="` + jobID + `"]`
		op.WaitJS(t, within, "the new job in the list", `!!document.querySelector(`+jsString(row)+`)`)
		op.WaitJS(t, within, "the job SUCCEEDED in the list", jsText(row+` td.status`)+` === "SUCCEEDED"`)
		if !browsertest.Eval[bool](t, op, `window.notReloaded === 1`) {
			t.Error("the job list was reloaded")
		}
		if j, err := l.store.Get(t.Context(), jobID); err != nil || j.Status != jobstore.StatusSucceeded {
			t.Fatalf("job in the store: %+v, %v", j, err)
		}
	})

	t.Run("job page", func(t *testing.T) {
		op.Do(t, "open the job page", chromedp.Navigate(l.Base+"/ui/jobs/"+jobID))
		op.WaitJS(t, within, "the job page", `location.pathname === "/ui/jobs/`+jobID+`" && !!document.querySelector("td#job-status")`)
		if st := browsertest.Eval[string](t, op, jsText(`td#job-status`)); st != "SUCCEEDED" {
			t.Errorf("job status %q", st)
		}
		op.WaitJS(t, within, "the screenshot decoded", `(() => { const i = document.querySelector("section#oplog img.screenshot"); return !!i && i.complete && i.naturalWidth > 0 })()`)
		gen := browsertest.Eval[string](t, op, jsText(`ol#generations li[data-generation="1"]`))
		if !strings.Contains(gen, "pc-a") {
			t.Errorf("generation 1 shown as %q, want its holder pc-a", gen)
		}
		if log := browsertest.Eval[string](t, op, jsText(`section#oplog`)); !strings.Contains(log, "home.png") {
			t.Errorf("the operation log does not name the screenshot home.png:\n%s", log)
		}
	})

	t.Run("fleet thumbnail", func(t *testing.T) {
		op.Do(t, "open the fleet", chromedp.Click(`nav a#nav-fleet`))
		op.WaitJS(t, within, "the thumbnail of sim-a1 decoded", `(() => { const i = document.querySelector('table#phones tr[data-phone="pc-a/sim-a1"] img.thumb'); return !!i && i.complete && i.naturalWidth > 0 })()`)
	})

	var held string
	t.Run("forced reassignment", func(t *testing.T) {
		// A job pc-a holds (a wait of 10 s) is reassigned to pc-b in the
		// store, as an operator's forced reassignment does: pc-a's next
		// fenced write (a renew, or the registration of its screenshot)
		// carries the old generation and is refused as stale. pc-b
		// has not the phone and never runs it: its lease expires, and pc-a
		// takes the job again and finishes it at generation 3.
		held = l.submit(t, operator, `{"device": {"serial": "sim-a2"}, "steps": [{"op": "screenshot", "name": "phone.png"}, {"op": "wait", "duration_ms": 10000}], "timeout": "5m"}`)
		var owner string
		testenv.Eventually(t, within, "pc-a renewing the lease of "+held, func() bool {
			evs, _ := l.store.WriteEvents(t.Context(), held)
			for _, e := range evs {
				if e.Verb == "renew" && e.Accepted {
					owner = e.Owner
					return true
				}
			}
			return false
		})
		if !strings.HasPrefix(owner, "pc-a/") {
			t.Fatalf("%s renewed by %s", held, owner)
		}
		lease, err := l.store.Reassign(t.Context(), held, l.agent(t, "pc-b").Owner(), 2*time.Second)
		if err != nil || lease.Token.Generation != 2 {
			t.Fatalf("reassign %s: %+v, %v", held, lease, err)
		}
		testenv.Eventually(t, within, "pc-a's stale renew refused", func() bool {
			evs, _ := l.store.WriteEvents(t.Context(), held)
			return slices.ContainsFunc(evs, func(e jobstore.WriteEvent) bool {
				return !e.Accepted && e.Owner == owner && e.Generation == 1
			})
		})
		op.Do(t, "open the job page", chromedp.Navigate(l.Base+"/ui/jobs/"+held))
		op.WaitJS(t, within, "the refused write listed", `!!document.querySelector('table#writes tr.refused[data-accepted="false"]')`)
		// The job's status follows live to its end at generation 3.
		browsertest.Eval[int](t, op, `window.notReloaded = 2`)
		waitLive(t, op)
		op.WaitJS(t, time.Minute, held+" shown SUCCEEDED", jsText(`td#job-status`)+` === "SUCCEEDED"`)
		if !browsertest.Eval[bool](t, op, `window.notReloaded === 2`) {
			t.Error("the job page was reloaded")
		}
		if j, err := l.store.Get(t.Context(), held); err != nil || j.Status != jobstore.StatusSucceeded || j.Generation < 3 {
			t.Fatalf("%s in the store: %+v, %v", held, j, err)
		}
		op.Do(t, "open the job page again", chromedp.Navigate(l.Base+"/ui/jobs/"+held))
		op.WaitJS(t, within, "the job page", `!!document.querySelector('table#writes tr.refused')`)
		refused := browsertest.Eval[string](t, op, jsText(`table#writes tr.refused`))
		if !strings.Contains(refused, "pc-a") {
			t.Errorf("the refused write reads %q, want its owner pc-a", refused)
		}
		if n := browsertest.Eval[int](t, op, `document.querySelectorAll('table#writes tr[data-accepted="false"]:not(.refused)').length`); n != 0 {
			t.Errorf("%d refused writes not marked refused", n)
		}
		for g, who := range map[int]string{1: "pc-a", 2: "pc-b", 3: "pc-a"} {
			s := browsertest.Eval[string](t, op, jsText(`ol#generations li[data-generation="`+strconv.Itoa(g)+`"]`))
			if !strings.Contains(s, who) {
				t.Errorf("generation %d shown as %q, want its holder %s", g, s, who)
			}
		}
		op.WaitJS(t, within, "the screenshot of the held job decoded", `(() => { const i = document.querySelector("section#oplog img.screenshot"); return !!i && i.complete && i.naturalWidth > 0 })()`)
		op.Screenshot(t, screenshotPath(shots, "ui-job.png"))
	})

	var confirmAction, csrf string
	t.Run("drain and resume", func(t *testing.T) {
		action := func(kind, agent, wantState string) {
			t.Helper()
			op.Do(t, "open the fleet", chromedp.Navigate(l.Base+"/ui/fleet"))
			op.Do(t, kind+" "+agent, chromedp.Click(`a.action-`+kind+`[data-agent="`+agent+`"]`))
			op.WaitJS(t, within, "the confirmation page of "+kind, `!!document.querySelector("form#confirm button[type=submit]")`)
			if browsertest.Eval[string](t, op, `(document.querySelector("form#confirm input[name=csrf]") || {}).value || ""`) == "" {
				t.Errorf("the confirmation form of %s has no csrf value", kind)
			}
			if browsertest.Eval[string](t, op, `document.querySelector("form#confirm").method`) != "post" {
				t.Errorf("the confirmation form of %s is not a POST", kind)
			}
			op.Do(t, "confirm "+kind, chromedp.Click(`form#confirm button[type=submit]`))
			op.WaitJS(t, within, "back on the fleet after "+kind, `location.pathname === "/ui/fleet" && !!document.querySelector("table#agents")`)
			// The fleet page is not live: the agent's own report of its
			// drain may follow the page, so it is loaded again until it
			// shows the state.
			state := jsText(`table#agents tr[data-agent="` + agent + `"] td.state`)
			testenv.Eventually(t, within, agent+" shown "+wantState, func() bool {
				if browsertest.Eval[string](t, op, state) == wantState {
					return true
				}
				op.Do(t, "reload the fleet", chromedp.Navigate(l.Base+"/ui/fleet"))
				return false
			})
		}
		action("drain", "pc-b", "draining")
		if a := l.agent(t, "pc-b"); !a.Draining {
			t.Fatalf("pc-b not draining in the store after the drain: %+v", a)
		}
		action("resume", "pc-b", "online")
		if a := l.agent(t, "pc-b"); a.Draining {
			t.Fatalf("pc-b still draining in the store after the resume")
		}
		// The drain form of pc-a, kept for the forged requests below.
		op.Do(t, "drain pc-a", chromedp.Click(`a.action-drain[data-agent="pc-a"]`))
		op.WaitJS(t, within, "the confirmation page of drain", `!!document.querySelector("form#confirm input[name=csrf]")`)
		confirmAction = browsertest.Eval[string](t, op, `document.querySelector("form#confirm").action`)
		csrf = browsertest.Eval[string](t, op, `document.querySelector("form#confirm input[name=csrf]").value`)
		op.Do(t, "back to the fleet", chromedp.Navigate(l.Base+"/ui/fleet"))
	})

	var cancelled string
	t.Run("cancel", func(t *testing.T) {
		cancelled = l.submit(t, operator, `{"device": {"serial": "sim-b1"}, "steps": [{"op": "wait", "duration_ms": 600000}], "timeout": "20m"}`)
		testenv.Eventually(t, within, cancelled+" running", func() bool {
			j, err := l.store.Get(t.Context(), cancelled)
			return err == nil && j.Status == jobstore.StatusInProgress
		})
		op.Do(t, "open the job page", chromedp.Navigate(l.Base+"/ui/jobs/"+cancelled))
		if st := browsertest.Eval[string](t, op, jsText(`td#job-status`)); st != "IN_PROGRESS" {
			t.Errorf("%s shown %q, want IN_PROGRESS", cancelled, st)
		}
		op.Do(t, "cancel", chromedp.Click(`a.action-cancel`))
		op.WaitJS(t, within, "the confirmation page of cancel", `!!document.querySelector("form#confirm button[type=submit]")`)
		// A reason that is a script, typed on the dashboard.
		op.Do(t, "type a reason", chromedp.SendKeys(`form#confirm input[name=text], form#confirm textarea[name=text]`, xssReason))
		op.Do(t, "confirm cancel", chromedp.Click(`form#confirm button[type=submit]`))
		op.WaitJS(t, within, cancelled+" shown CANCELLED", `location.pathname === "/ui/jobs/`+cancelled+`" && `+jsText(`td#job-status`)+` === "CANCELLED"`)
		if j, err := l.store.Get(t.Context(), cancelled); err != nil || j.Status != jobstore.StatusCancelled {
			t.Fatalf("%s in the store: %+v, %v", cancelled, j, err)
		}
		if gen := browsertest.Eval[string](t, op, jsText(`ol#generations li[data-generation="1"]`)); !strings.Contains(gen, xssReason) {
			t.Errorf("generation 1 of the cancelled job reads %q, want the reason %q as text", gen, xssReason)
		}
		if n := browsertest.Eval[int](t, op, `document.querySelectorAll("main script, body > :not(head) script").length`); n != 0 {
			t.Errorf("the reason made %d script elements", n)
		}
		noXSS(t, op, "the page of the cancelled job")
		// Each action is recorded with the token that took it.
		acts, err := l.store.UIActions(t.Context(), jobstore.UIActionFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, a := range acts {
			got = append(got, a.TokenName+" "+a.Action+" "+a.Target)
		}
		want := []string{"olga drain pc-b", "olga resume pc-b", "olga cancel " + cancelled}
		if !slices.Equal(got, want) {
			t.Errorf("recorded actions %q, want %q", got, want)
		}
	})

	t.Run("read-only and forged posts", func(t *testing.T) {
		if confirmAction == "" || csrf == "" {
			t.Fatal("no confirmation form to forge: the drain step above failed")
		}
		ro := browser.NewTab(t)
		login(ro, reader)
		// A job still running, that an operator could cancel.
		running := l.submit(t, operator, `{"device": {"serial": "sim-b2"}, "steps": [{"op": "wait", "duration_ms": 600000}], "timeout": "20m"}`)
		testenv.Eventually(t, within, running+" running", func() bool {
			j, err := l.store.Get(t.Context(), running)
			return err == nil && j.Status == jobstore.StatusInProgress
		})
		for _, path := range []string{"/ui/fleet", "/ui/jobs", "/ui/jobs/" + held, "/ui/jobs/" + running} {
			ro.Do(t, "open "+path, chromedp.Navigate(l.Base+path))
			ro.WaitJS(t, within, path+" loaded", `document.readyState === "complete" && location.pathname === `+jsString(path))
			if !browsertest.Eval[bool](t, ro, noActions) {
				t.Errorf("the read-only token sees actions on %s: %s", path, browsertest.Eval[string](t, ro, `[...document.querySelectorAll('[class^="action-"], [class*=" action-"]')].map(e => e.outerHTML).join(" ")`))
			}
		}
		// Forged POSTs from the pages themselves: without the CSRF value
		// (operator and reader), with a made-up one, and the operator's
		// own value from the reader's session.
		post := func(tab *browsertest.Tab, body string) int {
			return browsertest.Eval[int](t, tab, `fetch(`+jsString(confirmAction)+`, {method: "POST", credentials: "same-origin", redirect: "manual", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: `+jsString(body)+`}).then(r => r.status)`)
		}
		for name, c := range map[string]struct {
			tab  *browsertest.Tab
			body string
		}{
			"operator without csrf":      {op, ""},
			"operator with a wrong csrf": {op, "csrf=forged"},
			"reader without csrf":        {ro, ""},
			"reader with the operator's": {ro, "csrf=" + url.QueryEscape(csrf)},
		} {
			if status := post(c.tab, c.body); status != http.StatusForbidden {
				t.Errorf("browser POST %s: %d, want 403", name, status)
			}
		}
		// The same with a plain HTTP client, and the operator's CSRF
		// value with a foreign session cookie.
		var opCookie, roCookie string
		for _, c := range op.Cookies(t) {
			if c.Name == "edgecoord_session" {
				opCookie = c.Value
			}
		}
		for _, c := range ro.Cookies(t) {
			if c.Name == "edgecoord_session" {
				roCookie = c.Value
			}
		}
		u, err := url.Parse(confirmAction)
		if err != nil {
			t.Fatal(err)
		}
		form := "application/x-www-form-urlencoded"
		for name, c := range map[string][]string{
			"operator cookie without csrf":        {"", "Cookie", "edgecoord_session=" + opCookie},
			"reader cookie with operator's csrf":  {"csrf=" + url.QueryEscape(csrf), "Cookie", "edgecoord_session=" + roCookie},
			"made-up cookie with operator's csrf": {"csrf=" + url.QueryEscape(csrf), "Cookie", "edgecoord_session=" + strings.Repeat("a", len(opCookie))},
			"no cookie with operator's csrf":      {"csrf=" + url.QueryEscape(csrf)},
			"reader bearer with operator's csrf":  {"csrf=" + url.QueryEscape(csrf), "Authorization", "Bearer " + reader},
		} {
			status, _, body := l.do(t, "POST", u.RequestURI(), c[0], append([]string{"Content-Type", form}, c[1:]...)...)
			// Without a session at all (no cookie, or one that names
			// none) the answer may be 401 as well.
			noSession := strings.HasPrefix(name, "no cookie") || strings.HasPrefix(name, "made-up")
			if status != http.StatusForbidden && !(noSession && status == http.StatusUnauthorized) {
				t.Errorf("plain POST %s: %d, want 403\n%.300s", name, status, body)
			}
		}
		if a := l.agent(t, "pc-a"); a.Draining {
			t.Fatal("a forged POST drained pc-a")
		}
		// Pages with the bearer token: the same read-only view.
		status, hdr, body := l.do(t, "GET", "/ui/fleet", "", "Authorization", "Bearer "+reader)
		if status != http.StatusOK || !strings.Contains(body, `data-agent="pc-a"`) || strings.Contains(body, "action-") {
			t.Errorf("GET /ui/fleet with the reader's bearer token: %d, actions shown: %v", status, strings.Contains(body, "action-"))
		}
		csp := hdr.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("Content-Security-Policy %q", csp)
		}
		if hdr.Get("X-Content-Type-Options") != "nosniff" || hdr.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("security headers %v", hdr)
		}
		if d, e := ro.Dialogs(), pageErrors(ro); len(d) != 0 || len(e) != 0 {
			t.Errorf("the read-only tab opened dialogs %q and logged errors %q", d, e)
		}
	})

	// Screenshots of the fleet and the job list at the end, with the jobs of
	// the run (the job page was taken after the forced reassignment).
	op.Do(t, "open the fleet", chromedp.Navigate(l.Base+"/ui/fleet"))
	op.WaitJS(t, within, "the thumbnails decoded", `[...document.querySelectorAll("table#phones img.thumb")].every(i => i.complete && i.naturalWidth > 0)`)
	op.Screenshot(t, screenshotPath(shots, "ui-fleet.png"))
	op.Do(t, "open the job list", chromedp.Navigate(l.Base+"/ui/jobs"))
	waitLive(t, op)
	op.Screenshot(t, screenshotPath(shots, "ui-jobs.png"))

	// Over the whole run: no dialog opened, the flag the
	// injected markup would set is unset, and the pages logged no error
	// (a blocked inline script would be a CSP violation here).
	noXSS(t, op, "the last page")
	if e := pageErrors(op); len(e) != 0 {
		t.Errorf("the pages logged errors: %q", e)
	}
}
