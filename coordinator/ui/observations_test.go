package ui_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/ui"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// observedAt is when the tests' phones took their dumps, on the PCs'
// clocks.
var observedAt = time.Date(2026, 11, 30, 6, 24, 25, 0, time.UTC)

// observation is a reading of an extract step at step seq, with its UI
// dump and screenshot as evidence (named as the agent names them).
func observation(seq int, name, raw, value string, evidence ...protocol.Evidence) protocol.Observation {
	o := protocol.Observation{Step: seq, Name: name, Raw: raw, Value: value, Parse: protocol.ParseText,
		Bounds: [4]int{10, 200, 500, 260}, ObservedAt: observedAt.Add(time.Duration(seq) * time.Second), Evidence: evidence,
		App: &protocol.AppVersion{Package: "com.example.shop", VersionName: "4.2.0", VersionCode: 420}, Locale: "ja-JP", TimeZone: "Asia/Tokyo"}
	if value != raw {
		o.Parse, o.Currency, o.Tax = protocol.ParsePrice, "JPY", protocol.TaxIncluded
	}
	return o
}

// evidence uploads and registers the dump and screenshot of step seq under
// tok (without storage: registers them only) and returns them as an
// observation's evidence.
func (e *env) evidence(mio *testenv.MinIOServer, tok fencing.Token, name string, seq int) []protocol.Evidence {
	e.t.Helper()
	var out []protocol.Evidence
	for _, a := range []struct{ ext, ct string }{{".xml", "application/xml"}, {".png", "image/png"}} {
		file := fmt.Sprintf("%s-%04d%s", name, seq, a.ext)
		data := append([]byte(nil), png...)
		if a.ext == ".xml" {
			data = []byte(`<hierarchy rotation="0"><node text="` + file + `"/></hierarchy>`)
		}
		sum := sha256.Sum256(data)
		if mio != nil {
			e.upload(*mio, tok, file, a.ct, data)
		} else if err := e.store.RegisterArtifact(e.t.Context(), tok, jobstore.ArtifactRecord{
			Name: file, Key: tok.ObjectKey(file), Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), ContentType: a.ct,
		}); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, protocol.Evidence{Name: file, SHA256: hex.EncodeToString(sum[:])})
	}
	return out
}

// commitObserved commits a result with observations under tok.
func (e *env) commitObserved(tok fencing.Token, obs ...protocol.Observation) error {
	e.t.Helper()
	os, ok := e.store.(jobstore.ObservationStore)
	if !ok {
		e.t.Fatalf("%T keeps no observations", e.store)
	}
	_, err := os.CommitObserved(e.t.Context(), tok, jobstore.ObservedResult{Result: []byte(`{}`), Observations: obs})
	return err
}

// observe runs job id of project pinned to dev on agent and commits its
// observations, made by mk from the job's token.
func (e *env) observe(mio *testenv.MinIOServer, id, project, agent string, dev protocol.Device, mk func(tok fencing.Token) []protocol.Observation) {
	e.t.Helper()
	e.submit(id, project, protocol.DeviceSelector{Serial: dev.Serial})
	l := e.claim(agent, dev)
	if l.Token.JobID != id {
		e.t.Fatalf("claim for %s granted %s, want %s", agent, l.Token.JobID, id)
	}
	if err := e.commitObserved(l.Token, mk(l.Token)...); err != nil {
		e.t.Fatalf("commit %s: %v", id, err)
	}
}

// cells returns the text of the cells of a table row, by class.
func cells(r reply, t *testing.T, row string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, td := range r.all(row + ` td`) {
		out[attr(td, "class")] = strings.Join(strings.Fields(text(td)), " ")
	}
	return out
}

