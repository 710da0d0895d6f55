package main

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/testkit/browsertest"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// browserLogin opens the dashboard of base in tab and logs in with token,
// up to the fleet page.
func browserLogin(t *testing.T, tab *browsertest.Tab, base, token string, within time.Duration) {
	t.Helper()
	tab.Do(t, "open /ui/", chromedp.Navigate(base+"/ui/"))
	tab.WaitJS(t, within, "the login page", `!!document.querySelector("form#login input[name=token]")`)
	tab.Do(t, "log in", chromedp.SendKeys(`form#login input[name=token]`, token), chromedp.Click(`form#login button[type=submit]`))
	tab.WaitJS(t, within, "the fleet after the login", `location.pathname === "/ui/fleet"`)
}

// clickJS clicks the first element sel matches, found and clicked in one
// script, once the page shows one: a page just navigated to may still be
// loading (its address changes before its body is there). It fails the
// test when none shows within 30 s, and is false when the element went
// away before the click.
func clickJS(t *testing.T, tab *browsertest.Tab, sel string) bool {
	t.Helper()
	tab.WaitJS(t, 30*time.Second, sel+" on the page", `!!document.querySelector(`+jsString(sel)+`)`)
	return browsertest.Eval[bool](t, tab, `(() => { const a = document.querySelector(`+jsString(sel)+`); if (!a) return false; a.click(); return true })()`)
}

