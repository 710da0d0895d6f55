package ui_test

import (
	"encoding/xml"
	"net/http"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/coordinator/ui"
)

// TestIcon: every page, the login form and a 404 included, links the
// dashboard's icon; the icon is an SVG served from the embedded static
// files under the dashboard's CSP, and /favicon.ico, where browsers look
// by themselves, redirects to it, so no page load asks for an icon that
// is not there.
func TestIcon(t *testing.T) {
	e := newEnv(t, "sqlite", nil)
	tok := e.token("ops", []string{"p1"}, "read")
	anon, c := client(), e.login(tok)
	for _, p := range []struct {
		c    *http.Client
		path string
		code int
	}{
		{anon, "/ui/login", http.StatusOK},
		{c, "/ui/fleet", http.StatusOK},
		{c, "/ui/jobs", http.StatusOK},
		{c, "/ui/nope", http.StatusNotFound},
	} {
		r := e.get(p.c, p.path)
		if r.status != p.code {
			t.Fatalf("%s: %s", p.path, r)
		}
		link := r.one(t, `head link[rel="icon"]`)
		if href := attr(link, "href"); href != ui.IconPath || attr(link, "type") != "image/svg+xml" {
			t.Errorf("%s links icon %q (%s), want %s (image/svg+xml)", p.path, href, attr(link, "type"), ui.IconPath)
		}
	}

	r := e.get(anon, ui.IconPath)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "image/svg+xml" {
		t.Fatalf("icon: %d %q", r.status, r.header.Get("Content-Type"))
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("icon served without the dashboard's headers: %v", r.header)
	}
	var svg struct {
		XMLName xml.Name
		ViewBox string `xml:"viewBox,attr"`
	}
	if err := xml.Unmarshal([]byte(r.body), &svg); err != nil || svg.XMLName.Local != "svg" || svg.XMLName.Space != "http://www.w3.org/2000/svg" || svg.ViewBox == "" {
		t.Errorf("icon is not an SVG image (%v): %+v\n%s", err, svg, r.body)
	}

	r = e.get(anon, ui.FaviconPath)
	if r.status != http.StatusFound || r.header.Get("Location") != ui.IconPath {
		t.Errorf("%s: %d to %q, want %d to %s", ui.FaviconPath, r.status, r.header.Get("Location"), http.StatusFound, ui.IconPath)
	}
	follow := &http.Client{}
	resp, err := follow.Get(e.srv.URL + ui.FaviconPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Errorf("%s followed: %d %q", ui.FaviconPath, resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	for path, want := range map[string]bool{
		"/ui": true, "/ui/": true, "/ui/static/favicon.svg": true, ui.FaviconPath: true,
		"/": false, "/api/v1/jobs": false, "/favicon.ico.bak": false, "/uix": false,
	} {
		if got := ui.Serves(path); got != want {
			t.Errorf("Serves(%q) = %v, want %v", path, got, want)
		}
	}
}