// TestObservationsPage: a project's observations page lists the latest
// accepted value of each observation name and phone (a newer job's
// reading replaces an older one's; a refused result's and another
// project's never appear), each with its phone and model, the text as
// displayed (markup shown as text, in the phone's language), the value and
// currency, the tax, the app and its version, both times, the job and
// generation linking to the job page, and its evidence: the screenshot as
// a thumbnail and the dump as a link, both through the dashboard's
// artifact route, which redirects to a presigned URL that serves the
// bytes. The name and phone filters narrow it; a filter too long is a 400
// naming it. The header's project and the job page link to it; the job
// page lists the job's own observations, a stale generation's refused ones
// labelled refused, and a job without any has no such section.
func TestObservationsPage(t *testing.T) {
	storage, mio := withStorage(t)
	forKinds(t, func(t *testing.T, kind string) {
		e := newEnv(t, kind, storage)
		ctx := t.Context()
		devA, devB := ready("A1", "Pixel 7"), ready("B1", "Pixel 8")
		e.hello("agent-a", devA)
		e.hello("agent-b", devB)
		const xss = `<script>alert(1)</script>`
		e.observe(&mio, "j1", "p1", "agent-a", devA, func(tok fencing.Token) []protocol.Observation {
			return []protocol.Observation{
				observation(3, "price", "¥1,280", "1280", e.evidence(&mio, tok, "price", 3)...),
				observation(4, "title", xss, xss, e.evidence(&mio, tok, "title", 4)...),
			}
		})
		e.observe(&mio, "j2", "p1", "agent-b", devB, func(tok fencing.Token) []protocol.Observation {
			return []protocol.Observation{observation(3, "price", "税込 1,408円 (税抜 1,280円)", "1408", e.evidence(&mio, tok, "price", 3)...)}
		})
		e.observe(&mio, "theirs", "p2", "agent-b", devB, func(tok fencing.Token) []protocol.Observation {
			return []protocol.Observation{observation(3, "price", "¥777", "777")}
		})
		// j4 is reassigned away from agent-a: its stale result is refused,
		// its observations kept labelled refused; generation 2's result is
		// accepted.
		e.submit("j4", "p1", protocol.DeviceSelector{Serial: "A1"})
		l1 := e.claim("agent-a", devA)
		stale := observation(3, "price", "¥9,999", "9999", e.evidence(&mio, l1.Token, "price", 3)...)
		l2, err := e.store.Reassign(ctx, "j4", fencing.Owner("agent-b", "boot-1"), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.commitObserved(l1.Token, stale); !errors.Is(err, fencing.ErrStale) {
			t.Fatalf("stale commit: %v", err)
		}
		if err := e.commitObserved(l2.Token, observation(3, "price", "¥1,290", "1290", e.evidence(&mio, l2.Token, "price", 3)...)); err != nil {
			t.Fatal(err)
		}
		// The newest reading of price on A1.
		e.observe(&mio, "j3", "p1", "agent-a", devA, func(tok fencing.Token) []protocol.Observation {
			return []protocol.Observation{observation(5, "price", "¥1,300", "1300", e.evidence(&mio, tok, "price", 5)...)}
		})

		c := e.login(e.token("ops", []string{"p1"}, "read"))
		r := e.get(c, "/ui/projects/p1/observations")
		if r.status != http.StatusOK {
			t.Fatalf("observations page: %s", r)
		}
		if got := text(r.one(t, `h1 span#project`)); got != "p1" {
			t.Errorf("the page's project %q", got)
		}
		rows := r.all(`table#observations tbody tr`)
		var keys []string
		for _, tr := range rows {
			keys = append(keys, attr(tr, "data-name")+"/"+attr(tr, "data-phone"))
		}
		if got, want := strings.Join(keys, " "), "price/A1 price/B1 title/A1"; got != want {
			t.Fatalf("rows %q, want %q (the latest of each name and phone)\n%s", got, want, r.body)
		}
		a1 := cells(r, t, `table#observations tr[data-name=price][data-phone=A1]`)
		want := map[string]string{
			"name": "price", "phone": "A1 Pixel 7", "raw": "¥1,300", "value": "1300 JPY", "tax": "included",
			"app": "com.example.shop 4.2.0 (420)", "observed": "2026-11-30 06:24:30Z", "job": "j3 g1",
		}
		for k, v := range want {
			if a1[k] != v {
				t.Errorf("price on A1: %s %q, want %q", k, a1[k], v)
			}
		}
		if a1["accepted-at"] == "" || a1["accepted-at"] == "—" {
			t.Errorf("price on A1: no accepted time")
		}
		if b1 := cells(r, t, `table#observations tr[data-name=price][data-phone=B1]`); b1["raw"] != "税込 1,408円 (税抜 1,280円)" || b1["value"] != "1408 JPY" || b1["phone"] != "B1 Pixel 8" || b1["job"] != "j2 g1" {
			t.Errorf("price on B1: %q", b1)
		}
		if raw := r.one(t, `table#observations tr[data-name=price][data-phone=B1] td.raw`); attr(raw, "lang") != "ja-JP" {
			t.Errorf("the text as displayed has lang %q, want the phone's locale ja-JP", attr(raw, "lang"))
		}
		if got := text(r.one(t, `table#observations tr[data-name=title] td.raw`)); got != xss {
			t.Errorf("title shown as %q, want the markup as text", got)
		}
		if strings.Contains(r.body, "<script>alert") {
			t.Errorf("the page carries the markup unescaped")
		}
		for _, never := range []string{"¥9,999", "¥777", "¥1,290", "¥1,280<"} {
			if strings.Contains(r.body, never) {
				t.Errorf("the page shows %s: a refused, another project's or an older reading", never)
			}
		}
		if got := text(r.one(t, `p.summary`)); !strings.HasPrefix(got, "5 observations read") {
			t.Errorf("summary %q, want 5 observations read", got)
		}
		if len(r.all(`p#cut`)) != 0 {
			t.Errorf("the page says it was cut")
		}
		job := r.one(t, `tr[data-name=price][data-phone=A1] td.job a.job`)
		if attr(job, "href") != "/ui/jobs/j3" {
			t.Errorf("job link %s", attr(job, "href"))
		}
		if jr := e.get(c, attr(job, "href")); jr.status != http.StatusOK {
			t.Errorf("the linked job page: %d", jr.status)
		}
		thumb := r.one(t, `tr[data-name=price][data-phone=A1] td.evidence a.evidence-shot img.evidence-thumb`)
		if attr(thumb, "src") != "/ui/jobs/j3/artifacts/1/price-0005.png" || attr(thumb, "alt") == "" {
			t.Errorf("thumbnail src %q alt %q", attr(thumb, "src"), attr(thumb, "alt"))
		}
		dump := r.one(t, `tr[data-name=price][data-phone=A1] td.evidence a.evidence-dump`)
		if attr(dump, "href") != "/ui/jobs/j3/artifacts/1/price-0005.xml" {
			t.Errorf("dump link %q", attr(dump, "href"))
		}
		for src, wantBody := range map[string]string{attr(thumb, "src"): string(png), attr(dump, "href"): `<hierarchy rotation="0"><node text="price-0005.xml"/></hierarchy>`} {
			rr := e.get(c, src)
			loc := rr.header.Get("Location")
			if rr.status != http.StatusFound || !strings.HasPrefix(loc, "http://"+mio.Endpoint+"/") || !strings.Contains(loc, "X-Amz-Signature") {
				t.Fatalf("evidence %s: %d %s", src, rr.status, loc)
			}
			resp, err := http.Get(loc)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !bytes.Equal(body, []byte(wantBody)) {
				t.Errorf("presigned evidence %s: %d %q", src, resp.StatusCode, body)
			}
		}
		if strings.Contains(r.body, "X-Amz-") || strings.Contains(r.body, mio.Endpoint) {
			t.Errorf("the page carries a storage URL; its evidence must go through the dashboard's route")
		}

		// Filters.
		for q, want := range map[string]string{"name=title": "title/A1", "phone=B1": "price/B1", "name=price&phone=A1": "price/A1", "name=absent": ""} {
			fr := e.get(c, "/ui/projects/p1/observations?"+q)
			var got []string
			for _, tr := range fr.all(`table#observations tbody tr`) {
				got = append(got, attr(tr, "data-name")+"/"+attr(tr, "data-phone"))
			}
			if fr.status != http.StatusOK || strings.Join(got, " ") != want {
				t.Errorf("filter %s: %d %q, want %q", q, fr.status, got, want)
			}
			if want == "" && !strings.Contains(text(fr.one(t, `p.empty`)), "match the filter") {
				t.Errorf("filter %s: no empty note", q)
			}
		}
		if fr := e.get(c, "/ui/projects/p1/observations?name="+strings.Repeat("n", 65)); fr.status != http.StatusBadRequest || !strings.HasPrefix(text(fr.one(t, `p.error`)), "name:") ||
			len(fr.all(`p.empty`)) != 0 || len(fr.all(`table#observations`)) != 0 {
			t.Errorf("a name of 65 bytes: %d\n%s", fr.status, fr.body)
		}
		if fr := e.get(c, "/ui/projects/p1/observations?phone="+url.QueryEscape("a\nb")); fr.status != http.StatusBadRequest {
			t.Errorf("a phone with a line break: %d", fr.status)
		}

		// Links to the page: the header's project and the job page.
		if got := attr(r.one(t, `header a.project`), "href"); got != "/ui/projects/p1/observations" {
			t.Errorf("the header links project p1 to %q", got)
		}
		jp := e.get(c, "/ui/jobs/j4")
		if got := attr(jp.one(t, `td#job-project a.project-observations`), "href"); got != "/ui/projects/p1/observations" {
			t.Errorf("the job page links its project to %q", got)
		}
		// The job page: its accepted and refused observations.
		obs := jp.all(`section#observations table#job-observations tbody tr`)
		if len(obs) != 2 {
			t.Fatalf("%d observations on the page of j4, want 2\n%s", len(obs), jp.body)
		}
		refused := jp.all(`table#job-observations tr.refused[data-accepted=false]`)
		if len(refused) != 1 {
			t.Fatalf("%d refused observations on the page of j4, want 1", len(refused))
		}
		rc := cells(jp, t, `table#job-observations tr.refused`)
		if rc["generation"] != "g1" || rc["raw"] != "¥9,999" || rc["value"] != "9999" || rc["accepted"] != "refused (stale)" || rc["currency"] != "JPY" || rc["tax"] != "included" {
			t.Errorf("the refused observation: %q", rc)
		}
		ac := cells(jp, t, `table#job-observations tr[data-accepted=true]`)
		if ac["generation"] != "g2" || ac["raw"] != "¥1,290" || ac["name"] != "price" || ac["accepted"] != "accepted" || !strings.HasPrefix(ac["phone"], "A1") {
			t.Errorf("the accepted observation: %q", ac)
		}
		if got := attr(jp.one(t, `table#job-observations tr[data-accepted=true] img.evidence-thumb`), "src"); got != "/ui/jobs/j4/artifacts/2/price-0003.png" {
			t.Errorf("the accepted observation's thumbnail %q", got)
		}
		if got := attr(jp.one(t, `table#job-observations tr.refused a.evidence-dump`), "href"); got != "/ui/jobs/j4/artifacts/1/price-0003.xml" {
			t.Errorf("the refused observation's dump %q", got)
		}
		if rr := e.get(c, "/ui/jobs/j4/artifacts/1/price-0003.png"); rr.status != http.StatusFound {
			t.Errorf("the refused observation's screenshot: %d", rr.status)
		}
		j1 := e.get(c, "/ui/jobs/j1")
		if n := len(j1.all(`table#job-observations tr[data-accepted=true]`)); n != 2 || len(j1.all(`table#job-observations tr.refused`)) != 0 {
			t.Errorf("j1's page lists %d accepted observations, want 2", n)
		}
		if strings.Contains(j1.body, "<script>alert") {
			t.Errorf("the job page carries the markup unescaped")
		}
		// A job without observations has no such section.
		e.submit("plain", "p1", protocol.DeviceSelector{})
		if n := len(e.get(c, "/ui/jobs/plain").all(`section#observations`)); n != 0 {
			t.Errorf("a job without observations has %d observations sections", n)
		}
	})
}

// TestObservationsPageBound: the page reads at most Options.ObservationRows
// of the project's newest observations: past them it says so (p#cut, with
// the time it reached back to) and a name seen only in older rows is not
// listed; a project of exactly that many is not cut, whether the store is
// read a row at a time, in pages that end at the bound, or at once.
// Without storage the evidence is named, not linked.
func TestObservationsPageBound(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		for _, page := range []int{1, 3, 2500} {
			t.Run(fmt.Sprintf("pages of %d", page), func(t *testing.T) {
				defer ui.SetObservationReadPage(page)()
				testObservationsPageBound(t, kind)
			})
		}
	})
}