// TestUISchedulesBrowser drives the schedules pages in headless Chromium
// against the real edgecoord binary (PostgreSQL, NATS, MinIO) and a real
// edgeagent with a simulated phone. Three schedules: 09:00 in Tokyo, 02:30
// in Berlin and every 5 s, whose coordinator was down for two of its
// slots, which are recorded missed. A read-only token's list offers no
// action and its pause, sent with its own CSRF value, is refused and
// changes nothing. An operator reaches the list from the header: the
// Tokyo schedule's next fire time at 09:00 JST and in UTC, the 5 s one's
// latest slots fired and missed and its missed count; it pauses the Tokyo
// schedule from the list through the confirmation page (paused in the
// database, the list says so and offers Resume), resumes it from its own
// page (active in the database, five next fire times shown), opens the 5 s
// schedule's page, follows a slot's job to the job page, which names the
// schedule and the slot and links back. No page logs an error. It saves
// screenshots of the list and of a schedule's page (docs/images with
// EDGE_UPDATE_SCREENSHOTS=1).
func TestUISchedulesBrowser(t *testing.T) {
	t.Parallel()                    // waits on slots and timeouts most of its time; its servers are its own
	browser := browsertest.Start(t) // first: skips before the servers start when there is no browser
	env := e2e.NewEnv(t)
	c := env.NewCoordinator(e2e.CoordinatorOptions{ID: "ui-sched", API: true, Storage: true, Extra: scheduleExtra})
	c.Start()
	env.StartAgent(e2e.AgentOptions{ID: "pc-a", Phones: []e2e.Phone{{Serial: "sim-a1", Simulated: true, Tags: []string{"lab"}}}})
	st := c.Store()
	operator := c.Token(t, "olga", "lab", "read,operate")
	reader := c.Token(t, "rita", "lab", "read")

	tokyo := createSchedule(t, c, "cron: \"0 9 * * *\"\ntime_zone: Asia/Tokyo\n"+scheduleJob)
	berlin := createSchedule(t, c, "cron: \"30 2 * * *\"\ntime_zone: Europe/Berlin\njitter: 10m\n"+scheduleJob)
	every := createSchedule(t, c, "every: 5s\ncatch_up: 1h\noverlap: allow\n"+scheduleJob)
	// The coordinator down for two slots of the 5 s schedule: they are
	// recorded missed when it is back.
	var first jobstore.Slot
	testenv.Eventually(t, e2e.WaitTimeout, "a first slot fired", func() bool {
		sl, err := st.ScheduleSlots(t.Context(), every, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(sl) > 0 {
			first = sl[len(sl)-1]
		}
		return len(sl) > 0
	})
	c.Kill()
	third := first.ScheduledAt.Add(15 * time.Second)
	testenv.Eventually(t, time.Minute, "three slots to pass", func() bool { return !dbNow(t, st).Before(third) })
	c.Start()
	var fired string // a job of a fired slot that ran
	testenv.Eventually(t, e2e.WaitTimeout, "slots missed during the outage, and a job of a later slot run", func() bool {
		sl, err := st.ScheduleSlots(t.Context(), every, 0)
		if err != nil {
			t.Fatal(err)
		}
		missed := 0
		for _, s := range sl {
			if s.Outcome == jobstore.SlotMissed {
				missed++
			}
			if s.Outcome == jobstore.SlotFired && len(s.Jobs) == 1 && fired == "" {
				if s.Jobs[0].Status == jobstore.StatusSucceeded {
					fired = s.Jobs[0].ID
				}
			}
		}
		return missed >= 2 && fired != ""
	})

	// The read-only token: no action on the list or a schedule's page, and
	// its pause is refused though its CSRF value is right.
	l := &uiLab{Coordinator: c, store: st, client: &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, p := range []string{"/ui/schedules", "/ui/schedules/" + tokyo} {
		status, _, body := l.do(t, "GET", p, "", "Authorization", "Bearer "+reader)
		if status != http.StatusOK || strings.Contains(body, "action-") {
			t.Errorf("read-only %s: %d, actions offered: %v", p, status, strings.Contains(body, "action-"))
		}
	}
	_, _, page := l.do(t, "GET", "/ui/schedules", "", "Authorization", "Bearer "+reader)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf value on the reader's page:\n%s", page)
	}
	if status, _, body := l.do(t, "POST", "/ui/schedules/"+tokyo+"/pause", "csrf="+m[1], "Authorization", "Bearer "+reader,
		"Content-Type", "application/x-www-form-urlencoded"); status != http.StatusForbidden || !strings.Contains(body, "lacks scope operate") {
		t.Errorf("the read-only token's pause: %d\n%.300s", status, body)
	}
	if sc, err := st.GetSchedule(t.Context(), tokyo); err != nil || sc.Paused {
		t.Fatalf("after the refused pause: paused %v, %v", sc.Paused, err)
	}

	shots := t.TempDir()
	const within = 30 * time.Second
	tab := browser.NewTab(t)
	browserLogin(t, tab, c.Base, operator, within)
	if !clickJS(t, tab, `header a#nav-schedules`) {
		t.Fatalf("no Schedules link in the header\n%s", tab.Describe())
	}
	tab.WaitJS(t, within, "the schedules page", `location.pathname === "/ui/schedules" && !!document.querySelector("table#schedules")`)
	if n := browsertest.Eval[int](t, tab, `document.querySelectorAll("table#schedules tbody tr").length`); n != 3 {
		t.Fatalf("the list shows %d schedules, want 3\n%s", n, tab.Describe())
	}
	row := func(id string) string { return `table#schedules tr[data-schedule="` + id + `"]` }
	sc, err := st.GetSchedule(t.Context(), tokyo)
	if err != nil {
		t.Fatal(err)
	}
	jst := time.FixedZone("JST", 9*3600)
	if got, want := browsertest.Eval[string](t, tab, jsText(row(tokyo)+` td.next .local`)), sc.NextAt.In(jst).Format("2006-01-02 15:04:05 MST (-07:00)"); got != want || !strings.Contains(got, " 09:00:00 JST") {
		t.Errorf("Tokyo's next fire time %q, want %q", got, want)
	}
	if got, want := browsertest.Eval[string](t, tab, jsText(row(tokyo)+` td.next .utc`)), sc.NextAt.UTC().Format("2006-01-02 15:04:05Z"); got != want {
		t.Errorf("Tokyo's next fire time in UTC %q, want %q", got, want)
	}
	if got := browsertest.Eval[string](t, tab, jsText(row(berlin)+` td.next .local`)); !regexp.MustCompile(` 02:30:00 CES?T \(\+0[12]:00\)$`).MatchString(got) {
		t.Errorf("Berlin's next fire time %q", got)
	}
	outcomes := browsertest.Eval[[]string](t, tab, `[...document.querySelectorAll(`+jsString(row(every)+` td.slots li.slot`)+`)].map(li => li.dataset.outcome)`)
	if !strings.Contains(strings.Join(outcomes, " "), jobstore.SlotFired) {
		t.Errorf("the 5 s schedule's latest slots %q: none fired", outcomes)
	}
	if got := browsertest.Eval[string](t, tab, jsText(row(every)+` td.missed`)); !strings.HasPrefix(got, "2") {
		t.Errorf("the 5 s schedule's missed slots %q, want 2", got)
	}

	// Pause the Tokyo schedule from the list.
	if !clickJS(t, tab, row(tokyo)+` a.action-pause-schedule`) {
		t.Fatalf("no Pause on the Tokyo schedule's row\n%s", tab.Describe())
	}
	tab.WaitJS(t, within, "the pause confirmation", `location.pathname === "/ui/schedules/`+tokyo+`/pause" && !!document.querySelector("form#confirm")`)
	tab.Do(t, "confirm the pause", chromedp.Click(`form#confirm button[type=submit]`))
	tab.WaitJS(t, within, "the list with the schedule paused", `location.pathname === "/ui/schedules" && `+jsText(row(tokyo)+` td.state`)+` === "paused"`)
	if sc, err := st.GetSchedule(t.Context(), tokyo); err != nil || !sc.Paused {
		t.Fatalf("in the database after the pause: paused %v, %v", sc.Paused, err)
	}
	if !browsertest.Eval[bool](t, tab, `!!document.querySelector(`+jsString(row(tokyo)+` a.action-resume-schedule`)+`)`) {
		t.Errorf("the paused schedule's row offers no Resume")
	}
	tab.Screenshot(t, screenshotPath(shots, "ui-schedules.png"))

	// Resume it from its own page.
	if !clickJS(t, tab, row(tokyo)+` td.id a`) {
		t.Fatal("no link to the Tokyo schedule's page")
	}
	tab.WaitJS(t, within, "the Tokyo schedule's page, paused", `location.pathname === "/ui/schedules/`+tokyo+`" && `+jsText(`#schedule-state`)+` === "paused" && !!document.querySelector("#no-next")`)
	if !clickJS(t, tab, `a.action-resume-schedule`) {
		t.Fatalf("no Resume on the paused schedule's page\n%s", tab.Describe())
	}
	tab.WaitJS(t, within, "the resume confirmation", `location.pathname === "/ui/schedules/`+tokyo+`/resume" && !!document.querySelector("form#confirm")`)
	tab.Do(t, "confirm the resume", chromedp.Click(`form#confirm button[type=submit]`))
	tab.WaitJS(t, within, "the schedule's page, active", `location.pathname === "/ui/schedules/`+tokyo+`" && `+jsText(`#schedule-state`)+` === "active"`)
	if sc, err := st.GetSchedule(t.Context(), tokyo); err != nil || sc.Paused || sc.NextAt.IsZero() {
		t.Fatalf("in the database after the resume: paused %v, next %s, %v", sc.Paused, sc.NextAt, err)
	}
	if n := browsertest.Eval[int](t, tab, `document.querySelectorAll("table#next tbody tr").length`); n != 5 {
		t.Errorf("the resumed schedule's page shows %d next fire times, want 5", n)
	}
	acts, err := st.UIActions(t.Context(), jobstore.UIActionFilter{Target: tokyo})
	if err != nil || len(acts) != 2 || acts[0].Action != jobstore.UIActionPauseSchedule || acts[1].Action != jobstore.UIActionResumeSchedule || acts[1].TokenName != "olga" {
		t.Errorf("recorded actions %+v, %v", acts, err)
	}

	// The 5 s schedule's page: its slots, a job of one, and back.
	tab.Do(t, "open the 5 s schedule", chromedp.Navigate(c.Base+"/ui/schedules/"+every))
	tab.WaitJS(t, within, "its slots", `document.querySelectorAll("table#slots tr[data-outcome=missed]").length >= 2 && !!document.querySelector(`+jsString(`table#slots a.job[href="/ui/jobs/`+fired+`"]`)+`)`)
	tab.Screenshot(t, screenshotPath(shots, "ui-schedule.png"))
	if !clickJS(t, tab, `table#slots a.job[href="/ui/jobs/`+fired+`"]`) {
		t.Fatal("no link to the slot's job")
	}
	tab.WaitJS(t, within, "the job page", `location.pathname === "/ui/jobs/`+fired+`" && !!document.querySelector("td#job-schedule a.schedule")`)
	j, err := st.Get(t.Context(), fired)
	if err != nil {
		t.Fatal(err)
	}
	if got := browsertest.Eval[string](t, tab, jsText(`td#job-scheduled-at`)); got != j.ScheduledAt.UTC().Format("2006-01-02 15:04:05Z") {
		t.Errorf("the job page's slot %q, want %s", got, j.ScheduledAt.UTC())
	}
	if !clickJS(t, tab, `td#job-schedule a.schedule`) {
		t.Fatal("no link to the schedule on the job page")
	}
	tab.WaitJS(t, within, "back on the schedule's page", `location.pathname === "/ui/schedules/`+every+`"`)

	if e := tab.Errors(); len(e) != 0 {
		t.Errorf("the pages logged errors: %q", e)
	}
	if d := tab.Dialogs(); len(d) != 0 {
		t.Errorf("the pages opened dialogs: %q", d)
	}
	t.Logf("screenshots in %s", screenshotPath(shots, ""))
}
