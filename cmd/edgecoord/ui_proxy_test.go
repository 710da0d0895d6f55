package main

import (
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// nginxPath finds the nginx binary (Debian package nginx, installed by
// scripts/test-deps.sh); without it the test skips, or fails under CI.
func nginxPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"nginx", "/usr/sbin/nginx"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("nginx not found (scripts/test-deps.sh system installs it)")
	}
	t.Skip("nginx not found (scripts/test-deps.sh system installs it)")
	return ""
}

// documentedProxyBlock is the nginx location block of docs/api.md ("TLS"),
// as it stands there, pointed at upstream instead of 127.0.0.1:8080.
func documentedProxyBlock(t *testing.T, upstream string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```nginx\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 || !strings.Contains(block, "proxy_pass http://127.0.0.1:8080;") {
		t.Fatalf("docs/api.md has no nginx block proxying to http://127.0.0.1:8080")
	}
	return strings.ReplaceAll(block, "http://127.0.0.1:8080", "http://"+upstream)
}

// proxiedUI is a browser-like client of the dashboard through one of the
// proxy's sites: it keeps its cookies and sends the Origin a browser sends
// with a form of that site.
type proxiedUI struct {
	t      *testing.T
	base   string // http://host:port of the site
	client *http.Client
}

func newProxiedUI(t *testing.T, base string) *proxiedUI {
	jar, _ := cookiejar.New(nil)
	return &proxiedUI{t: t, base: base, client: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// post sends a form from a page with origin and returns the status and
// where it redirects.
func (u *proxiedUI) post(path, origin string, form url.Values) (int, string) {
	u.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	resp, err := u.client.Do(req)
	if err != nil {
		u.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// TestDashboardBehindNginx: the real edgecoord behind a real nginx. One
// site runs the nginx block of docs/api.md as it stands; the other keeps
// nginx's default Host (the upstream's address) and is the coordinator's
// api.public_url. Through each, a browser-like client whose forms carry
// that site's Origin logs in to the dashboard and drains an agent
// (checked in the database); a form from another site is still refused
// with 403 and changes nothing.
func TestDashboardBehindNginx(t *testing.T) {
	nginx := nginxPath(t)
	env := e2e.NewEnv(t)
	documented, public := testenv.FreeAddr(t), testenv.FreeAddr(t)
	c := env.StartCoordinator(e2e.CoordinatorOptions{ID: "proxied", API: true, Extra: fmt.Sprintf("api:\n  public_url: http://%s\n", public)})
	upstream := strings.TrimPrefix(c.Base, "http://")
	for _, id := range []string{"pc-1", "pc-2"} {
		coordtest.Start(t, coordtest.Options{ID: id, URL: env.NATSURL(), Slots: 1,
			Devices: []protocol.Device{{Serial: "P-" + id, State: protocol.DeviceReady, Model: "Pixel 7"}}})
	}
	ops := c.Token(t, "ops", "lab", "read,admin")

	dir := t.TempDir()
	conf := filepath.Join(dir, "nginx.conf")
	cfg := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log stderr notice;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    server {
        listen %[2]s;
%[3]s
    }
    server {
        listen %[4]s;
        location /ui/ {
            proxy_pass http://%[5]s;
        }
    }
}
`, dir, documented, documentedProxyBlock(t, upstream), public, upstream)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	proxy := e2e.Start(t, e2e.Command{Path: nginx, Args: []string{"-p", dir, "-c", conf, "-e", "stderr"}, Name: "nginx"})
	testenv.Eventually(t, e2e.WaitTimeout, "nginx serves the dashboard", func() bool {
		if proxy.Exited() {
			t.Fatalf("nginx exited:\n%s", proxy.Log())
		}
		resp, err := http.Get("http://" + public + "/ui/login")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	st, err := pgstore.OpenExisting(t.Context(), c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	for _, site := range []struct{ name, addr, agent string }{
		{"the documented block", documented, "pc-1"},
		{"api.public_url", public, "pc-2"},
	} {
		origin := "http://" + site.addr
		u := newProxiedUI(t, origin)
		if code, loc := u.post("/ui/login", origin, url.Values{"token": {ops}}); code != http.StatusSeeOther || loc != "/ui/fleet" {
			t.Fatalf("%s: login: %d to %q, want 303 to /ui/fleet", site.name, code, loc)
		}
		var csrf string
		testenv.Eventually(t, 10*time.Second, site.name+": the drain form of "+site.agent, func() bool {
			code, _, page := uiGet(t, u.client, origin+"/ui/agents/"+site.agent+"/drain")
			m := csrfField.FindStringSubmatch(page)
			if code != http.StatusOK || m == nil {
				return false
			}
			csrf = m[1]
			return true
		})
		if code, _ := u.post("/ui/agents/"+site.agent+"/drain", "http://evil.example", url.Values{"csrf": {csrf}}); code != http.StatusForbidden {
			t.Fatalf("%s: drain from another site: %d, want 403", site.name, code)
		}
		if a, err := st.GetAgent(t.Context(), site.agent); err != nil || a.Draining {
			t.Fatalf("%s: %s after a form from another site: draining %v, %v", site.name, site.agent, a.Draining, err)
		}
		if code, _ := u.post("/ui/agents/"+site.agent+"/drain", origin, url.Values{"csrf": {csrf}}); code != http.StatusSeeOther {
			t.Fatalf("%s: drain: %d, want 303", site.name, code)
		}
		if a, err := st.GetAgent(t.Context(), site.agent); err != nil || !a.Draining {
			t.Fatalf("%s: %s after the drain: draining %v, %v", site.name, site.agent, a.Draining, err)
		}
	}
	c.MustCleanShutdown(t)
}