func testObservationsPageBound(t *testing.T, kind string) {
	e := newEnv(t, kind, func(o *ui.Options) { o.ObservationRows = 3 })
	dev := ready("A1", "Pixel 7")
	e.hello("agent-a", dev)
	c := e.login(e.token("ops", []string{"p1"}, "read"))
	page := func() reply {
		r := e.get(c, "/ui/projects/p1/observations")
		if r.status != http.StatusOK {
			t.Fatalf("observations page: %s", r)
		}
		return r
	}
	e.observe(nil, "old", "p1", "agent-a", dev, func(tok fencing.Token) []protocol.Observation {
		return []protocol.Observation{observation(1, "colour", "red", "red", e.evidence(nil, tok, "colour", 1)...)}
	})
	e.observe(nil, "new", "p1", "agent-a", dev, func(tok fencing.Token) []protocol.Observation {
		return []protocol.Observation{observation(1, "price", "¥1", "1"), observation(2, "price", "¥2", "2")}
	})
	r := page()
	if len(r.all(`p#cut`)) != 0 || len(r.all(`table#observations tr[data-name=colour]`)) != 1 {
		t.Errorf("three observations, the bound: cut %d, colour listed %d\n%s", len(r.all(`p#cut`)), len(r.all(`table#observations tr[data-name=colour]`)), r.body)
	}
	if got := text(r.one(t, `tr[data-name=price] td.value`)); got != "2 JPY" {
		t.Errorf("the latest price %q, want the later reading of the job, 2 JPY", got)
	}
	// Without storage: the evidence's names, no link, and a note.
	if ev := r.one(t, `tr[data-name=colour] td.evidence`); len(r.all(`td.evidence a`)) != 0 || !strings.Contains(text(ev), "colour-0001.png") {
		t.Errorf("evidence without storage: %q", text(ev))
	}
	if !strings.Contains(r.body, "No artifact storage is configured") {
		t.Errorf("no note that storage is not configured")
	}
	e.observe(nil, "newer", "p1", "agent-a", dev, func(tok fencing.Token) []protocol.Observation {
		return []protocol.Observation{observation(1, "price", "¥3", "3")}
	})
	r = page()
	cut := r.one(t, `p#cut`)
	if !strings.Contains(text(cut), "newest 3 observations") {
		t.Errorf("the cut note %q", text(cut))
	}
	if len(r.all(`tr[data-name=colour]`)) != 0 {
		t.Errorf("a name seen only before the newest 3 is listed")
	}
	if got := text(r.one(t, `tr[data-name=price] td.value`)); got != "3 JPY" {
		t.Errorf("the latest price %q, want 3 JPY", got)
	}
	// A filter looks further back.
	if got := text(e.get(c, "/ui/projects/p1/observations?name=colour").one(t, `tr[data-name=colour] td.value`)); got != "red" {
		t.Errorf("colour by its name: %q", got)
	}
}

