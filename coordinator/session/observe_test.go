package session_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/session"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/uitree"
)

// TestSessionRecordObservation: the record_observation step over the
// sessions API. Bad input is a 400 naming the field before any step of the
// call runs (a raw that does not read as its parse says among them); a
// session without a screenshot has no evidence to record. A value read off
// the shop's screen is recorded with the session's latest screenshot and
// UI dump of the moment it runs (those of the same call when it made
// them), the element's bounds and app, the session's last step and phone;
// it reaches no phone and is not in the operation log. An element index
// the latest dump does not have is a 400 after the steps before it ran.
// When an operator reassigns the job, a record_observation is refused by
// the store under the session's token: 409 session lost, an observe write
// event accepted false, and no row in the dataset.
func TestSessionRecordObservation(t *testing.T) {
	e := newEnv(t, 3*time.Second)
	pc := e.startAgent("pc-a", capture.SimOptions{Model: "Pixel-Sim", Tags: []string{"lab"},
		Catalogue: []capture.SimProduct{{Name: "Matcha latte", Price: "¥1,280"}, {Name: "Hojicha", Price: "税込 1,408円 (税抜 1,280円)"}}})
	var doc session.Doc
	if code, body := e.call("POST", "/api/v1/sessions", tokenOperator, `{"device": {"tags": ["lab"]}}`, &doc); code != 201 {
		t.Fatalf("open: %d %s", code, body)
	}
	steps := "/api/v1/sessions/" + doc.ID + "/steps"

	for _, c := range []struct{ body, field, detail string }{
		{`{"op": "record_observation", "name": "price", "raw": "¥1,280 ¥980", "parse": "price"}`, "steps[0].raw", "two prices, not one"},
		{`{"op": "record_observation", "raw": "1"}`, "steps[0].name", "name is required"},
		{`{"op": "record_observation", "name": "9price", "raw": "1"}`, "steps[0].name", "name is required"},
		{`{"op": "record_observation", "name": "price"}`, "steps[0].raw", "required"},
		{`{"op": "record_observation", "name": "price", "raw": "` + strings.Repeat("1", 5000) + `"}`, "steps[0].raw", "5000 bytes, at most 4096"},
		{`{"op": "record_observation", "name": "price", "raw": "1", "element": {"text": "1"}}`, "steps[0].element", "by element_index"},
		{`{"op": "record_observation", "name": "price", "raw": "1", "element_index": 2, "bounds": [0, 0, 1, 1]}`, "steps[0].element_index", "not both"},
		{`{"op": "record_observation", "name": "price", "raw": "1", "element_index": 500}`, "steps[0].element_index", "out of range"},
		{`{"op": "record_observation", "name": "price", "raw": "1", "bounds": [0, 0, 2000000, 1]}`, "steps[0].bounds[2]", "out of range"},
		{`{"op": "record_observation", "name": "price", "raw": "1", "currency": "JPY"}`, "steps[0].currency", "parse price"},
		{`{"op": "record_observation", "name": "price", "raw": "¥1", "parse": "price", "currency": "yen"}`, "steps[0].currency", "ISO 4217"},
		{`{"op": "record_observation", "name": "price", "raw": "1", "x": 3}`, "steps[0]", "takes name, raw"},
		{`{"op": "tap", "x": 1, "y": 1, "raw": "1"}`, "steps[0].raw", "only record_observation"},
		{`{"op": "screenshot", "element_index": 1}`, "steps[0].element_index", "only record_observation"},
	} {
		// The step comes after a screenshot: none of the call runs.
		code, body := e.call("POST", steps, tokenOperator, `{"steps": [`+c.body+`]}`, nil)
		if p := e.wantProblem("record "+c.body, 400, body, code, c.detail); p.Field != c.field {
			t.Errorf("%s: field %q, want %q", c.body, p.Field, c.field)
		}
		code, body = e.call("POST", steps, tokenOperator, `{"steps": [{"op": "screenshot"}, `+c.body+`]}`, nil)
		e.wantProblem("record after a screenshot "+c.body, 400, body, code)
	}
	code, body := e.call("POST", steps, tokenOperator, `{"steps": [{"op": "record_observation", "name": "price", "raw": "¥1,280", "parse": "price"}]}`, nil)
	if p := e.wantProblem("record without a screenshot", 400, body, code, "no screenshot to record as evidence"); p.Field != "steps[0]" {
		t.Fatalf("record without a screenshot: field %q", p.Field)
	}
	if ops := pc.Ops(); len(ops) != 0 {
		t.Fatalf("refused calls reached the phone: %v", ops)
	}

	var rep stepsReply
	if code, body := e.call("POST", steps, tokenOperator, `{"steps": [{"op": "launch", "package": "`+capture.SimShop+`"}, {"op": "screenshot"}, {"op": "ui_dump"}]}`, &rep); code != 200 {
		t.Fatalf("steps: %d %s", code, body)
	}
	shotKey, dumpKey := rep.Steps[1].Captures[0].Key, rep.Steps[2].Captures[0].Key
	els := dumpElements(t, rep.Steps[2].Captures[0].URL)
	at := slices.IndexFunc(els, func(el uitree.Element) bool { return el.Text == "¥1,280" })
	if at < 0 {
		t.Fatalf("no price element in %+v", els)
	}
	opsBefore := pc.Ops()
	rep = stepsReply{}
	if code, body := e.call("POST", steps, tokenOperator, fmt.Sprintf(`{"steps": [
		{"op": "record_observation", "name": "price", "raw": "¥1,280", "element_index": %d, "parse": "price", "currency": "JPY"},
		{"op": "record_observation", "name": "gift_price", "raw": "税込 1,408円 (税抜 1,280円)", "bounds": [1, 2, 3, 4], "parse": "price", "tax": "excluded"}]}`, at), &rep); code != 200 {
		t.Fatalf("record: %d %s", code, body)
	}
	// evidence is keys as registered under the session's token.
	evidence := func(keys ...string) []jobstore.ObservationEvidence {
		arts, err := e.store.Artifacts(e.ctx, doc.JobID, 1)
		if err != nil {
			t.Fatal(err)
		}
		var out []jobstore.ObservationEvidence
		for _, k := range keys {
			i := slices.IndexFunc(arts, func(a jobstore.ArtifactRecord) bool { return a.Key == k })
			if i < 0 {
				t.Fatalf("%s is not registered: %+v", k, arts)
			}
			out = append(out, jobstore.ObservationEvidence{Name: arts[i].Name, Key: k, SHA256: arts[i].SHA256})
		}
		return out
	}
	want := evidence(shotKey, dumpKey)
	for i, r := range rep.Steps {
		o := r.Observation
		if r.Seq != 0 || r.Op != session.OpRecordObservation || r.Outcome != protocol.OutcomeOK || len(r.Captures) != 0 || o == nil ||
			o.Step != 3 || !slices.Equal(o.Evidence, want) {
			t.Fatalf("record %d: %+v (%+v), want step 3 with evidence %+v", i, r, o, want)
		}
	}
	if o := rep.Steps[0].Observation; o.Value != "1280" || o.Currency != "JPY" || o.Bounds != els[at].Bounds || o.AppPackage != capture.SimShop {
		t.Fatalf("price recorded %+v, want 1280 JPY at %v of %s", o, els[at].Bounds, capture.SimShop)
	}
	if o := rep.Steps[1].Observation; o.Value != "1280" || o.Currency != "JPY" || o.Tax != protocol.TaxExcluded || o.Bounds != [4]int{1, 2, 3, 4} || o.AppPackage != "" {
		t.Fatalf("gift price recorded %+v, want the tax-excluded 1280 JPY at the bounds given", o)
	}
	if ops := pc.Ops(); fmt.Sprint(ops) != fmt.Sprint(opsBefore) {
		t.Fatalf("record_observation reached the phone: %v, before %v", ops, opsBefore)
	}
	rows, err := e.store.ListObservations(e.ctx, jobstore.ObservationFilter{Project: "lab", Limit: 10})
	if err != nil || len(rows) != 2 {
		t.Fatalf("dataset %+v, %v; want the 2 rows", rows, err)
	}
	for _, r := range rows {
		if r.JobID != doc.JobID || r.Generation != 1 || r.PhoneSerial != "sim-pc-a" || r.Step != 3 || r.Selector != "" || !r.Accepted ||
			!slices.Equal(r.Evidence, want) || r.ObservedAt.IsZero() {
			t.Fatalf("row %+v", r)
		}
	}

	// A screenshot in the same call is the evidence of what follows it;
	// an element index the latest dump does not have is refused after the
	// steps before it ran.
	rep = stepsReply{}
	if code, body := e.call("POST", steps, tokenOperator, `{"steps": [{"op": "screenshot"}, {"op": "record_observation", "name": "title", "raw": "Matcha latte"}]}`, &rep); code != 200 {
		t.Fatalf("screenshot and record: %d %s", code, body)
	}
	if o := rep.Steps[1].Observation; o == nil || o.Step != 4 || !slices.Equal(o.Evidence, evidence(rep.Steps[0].Captures[0].Key, dumpKey)) {
		t.Fatalf("record after a screenshot of the same call: %+v", rep.Steps[1])
	}
	code, body = e.call("POST", steps, tokenOperator, fmt.Sprintf(`{"steps": [{"op": "wait", "duration_ms": 1}, {"op": "record_observation", "name": "n", "raw": "x", "element_index": %d}]}`, len(els)), nil)
	p := e.wantProblem("element index past the dump's", 400, body, code, fmt.Sprintf("%d is not an index of the %d elements of the latest UI dump", len(els), len(els)))
	if p.Field != "steps[1].element_index" || len(p.Steps) != 1 || p.Steps[0].Op != protocol.OpWait {
		t.Fatalf("element index past the dump's: %s", body)
	}

	// An operator reassigns the job: the store refuses the session's
	// token, the session is lost, nothing more is in the dataset.
	lease, err := e.store.Reassign(e.ctx, doc.JobID, fencing.Owner("pc-z", "boot"), time.Minute)
	if err != nil || lease.Token.Generation != 2 {
		t.Fatalf("reassign: %+v, %v", lease, err)
	}
	code, body = e.call("POST", steps, tokenOperator, `{"steps": [{"op": "record_observation", "name": "title", "raw": "late"}]}`, nil)
	e.wantProblem("record after the reassignment", 409, body, code, "the store refused the observation under the session's token",
		"lost at generation 1 after step 5", `"generation":1`)
	evs, err := e.store.WriteEvents(e.ctx, doc.JobID)
	if err != nil {
		t.Fatal(err)
	}
	var observe []jobstore.WriteEvent
	for _, ev := range evs {
		if ev.Verb == jobstore.VerbObserve {
			observe = append(observe, ev)
		}
	}
	if len(observe) != 4 || observe[3].Accepted || observe[3].Generation != 1 || observe[3].Owner == lease.Token.Owner {
		t.Fatalf("observe write events %+v, want 3 accepted and the last refused under the session's token", observe)
	}
	if rows, err := e.store.ListObservations(e.ctx, jobstore.ObservationFilter{Project: "lab", Limit: 10}); err != nil || len(rows) != 3 {
		t.Fatalf("dataset after the refusal %+v, %v; want the 3 accepted rows", rows, err)
	}
	code, body = e.call("POST", steps, tokenOperator, `{"steps": [{"op": "record_observation", "name": "title", "raw": "later"}]}`, nil)
	e.wantProblem("record on a lost session", 409, body, code, "lost at generation 1 after step 5")
}

