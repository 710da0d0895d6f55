package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/testkit/browsertest"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// jaRenders is true when the browser draws the Japanese text of the
// page's first td.raw with glyphs: two different characters drawn in the
// cell's font give different pixels, where a browser without a Japanese
// font draws the same empty box for both.
const jaRenders = `(() => {
  const cell = document.querySelector("td.raw");
  if (!cell) { return false; }
  const c = document.createElement("canvas");
  c.width = 48; c.height = 48;
  const g = c.getContext("2d");
  const draw = s => {
    g.clearRect(0, 0, 48, 48);
    g.font = "32px " + getComputedStyle(cell).fontFamily;
    g.fillText(s, 4, 36);
    return g.getImageData(0, 0, 48, 48).data.join(",");
  };
  return draw("税") !== draw("込") && draw("円") !== draw("\uE000");
})()`

// imagesDecoded is true when every image the selector matches has loaded
// and decoded (and there is at least one).
func imagesDecoded(sel string) string {
	return `(() => { const is = [...document.querySelectorAll(` + jsString(sel) + `)]; return is.length > 0 && is.every(i => i.complete && i.naturalWidth > 0) })()`
}

// TestUIObservationsBrowser: the example survey's job file runs on two
// phones behind the real adb, whose shops show the product at two prices
// in Japanese, on the real edgecoord (PostgreSQL, NATS, MinIO) and
// edgeagent. In headless Chromium the project's observations page, reached
// from the header's project link, lists the price read on each phone (the
// text as displayed, the value and currency, the tax, the shop's version),
// each with its evidence screenshot decoded as a thumbnail and its dump
// linked; the Japanese text is drawn with glyphs, not boxes. A row's job
// link opens the job page, which lists the job's observation with its
// thumbnail decoded, and links back. No page logs an error (a Content-
// Security-Policy violation, a failed load). It saves screenshots of both
// pages (docs/images with EDGE_UPDATE_SCREENSHOTS=1).
func TestUIObservationsBrowser(t *testing.T) {
	t.Parallel()                    // its servers, agents and browser are its own
	browser := browsertest.Start(t) // first: skips before the servers start when there is no browser
	prices := []string{"税込 1,408円 (税抜 1,280円)", "税込 1,512円 (税抜 1,400円)"}
	values := []string{"1408", "1512"}
	var opts []fakeadbd.Options
	for i, price := range prices {
		catalogue := append([]capture.SimProduct(nil), surveyCatalogue...)
		for j := range catalogue {
			if catalogue[j].Name == "ほうじ茶 500ml" {
				catalogue[j].Price = price
			}
		}
		opts = append(opts, fakeadbd.Options{Model: []string{"Pixel 7", "Galaxy S23"}[i], Width: 720, Height: 1280 + 640*i, Catalogue: catalogue})
	}
	sl := startSurveyLab(t, "ui-obs", opts...)
	phones, c, a := sl.phones, sl.coord, sl.agent
	store := c.Store()
	tok := c.Token(t, "surveyor", "lab", "read,submit")

	// The example job file, posted as it is: one job per phone.
	jobFile, err := os.ReadFile(filepath.Join("..", "..", "examples", "surveys", "price-check.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	l := &uiLab{Coordinator: c, store: store, client: &http.Client{Timeout: 30 * time.Second}}
	status, _, reply := l.do(t, "POST", "/api/v1/jobs", string(jobFile), "Authorization", "Bearer "+tok, "Content-Type", "application/yaml")
	var sub struct {
		Jobs []api.JobView `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(reply), &sub); status != http.StatusCreated || err != nil || len(sub.Jobs) != 2 {
		t.Fatalf("submit the job file: %d %s", status, reply)
	}
	jobOf := map[string]string{} // phone serial → job
	for _, j := range sub.Jobs {
		testenv.Eventually(t, 3*time.Minute, j.ID+" finished", func() bool {
			got, err := store.Get(t.Context(), j.ID)
			return err == nil && jobstore.Finished(got.Status)
		})
		got, _ := store.Get(t.Context(), j.ID)
		if got.Status != jobstore.StatusSucceeded {
			t.Fatalf("%s ended %s: %s\nagent log tail:\n%s", j.ID, got.Status, got.FailReason, strings.Join(a.Tail(40), "\n"))
		}
		jobOf[got.Device] = j.ID
	}

	shots := t.TempDir()
	const within = 30 * time.Second
	tab := browser.NewTab(t)
	browserLogin(t, tab, c.Base, tok, within)

	// Clicked from script, found and clicked in one go: the fleet page's
	// live updates may replace the header's nodes between a lookup and a
	// click.
	tab.WaitJS(t, within, "the header's project link", `!!document.querySelector("header a.project")`)
	if !clickJS(t, tab, "header a.project") {
		t.Fatalf("no project link in the header\n%s", tab.Describe())
	}
	tab.WaitJS(t, within, "the observations page", `location.pathname === "/ui/projects/lab/observations" && !!document.querySelector("table#observations")`)
	if n := browsertest.Eval[int](t, tab, `document.querySelectorAll("table#observations tbody tr").length`); n != 2 {
		t.Fatalf("the observations page lists %d rows, want the price on each of the two phones\n%s", n, tab.Describe())
	}
	for i, p := range phones {
		row := `table#observations tr[data-name="price"][data-phone="` + p.Serial() + `"]`
		cell := func(cls string) string {
			return strings.Join(strings.Fields(browsertest.Eval[string](t, tab, jsText(row+` td.`+cls))), " ")
		}
		if got := cell("raw"); got != prices[i] {
			t.Errorf("phone %s: as displayed %q, want %q", p.Serial(), got, prices[i])
		}
		if got := cell("value"); got != values[i]+" JPY" {
			t.Errorf("phone %s: value %q, want %s JPY", p.Serial(), got, values[i])
		}
		if got := cell("tax"); got != "included" {
			t.Errorf("phone %s: tax %q", p.Serial(), got)
		}
		if got := cell("app"); !strings.Contains(got, capture.SimShop+" 5.2.1") {
			t.Errorf("phone %s: app %q", p.Serial(), got)
		}
		if got := cell("phone"); !strings.HasPrefix(got, p.Serial()) {
			t.Errorf("phone %s: phone cell %q", p.Serial(), got)
		}
		if got := browsertest.Eval[string](t, tab, `document.querySelector(`+jsString(row+` td.job a.job`)+`).getAttribute("href")`); got != "/ui/jobs/"+jobOf[p.Serial()] {
			t.Errorf("phone %s: job link %q, want /ui/jobs/%s", p.Serial(), got, jobOf[p.Serial()])
		}
		if !browsertest.Eval[bool](t, tab, `!!document.querySelector(`+jsString(row+` td.evidence a.evidence-dump[href$=".xml"]`)+`)`) {
			t.Errorf("phone %s: no link to the dump", p.Serial())
		}
	}
	tab.WaitJS(t, within, "both thumbnails decoded", imagesDecoded(`table#observations img.evidence-thumb`)+
		` && document.querySelectorAll("table#observations img.evidence-thumb").length === 2`)
	if !browsertest.Eval[bool](t, tab, jaRenders) {
		t.Errorf("the browser draws the Japanese text as boxes: install a Japanese font (scripts/test-deps.sh installs fonts-noto-cjk)")
	}
	tab.Screenshot(t, screenshotPath(shots, "ui-observations.png"))

	first := jobOf[phones[0].Serial()]
	jobLink := `table#observations tr[data-phone="` + phones[0].Serial() + `"] td.job a.job`
	if !clickJS(t, tab, jobLink) {
		t.Fatalf("no job link in the row of %s\n%s", phones[0].Serial(), tab.Describe())
	}
	tab.WaitJS(t, within, "the job page", `location.pathname === "/ui/jobs/`+first+`" && !!document.querySelector("table#job-observations")`)
	row := `table#job-observations tr[data-accepted="true"]`
	if n := browsertest.Eval[int](t, tab, `document.querySelectorAll("table#job-observations tbody tr").length`); n != 1 {
		t.Errorf("the job page lists %d observations, want 1", n)
	}
	if got := browsertest.Eval[string](t, tab, jsText(row+` td.raw`)); got != prices[0] {
		t.Errorf("the job page's observation reads %q, want %q", got, prices[0])
	}
	if got := browsertest.Eval[string](t, tab, jsText(row+` td.value`)); got != values[0] {
		t.Errorf("the job page's value %q, want %s", got, values[0])
	}
	tab.WaitJS(t, within, "the job page's thumbnail decoded", imagesDecoded(`table#job-observations img.evidence-thumb`))
	if got := browsertest.Eval[string](t, tab, `document.querySelector("td#job-project a.project-observations").getAttribute("href")`); got != "/ui/projects/lab/observations" {
		t.Errorf("the job page links its project's observations at %q", got)
	}
	tab.Screenshot(t, screenshotPath(shots, "ui-job-observations.png"))

	if e := tab.Errors(); len(e) != 0 {
		t.Errorf("the pages logged errors: %q", e)
	}
	if d := tab.Dialogs(); len(d) != 0 {
		t.Errorf("the pages opened dialogs: %q", d)
	}
	t.Logf("screenshots in %s", screenshotPath(shots, ""))
}