// TestObservationsPageIsolation: a token sees the observations page of its
// own projects only. Another project's page answers 404 exactly as a
// project that does not exist does (so the answer tells nothing of which
// projects exist) and names neither; the attempt is recorded like the
// API's refusals. A bad project name is a 400, a visitor without a session
// is sent to the login page, a token without scope read is refused, and a
// project of the token without observations says so.
func TestObservationsPageIsolation(t *testing.T) {
	forKinds(t, func(t *testing.T, kind string) {
		e := newEnv(t, kind, nil)
		dev := ready("A1", "Pixel 7")
		e.hello("agent-a", dev)
		e.observe(nil, "theirs", "secret", "agent-a", dev, func(fencing.Token) []protocol.Observation {
			return []protocol.Observation{observation(1, "price", "¥5", "5")}
		})
		tok := e.token("ops", []string{"p1", "p3"}, "read")
		c := e.login(tok)
		theirs := e.get(c, "/ui/projects/secret/observations")
		none := e.get(c, "/ui/projects/nosuch/observations")
		if theirs.status != http.StatusNotFound || none.status != http.StatusNotFound {
			t.Fatalf("another project's page %d, an unknown project's %d: want 404", theirs.status, none.status)
		}
		if theirs.body != none.body {
			t.Errorf("another project's page differs from an unknown project's:\n%s\n---\n%s", theirs.body, none.body)
		}
		if strings.Contains(theirs.body, "secret") || strings.Contains(theirs.body, "¥5") {
			t.Errorf("the refusal names the project or shows its observation:\n%s", theirs.body)
		}
		ds, err := e.store.APIDenials(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		// The store counts the refusals of a token per minute, naming the
		// latest project asked for.
		var n int64
		for _, d := range ds {
			if d.TokenName != "ops" || d.Kind != jobstore.DenialProject {
				t.Errorf("recorded denial %+v", d)
			}
			n += d.Count
		}
		if n != 2 {
			t.Errorf("recorded denials %+v, want the two refusals of ops", ds)
		}
		if r := e.get(c, "/ui/projects/-x/observations"); r.status != http.StatusBadRequest {
			t.Errorf("a bad project name: %d", r.status)
		}
		if r := e.get(client(), "/ui/projects/p1/observations"); r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/ui/login?next=") {
			t.Errorf("without a session: %d %s", r.status, r.header.Get("Location"))
		}
		if r := e.bearerGet(e.token("bot", []string{"p1"}, "submit"), "/ui/projects/p1/observations"); r.status != http.StatusForbidden {
			t.Errorf("a token without scope read: %d", r.status)
		}
		r := e.bearerGet(tok, "/ui/projects/p3/observations")
		if r.status != http.StatusOK || text(r.one(t, `p.empty`)) != "No observations in this project yet." {
			t.Errorf("an empty project of the token: %s", r)
		}
		var links []string
		for _, a := range r.all(`header a.project`) {
			links = append(links, attr(a, "href"))
		}
		if got := strings.Join(links, " "); got != "/ui/projects/p1/observations /ui/projects/p3/observations" {
			t.Errorf("the header links %q, want the token's two projects", got)
		}
	})
}

// TestObservationsWithoutObservationStore: on a store that keeps no
// observations the observations page answers 501 saying so, and the job
// page has no observations section.
func TestObservationsWithoutObservationStore(t *testing.T) {
	// hidden offers the store's dashboard methods only.
	type hidden struct{ store }
	e := newEnv(t, "sqlite", nil)
	e.opts.Store = hidden{e.store}
	h, err := ui.New(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	if _, ok := e.opts.Store.(jobstore.ObservationStore); ok {
		t.Fatal("the wrapped store still keeps observations")
	}
	e.submit("j1", "p1", protocol.DeviceSelector{})
	c := e.login(e.token("ops", []string{"p1"}, "read"))
	r := e.get(c, "/ui/projects/p1/observations")
	if r.status != http.StatusNotImplemented || !strings.Contains(text(r.one(t, `main`)), "does not keep observations") {
		t.Errorf("the observations page: %s", r)
	}
	if jp := e.get(c, "/ui/jobs/j1"); jp.status != http.StatusOK || len(jp.all(`section#observations`)) != 0 {
		t.Errorf("the job page: %d, %d observations sections", jp.status, len(jp.all(`section#observations`)))
	}
}
