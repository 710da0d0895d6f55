package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/events"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/coordinator/ui"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// store is what the tests drive: the coordinator's store with the lab's
// direct grants.
type store interface {
	ui.Store
	ClaimFor(ctx context.Context, req jobstore.ClaimRequest) (jobstore.Lease, error)
}

// kinds are the stores every behaviour test runs on.
var kinds = []string{"sqlite", "postgres"}

func openStore(t testing.TB, kind, loc string) store {
	t.Helper()
	var (
		s   store
		err error
	)
	switch kind {
	case "sqlite":
		s, err = sqlitestore.Open(context.Background(), loc)
	default:
		s, err = pgstore.Open(context.Background(), loc)
	}
	if err != nil {
		t.Fatalf("open %s store: %v", kind, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func location(t testing.TB, kind string) string {
	if kind == "sqlite" {
		return filepath.Join(t.TempDir(), "jobs.db")
	}
	return testenv.Postgres(t)
}

type env struct {
	t      *testing.T
	kind   string
	loc    string
	store  store
	broker *events.Broker
	opts   ui.Options
	srv    *httptest.Server
}

// newEnv serves the dashboard of a fresh store of kind, with a running
// event broker.
func newEnv(t *testing.T, kind string, mod func(*ui.Options)) *env {
	t.Helper()
	loc := location(t, kind)
	st := openStore(t, kind, loc)
	b := events.NewBroker(st, events.BrokerOptions{Interval: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = b.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e := &env{t: t, kind: kind, loc: loc, store: st, broker: b}
	e.opts = ui.Options{Store: st, Broker: b, OfflineAfter: time.Hour}
	if mod != nil {
		mod(&e.opts)
	}
	h, err := ui.New(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// token creates an API token and returns its secret.
func (e *env) token(name string, projects []string, scopes ...string) string {
	e.t.Helper()
	secret, hash, err := api.NewToken()
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.CreateAPIToken(e.t.Context(), jobstore.APIToken{Name: name, Hash: hash, Projects: projects, Scopes: scopes}); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// client is a browser-like client: a cookie jar, no redirects followed.
func client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type reply struct {
	status int
	header http.Header
	body   string
	doc    *html.Node
}

func (e *env) do(c *http.Client, method, path string, form url.Values, hdr map[string]string) reply {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	r := reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		if r.doc, err = html.Parse(strings.NewReader(r.body)); err != nil {
			e.t.Fatalf("parse %s: %v", path, err)
		}
	}
	return r
}

func (e *env) get(c *http.Client, path string) reply { return e.do(c, http.MethodGet, path, nil, nil) }

func (e *env) bearerGet(tok, path string) reply {
	return e.do(client(), http.MethodGet, path, nil, map[string]string{"Authorization": "Bearer " + tok})
}

// login logs a new client in with tok.
func (e *env) login(tok string) *http.Client {
	e.t.Helper()
	c := client()
	r := e.do(c, http.MethodPost, "/ui/login", url.Values{"token": {tok}}, nil)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/fleet" {
		e.t.Fatalf("login: %d %s\n%s", r.status, r.header.Get("Location"), r.body)
	}
	return c
}

// csrf reads the CSRF value of the logout form of a page.
func (r reply) csrf(t *testing.T) string {
	t.Helper()
	in := r.all(`form#logout input[name=csrf]`)
	if len(in) != 1 {
		t.Fatalf("no csrf field in\n%s", r.body)
	}
	return attr(in[0], "value")
}

// hello registers agent id with phones.
func (e *env) hello(id string, devs ...protocol.Device) {
	e.t.Helper()
	if _, _, err := e.store.AgentHello(e.t.Context(), jobstore.AgentHello{AgentID: id, BootID: "boot-1", Version: "1.0.0", Devices: devs, Slots: 2, CoordinatorID: "c1"}); err != nil {
		e.t.Fatal(err)
	}
}

func ready(serial, model string, tags ...string) protocol.Device {
	return protocol.Device{Serial: serial, State: protocol.DeviceReady, Model: model, Tags: tags}
}

func (e *env) submit(id, project string, sel protocol.DeviceSelector) jobstore.Job {
	e.t.Helper()
	j, err := e.store.Submit(e.t.Context(), jobstore.JobSpec{ID: id, Project: project, SubmittedBy: "alice",
		Task: protocol.Task{Device: sel, Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}}})
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// claim grants the next job to agent's session on its phones.
func (e *env) claim(agent string, devs ...protocol.Device) jobstore.Lease {
	e.t.Helper()
	l, err := e.store.ClaimFor(e.t.Context(), jobstore.ClaimRequest{Owner: fencing.Owner(agent, "boot-1"), Devices: devs, Slots: 4, TTL: time.Minute})
	if err != nil {
		e.t.Fatalf("claim for %s: %v", agent, err)
	}
	return l
}

// all returns the elements of the page that match a selector of the form
// `a b`, each part tag#id.class[attr=value]... (a small subset of CSS).
func (r reply) all(sel string) []*html.Node {
	if r.doc == nil {
		return nil
	}
	parts := strings.Fields(sel)
	var out []*html.Node
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && matchChain(n, parts) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(r.doc)
	return out
}

func (r reply) one(t *testing.T, sel string) *html.Node {
	t.Helper()
	got := r.all(sel)
	if len(got) != 1 {
		t.Fatalf("%d elements match %s, want 1\n%s", len(got), sel, r.body)
	}
	return got[0]
}

func matchChain(n *html.Node, parts []string) bool {
	if !matchOne(n, parts[len(parts)-1]) {
		return false
	}
	rest := parts[:len(parts)-1]
	for p := n.Parent; p != nil && len(rest) > 0; p = p.Parent {
		if p.Type == html.ElementNode && matchOne(p, rest[len(rest)-1]) {
			rest = rest[:len(rest)-1]
		}
	}
	return len(rest) == 0
}

var selPart = regexp.MustCompile(`([#.][\w-]+|\[[^\]]+\])`)

func matchOne(n *html.Node, sel string) bool {
	tag := sel
	if i := strings.IndexAny(sel, "#.["); i >= 0 {
		tag = sel[:i]
	}
	if tag != "" && n.Data != tag {
		return false
	}
	for _, m := range selPart.FindAllString(sel[len(tag):], -1) {
		switch m[0] {
		case '#':
			if attr(n, "id") != m[1:] {
				return false
			}
		case '.':
			if !hasClass(n, m[1:]) {
				return false
			}
		case '[':
			k, v, eq := strings.Cut(m[1:len(m)-1], "=")
			got, ok := attrOK(n, k)
			if !ok || eq && got != strings.Trim(v, `"`) {
				return false
			}
		}
	}
	return true
}

func attrOK(n *html.Node, k string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == k {
			return a.Val, true
		}
	}
	return "", false
}

func attr(n *html.Node, k string) string {
	v, _ := attrOK(n, k)
	return v
}

func hasClass(n *html.Node, c string) bool {
	for _, x := range strings.Fields(attr(n, "class")) {
		if x == c {
			return true
		}
	}
	return false
}

// text is the text content of n.
func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.TrimSpace(b.String())
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }
