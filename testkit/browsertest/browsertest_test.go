package browsertest

import (
	"html/template"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestTab runs the helpers against two pages: one that opens an alert and
// one under a Content-Security-Policy that shows an escaped script tag.
// The recorder sees the alert and the exception of the first, nothing of
// the second, and the screenshot is a PNG of the window's width.
func TestTab(t *testing.T) {
	b := Start(t)
	payload := `<script>alert(1)</script>`
	page := template.Must(template.New("p").Parse(`<!doctype html><title>t</title><p id="tag">{{.}}</p>`))
	mux := http.NewServeMux()
	mux.HandleFunc("/unsafe", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><title>u</title><script>window.ran = 1; alert("hi"); throw new Error("boom")</script>`))
	})
	mux.HandleFunc("/safe", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'")
		w.Header().Set("Content-Type", "text/html")
		_ = page.Execute(w, payload)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	tab := b.NewTab(t)
	tab.Do(t, "open /unsafe", chromedp.Navigate(srv.URL+"/unsafe"))
	tab.WaitJS(t, 10*time.Second, "the page's script to run", "window.ran === 1")
	testenv.Eventually(t, 10*time.Second, "the alert and the exception recorded", func() bool {
		return len(tab.Dialogs()) == 1 && len(tab.Errors()) == 1
	})
	if d := tab.Dialogs(); d[0] != "alert: hi" {
		t.Errorf("dialogs %q", d)
	}
	if e := tab.Errors(); !strings.Contains(e[0], "boom") {
		t.Errorf("errors %q", e)
	}

	other := b.NewTab(t)
	other.Do(t, "open /safe", chromedp.Navigate(srv.URL+"/safe"))
	if got := Eval[string](t, other, `document.querySelector("#tag").textContent`); got != payload {
		t.Errorf("tag text %q, want %q", got, payload)
	}
	if n := Eval[int](t, other, `document.querySelectorAll("script").length`); n != 0 {
		t.Errorf("%d script elements", n)
	}
	other.Screenshot(t, filepath.Join(t.TempDir(), "safe.png"))
	if d, e := other.Dialogs(), other.Errors(); len(d)+len(e) != 0 {
		t.Errorf("the safe page opened %q and logged %q", d, e)
	}
	if !slices.Equal(tab.Dialogs(), []string{"alert: hi"}) {
		t.Errorf("the first tab's dialogs changed: %q", tab.Dialogs())
	}
}