// dumpElements reads a UI dump through its URL and lists its elements as
// record_observation counts them.
func dumpElements(t *testing.T, url string) []uitree.Element {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET dump: %d, %v", resp.StatusCode, err)
	}
	tree, err := uitree.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return tree.Elements()
}

// TestSessionObservationProvenance: an observation recorded through a
// session carries what its phone's agent last reported in the phone's
// facts: the locale and time zone, and, for a value read from an element
// of an app, that app's installed version; one recorded at bounds names
// no app.
func TestSessionObservationProvenance(t *testing.T) {
	e := newEnv(t, 3*time.Second)
	sim := capture.NewSimulated(capture.SimOptions{Serial: "sim-prov", Width: 180, Height: 320, Tags: []string{"lab"},
		Catalogue:   []capture.SimProduct{{Name: "Matcha latte", Price: "¥1,280"}},
		AppVersions: map[string]protocol.AppVersion{capture.SimShop: {VersionName: "5.2.1", VersionCode: 521}}})
	inv := capture.NewInventory()
	if err := inv.Add(sim); err != nil {
		t.Fatal(err)
	}
	facts, err := sim.Facts(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	inv.SetFacts(sim.Serial(), facts)
	e.servers.StartSimAgent(e2e.SimAgentOptions{ID: "pc-prov", Phones: agent.InventoryPhones(inv, "", capture.OpLogOptions{})})

	var doc session.Doc
	if code, body := e.call("POST", "/api/v1/sessions", tokenOperator, `{"device": {"tags": ["lab"]}}`, &doc); code != 201 {
		t.Fatalf("open: %d %s", code, body)
	}
	steps := "/api/v1/sessions/" + doc.ID + "/steps"
	var rep stepsReply
	if code, body := e.call("POST", steps, tokenOperator, `{"steps": [{"op": "launch", "package": "`+capture.SimShop+`"}, {"op": "screenshot"}, {"op": "ui_dump"}]}`, &rep); code != 200 {
		t.Fatalf("steps: %d %s", code, body)
	}
	els := dumpElements(t, rep.Steps[2].Captures[0].URL)
	at := slices.IndexFunc(els, func(el uitree.Element) bool { return el.Text == "¥1,280" })
	if at < 0 {
		t.Fatalf("no price element in %+v", els)
	}
	if code, body := e.call("POST", steps, tokenOperator, fmt.Sprintf(`{"steps": [
		{"op": "record_observation", "name": "price", "raw": "¥1,280", "element_index": %d, "parse": "price"},
		{"op": "record_observation", "name": "title", "raw": "Matcha latte", "bounds": [1, 2, 3, 4]}]}`, at), nil); code != 200 {
		t.Fatalf("record: %d %s", code, body)
	}
	rows, err := e.store.ListObservations(e.ctx, jobstore.ObservationFilter{Project: "lab", JobID: doc.JobID, Limit: 10})
	if err != nil || len(rows) != 2 {
		t.Fatalf("dataset %+v, %v; want 2 rows", rows, err)
	}
	for _, r := range rows {
		if r.Locale != "ja-JP" || r.TimeZone != "Asia/Tokyo" {
			t.Errorf("row %s: locale %q, time zone %q; want the phone's ja-JP, Asia/Tokyo", r.Name, r.Locale, r.TimeZone)
		}
		switch r.Name {
		case "price":
			if r.AppPackage != capture.SimShop || r.AppVersion != "5.2.1" || r.AppCode != 521 {
				t.Errorf("price row: app %q %q %d, want the shop at 5.2.1 (521)", r.AppPackage, r.AppVersion, r.AppCode)
			}
		case "title":
			if r.AppPackage != "" || r.AppVersion != "" || r.AppCode != 0 {
				t.Errorf("title row: app %q %q %d, want none", r.AppPackage, r.AppVersion, r.AppCode)
			}
		}
	}
}
