package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

var observationTests = []struct {
	name string
	fn   func(t *testing.T, s sqlstore.Lab)
}{
	{"ObservationsAccepted", testObservationsAccepted},
	{"ObservationsRefused", testObservationsRefused},
	{"ObservationsInvalid", testObservationsInvalid},
	{"ObservationsList", testObservationsList},
	{"ObservationsNewestFirst", testObservationsNewestFirst},
	{"ObservationsOutbox", testObservationsOutbox},
	{"ObservationsRecorded", testObservationsRecorded},
	{"ObservationsPhonePlatform", testObservationsPhonePlatform},
}

func observationStore(t *testing.T, s sqlstore.Lab) jobstore.ObservationStore {
	t.Helper()
	os, ok := s.(jobstore.ObservationStore)
	if !ok {
		t.Fatalf("%T is not a jobstore.ObservationStore", s)
	}
	return os
}

// observedAt is a time on the PC's clock, in whole milliseconds as stored.
var observedAt = time.Date(2026, 3, 1, 12, 0, 0, 250_000_000, time.UTC)

// priceObs is an observation of a price as an extract step reads it.
func priceObs(step int, name, raw, value string, evidence ...protocol.Evidence) protocol.Observation {
	return protocol.Observation{
		Step: step, Name: name, Raw: raw, Value: value, Parse: protocol.ParsePrice, Currency: "JPY", Tax: protocol.TaxIncluded,
		Bounds: [4]int{10, 200, 500, 260}, Selector: `text~"¥"`, ObservedAt: observedAt.Add(time.Duration(step) * time.Millisecond),
		Evidence: evidence, App: &protocol.AppVersion{Package: "com.example.shop", VersionName: "4.2.0", VersionCode: 420},
		Locale: "ja-JP", TimeZone: "Asia/Tokyo",
	}
}

const sumA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// submitIn submits a job of testTask pinned to nothing, in project.
func submitIn(t *testing.T, s sqlstore.Lab, id, project string) {
	t.Helper()
	if _, err := s.Submit(t.Context(), jobstore.JobSpec{ID: id, Task: testTask(), Project: project}); err != nil {
		t.Fatalf("submit %s: %v", id, err)
	}
}

func listObs(t *testing.T, os jobstore.ObservationStore, f jobstore.ObservationFilter) []jobstore.ObservationRow {
	t.Helper()
	if f.Limit == 0 {
		f.Limit = jobstore.MaxObservationPage
	}
	rows, err := os.ListObservations(t.Context(), f)
	if err != nil {
		t.Fatalf("list observations %+v: %v", f, err)
	}
	return rows
}

// countObs counts the rows f selects, page by page.
func countObs(t *testing.T, os jobstore.ObservationStore, f jobstore.ObservationFilter) int {
	t.Helper()
	n := 0
	for {
		page := listObs(t, os, f)
		n += len(page)
		if len(page) < jobstore.MaxObservationPage {
			return n
		}
		f.After = page[len(page)-1].ID
	}
}

// resultEvent returns the one write event of verb result of tok.
func resultEvents(t *testing.T, s sqlstore.Lab, tk fencing.Token) []jobstore.WriteEvent {
	t.Helper()
	evs, err := s.WriteEvents(t.Context(), tk.JobID)
	if err != nil {
		t.Fatal(err)
	}
	var out []jobstore.WriteEvent
	for _, e := range evs {
		if e.Verb == jobstore.VerbResult && e.Owner == tk.Owner && e.Generation == tk.Generation {
			out = append(out, e)
		}
	}
	return out
}

// testObservationsAccepted: an accepted result stores its observations in
// its transaction, each a row with the token, the phone of the grant (its
// model, SDK, platform and Android version as the agent reported them;
// reported without a platform, android), the agent's fields, the
// evidence under the token's object keys and the write event's time, and
// returns the manifest.
func testObservationsAccepted(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	os := observationStore(t, s)
	dev := phone("S1", "SM-G991B")
	dev.Facts = &protocol.PhoneFacts{SDK: 33, AndroidVersion: "13"}
	hello(t, s, ownerA, dev, phone("S2", "Pixel 7"))
	task := testTask()
	task.Device = protocol.DeviceSelector{}
	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "obs-1", Task: task, Project: "lab"}); err != nil {
		t.Fatal(err)
	}
	l, err := claimFor(t, s, ownerA, 2, dev)
	if err != nil || l.Device != "S1" {
		t.Fatalf("claim for: %v, %+v", err, l)
	}
	if err := s.RegisterArtifact(ctx, l.Token, jobstore.ArtifactRecord{Name: "price.xml", Key: l.Token.ObjectKey("price.xml"), Size: 3, SHA256: sumA, ContentType: "application/xml"}); err != nil {
		t.Fatal(err)
	}
	obs := []protocol.Observation{
		priceObs(3, "price", "¥1,280 (税込)", "1280", protocol.Evidence{Name: "price.xml", SHA256: sumA}),
		{Step: 4, Name: "title", Raw: "Café \"Noir\",\nline two", Value: "Café \"Noir\",\nline two", Parse: protocol.ParseText},
	}
	manifest, err := os.CommitObserved(ctx, l.Token, jobstore.ObservedResult{Result: result("ok"), Observations: obs})
	if err != nil {
		t.Fatalf("commit observed: %v", err)
	}
	if !slices.Equal(manifest, []string{l.Token.ObjectKey("price.xml")}) {
		t.Fatalf("manifest %v", manifest)
	}
	if j := get(t, s, "obs-1"); j.Status != jobstore.StatusSucceeded || !jsonEqual(j.Result, result("ok")) {
		t.Fatalf("job after the commit: %s %s", j.Status, j.Result)
	}
	evs := resultEvents(t, s, l.Token)
	if len(evs) != 1 || !evs[0].Accepted {
		t.Fatalf("result write events %+v", evs)
	}
	rows := listObs(t, os, jobstore.ObservationFilter{Project: "lab"})
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2: %+v", len(rows), rows)
	}
	p := rows[0]
	want := jobstore.ObservationRow{
		ID: p.ID, Project: "lab", JobID: "obs-1", Generation: 1, Owner: ownerA, AgentID: "agent-a",
		PhoneSerial: "S1", PhoneModel: "SM-G991B", PhoneSDK: 33, PhonePlatform: protocol.PlatformAndroid, PhoneOSVersion: "13",
		Step: 3, Name: "price", Raw: "¥1,280 (税込)", Value: "1280",
		Parse: protocol.ParsePrice, Currency: "JPY", Tax: protocol.TaxIncluded, Bounds: [4]int{10, 200, 500, 260},
		Selector: `text~"¥"`, AppPackage: "com.example.shop", AppVersion: "4.2.0", AppCode: 420, Locale: "ja-JP", TimeZone: "Asia/Tokyo",
		ObservedAt: observedAt.Add(3 * time.Millisecond), AcceptedAt: evs[0].At,
		Evidence: []jobstore.ObservationEvidence{{Name: "price.xml", Key: l.Token.ObjectKey("price.xml"), SHA256: sumA}},
		Accepted: true, WriteEvent: evs[0].ID,
	}
	if fmt.Sprintf("%+v", p) != fmt.Sprintf("%+v", want) {
		t.Fatalf("row\n got  %+v\n want %+v", p, want)
	}
	wantUTC(t, "accepted_at", p.AcceptedAt)
	wantUTC(t, "observed_at", p.ObservedAt)
	q := rows[1]
	if q.ID <= p.ID || q.Raw != obs[1].Raw || q.Value != obs[1].Value || q.AppPackage != "" || !q.ObservedAt.IsZero() ||
		len(q.Evidence) != 0 || q.PhoneSerial != "S1" || !q.Accepted {
		t.Fatalf("second row %+v", q)
	}
}

// testObservationsRefused: a stale holder's result is refused as Commit
// refuses it, and its observations are kept with accepted false, linked
// to the refused write event, hidden unless All; a result sent again
// under a token adds no rows; an unknown job keeps none; a job keeps at
// most MaxRefusedObservations refused rows.
func testObservationsRefused(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	os := observationStore(t, s)
	submitIn(t, s, "obs-2", "lab")
	la := claim(t, s, "obs-2", ownerA, long)
	lb := reassign(t, s, "obs-2", ownerB)
	before := get(t, s, "obs-2")

	_, err := os.CommitObserved(ctx, la.Token, jobstore.ObservedResult{Result: result("stale"), Observations: []protocol.Observation{
		priceObs(2, "price", "¥999", "999"), priceObs(3, "stock", "3 left", "3"),
	}})
	wantErr(t, "stale holder's result", err, fencing.ErrStale)
	wantUnchanged(t, "stale holder's result", before, get(t, s, "obs-2"))
	refusedEv := resultEvents(t, s, la.Token)
	if len(refusedEv) != 1 || refusedEv[0].Accepted {
		t.Fatalf("stale result's write events %+v", refusedEv)
	}
	if rows := listObs(t, os, jobstore.ObservationFilter{Project: "lab"}); len(rows) != 0 {
		t.Fatalf("refused rows listed by default: %+v", rows)
	}
	all := listObs(t, os, jobstore.ObservationFilter{Project: "lab", All: true})
	if len(all) != 2 {
		t.Fatalf("%d rows with All, want the 2 refused: %+v", len(all), all)
	}
	for _, r := range all {
		if r.Accepted || r.WriteEvent != refusedEv[0].ID || r.Generation != 1 || r.Owner != ownerA || !r.AcceptedAt.Equal(refusedEv[0].At) {
			t.Fatalf("refused row %+v, want accepted false at write event %+v", r, refusedEv[0])
		}
	}

	// The current holder's result is accepted; sent again (its reply was
	// lost) it is refused and adds nothing.
	cur := []protocol.Observation{priceObs(2, "price", "¥1,000", "1000")}
	if _, err := os.CommitObserved(ctx, lb.Token, jobstore.ObservedResult{Result: result("ok"), Observations: cur}); err != nil {
		t.Fatalf("current holder's result: %v", err)
	}
	_, err = os.CommitObserved(ctx, lb.Token, jobstore.ObservedResult{Result: result("ok"), Observations: cur})
	wantErr(t, "the accepted result sent again", err, fencing.ErrStale)
	_, err = os.CommitObserved(ctx, la.Token, jobstore.ObservedResult{Result: result("stale"), Observations: []protocol.Observation{
		priceObs(2, "price", "¥999", "999"), priceObs(3, "stock", "3 left", "3"),
	}})
	wantErr(t, "the stale result sent again", err, fencing.ErrStale)
	rows := listObs(t, os, jobstore.ObservationFilter{Project: "lab"})
	if len(rows) != 1 || rows[0].Generation != 2 || rows[0].Owner != ownerB || rows[0].Value != "1000" || !rows[0].Accepted {
		t.Fatalf("accepted rows %+v, want the current holder's one", rows)
	}
	if n := len(listObs(t, os, jobstore.ObservationFilter{Project: "lab", All: true})); n != 3 {
		t.Fatalf("%d rows with All after the results were sent again, want 3", n)
	}
	if evs := resultEvents(t, s, lb.Token); len(evs) != 2 || !evs[0].Accepted || evs[1].Accepted {
		t.Fatalf("current holder's result events %+v", evs)
	}

	// An unknown job: refused, its attempt recorded, no rows.
	ghost := tok("obs-none", ownerA, 1)
	_, err = os.CommitObserved(ctx, ghost, jobstore.ObservedResult{Result: result("x"), Observations: cur})
	wantErr(t, "unknown job", err, jobstore.ErrNotFound)
	if evs := resultEvents(t, s, ghost); len(evs) != 1 || evs[0].Accepted {
		t.Fatalf("unknown job's write events %+v", evs)
	}
	if n := len(listObs(t, os, jobstore.ObservationFilter{Project: "lab", All: true})); n != 3 {
		t.Fatalf("%d rows with All after an unknown job's result, want 3", n)
	}

	// Tokens that never held the job (forged boot ids) fill its refused
	// rows up to the bound, and no further.
	submitIn(t, s, "obs-3", "bound")
	claim(t, s, "obs-3", ownerA, long)
	full := make([]protocol.Observation, protocol.MaxObservations)
	for i := range full {
		full[i] = protocol.Observation{Step: i, Name: "n", Raw: "r", Value: "r", Parse: protocol.ParseText}
	}
	for i := range jobstore.MaxRefusedObservations/protocol.MaxObservations + 1 {
		forged := tok("obs-3", fencing.Owner("agent-a", fmt.Sprintf("forged-%d", i)), 1)
		_, err := os.CommitObserved(ctx, forged, jobstore.ObservedResult{Result: result("x"), Observations: full})
		wantErr(t, "forged token", err, fencing.ErrStale)
	}
	if n := countObs(t, os, jobstore.ObservationFilter{Project: "bound", All: true}); n != jobstore.MaxRefusedObservations {
		t.Fatalf("job keeps %d refused rows, want the bound %d", n, jobstore.MaxRefusedObservations)
	}
}

// testObservationsInvalid: a result with an invalid observation is an
// error naming the field that writes nothing: no write event, no row, the
// job still running.
func testObservationsInvalid(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	os := observationStore(t, s)
	submitIn(t, s, "obs-bad", "lab")
	l := claim(t, s, "obs-bad", ownerA, long)
	before := get(t, s, "obs-bad")
	long := strings.Repeat("x", protocol.MaxObservedBytes+1)
	many := make([]protocol.Observation, protocol.MaxObservations+1)
	for i := range many {
		many[i] = protocol.Observation{Name: "n", Parse: protocol.ParseText}
	}
	for _, c := range []struct {
		obs   []protocol.Observation
		field string
	}{
		{[]protocol.Observation{{Name: "ok", Parse: protocol.ParseText}, {Name: "p", Raw: long}}, "observations[1].raw"},
		{[]protocol.Observation{{Name: "9bad"}}, "observations[0].name"},
		{[]protocol.Observation{{Name: strings.Repeat("n", 5000)}}, "observations[0].name: 5000 bytes"},
		{[]protocol.Observation{{Name: "p", Value: "a\x00b"}}, "observations[0].value: holds a NUL"},
		{[]protocol.Observation{{Name: "p", Raw: "\xff"}}, "observations[0].raw: not UTF-8"},
		{[]protocol.Observation{{Name: "p", Parse: "float"}}, "observations[0].parse"},
		{[]protocol.Observation{{Name: "p", Currency: "yen"}}, "observations[0].currency"},
		{[]protocol.Observation{{Name: "p", Currency: strings.Repeat("Y", 100)}}, "observations[0].currency: 100 bytes"},
		{[]protocol.Observation{{Name: "p", Selector: strings.Repeat("s", jobstore.MaxObservationText+1)}}, "observations[0].selector"},
		{[]protocol.Observation{{Name: "p", Bounds: [4]int{0, 0, jobstore.MaxBound + 1, 0}}}, "observations[0].bounds[2]"},
		{[]protocol.Observation{{Name: "p", Step: -1}}, "observations[0].step"},
		{[]protocol.Observation{{Name: "p", ObservedAt: time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC)}}, "observations[0].observed_at"},
		{[]protocol.Observation{{Name: "p", Evidence: []protocol.Evidence{{Name: "../x", SHA256: sumA}}}}, "observations[0].evidence[0].name"},
		{[]protocol.Observation{{Name: "p", Evidence: []protocol.Evidence{{Name: "x.png", SHA256: "ABC"}}}}, "observations[0].evidence[0].sha256"},
		{[]protocol.Observation{{Name: "p", App: &protocol.AppVersion{Package: "com.x; drop"}}}, "observations[0].app.package"},
		{[]protocol.Observation{{Name: "p", Locale: strings.Repeat("l", jobstore.MaxObservationShort+1)}}, "observations[0].locale"},
		{many, "observations: 1001"},
	} {
		_, err := os.CommitObserved(ctx, l.Token, jobstore.ObservedResult{Result: result("x"), Observations: c.obs})
		if !errors.Is(err, jobstore.ErrInvalidObservation) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: got %v, want ErrInvalidObservation naming %s", c.field, err, c.field)
		}
		if err != nil && len(err.Error()) > 500 {
			t.Errorf("%s: the error quotes the input (%d bytes)", c.field, len(err.Error()))
		}
	}
	wantUnchanged(t, "invalid observations", before, get(t, s, "obs-bad"))
	if evs := resultEvents(t, s, l.Token); len(evs) != 0 {
		t.Fatalf("invalid observations recorded write events %+v", evs)
	}
	if rows := listObs(t, os, jobstore.ObservationFilter{Project: "lab", All: true}); len(rows) != 0 {
		t.Fatalf("invalid observations stored rows %+v", rows)
	}
}

// testObservationsList: the listing of a project by id, with its filters
// (name, job, phone, app, accepted_at since and until, all generations)
// and cursor paging that neither repeats nor skips a row; another
// project's rows are never listed.
func testObservationsList(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	os := observationStore(t, s)
	for i, d := range []protocol.Device{phone("P1", "Pixel 7"), phone("P2", "Pixel 8")} {
		submitSel(t, s, fmt.Sprintf("list-%d", i), protocol.DeviceSelector{Serial: d.Serial})
	}
	submitIn(t, s, "list-other", "other")
	commit := func(id string, obs ...protocol.Observation) {
		t.Helper()
		l := claim(t, s, id, ownerA, long)
		if _, err := os.CommitObserved(ctx, l.Token, jobstore.ObservedResult{Result: result(id), Observations: obs}); err != nil {
			t.Fatalf("commit %s: %v", id, err)
		}
	}
	other := priceObs(1, "price", "$1", "1")
	commit("list-other", other)
	a := priceObs(1, "price", "¥100", "100")
	b := priceObs(2, "title", "Shoes", "Shoes")
	b.App = &protocol.AppVersion{Package: "com.example.other"}
	commit("list-0", a, b)
	first := listObs(t, os, jobstore.ObservationFilter{Project: jobstore.DefaultProject})
	if len(first) != 2 {
		t.Fatalf("rows after the first commit %+v", first)
	}
	// The second commit is accepted later on the database clock.
	waitClockPast(t, s, first[1].AcceptedAt)
	commit("list-1", a, priceObs(3, "price", "¥120", "120"))

	all := listObs(t, os, jobstore.ObservationFilter{Project: jobstore.DefaultProject})
	ids := func(rows []jobstore.ObservationRow) string {
		var out []string
		for _, r := range rows {
			out = append(out, fmt.Sprintf("%s/%s=%s", r.JobID, r.Name, r.Value))
		}
		return strings.Join(out, " ")
	}
	if got, want := ids(all), "list-0/price=100 list-0/title=Shoes list-1/price=100 list-1/price=120"; got != want {
		t.Fatalf("listing %q, want %q", got, want)
	}
	for _, c := range []struct {
		f    jobstore.ObservationFilter
		want string
	}{
		{jobstore.ObservationFilter{Name: "price"}, "list-0/price=100 list-1/price=100 list-1/price=120"},
		{jobstore.ObservationFilter{JobID: "list-1"}, "list-1/price=100 list-1/price=120"},
		{jobstore.ObservationFilter{Phone: "P1"}, "list-0/price=100 list-0/title=Shoes"},
		{jobstore.ObservationFilter{App: "com.example.other"}, "list-0/title=Shoes"},
		{jobstore.ObservationFilter{Since: all[2].AcceptedAt}, "list-1/price=100 list-1/price=120"},
		{jobstore.ObservationFilter{Until: all[2].AcceptedAt}, "list-0/price=100 list-0/title=Shoes"},
		{jobstore.ObservationFilter{Name: "price", Phone: "P2", All: true}, "list-1/price=100 list-1/price=120"},
		{jobstore.ObservationFilter{Name: "absent"}, ""},
	} {
		c.f.Project = jobstore.DefaultProject
		if got := ids(listObs(t, os, c.f)); got != c.want {
			t.Errorf("filter %+v: %q, want %q", c.f, got, c.want)
		}
	}
	if got := ids(listObs(t, os, jobstore.ObservationFilter{Project: "other"})); got != "list-other/price=1" {
		t.Errorf("project other: %q", got)
	}
	if rows := listObs(t, os, jobstore.ObservationFilter{Project: "nobody"}); len(rows) != 0 {
		t.Errorf("project without observations: %+v", rows)
	}

	// Pages of one row: every row once, in id order.
	var paged []jobstore.ObservationRow
	f := jobstore.ObservationFilter{Project: jobstore.DefaultProject, Limit: 1}
	for range 10 {
		page := listObs(t, os, f)
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		f.After = page[len(page)-1].ID
	}
	if ids(paged) != ids(all) {
		t.Fatalf("paged %q, want %q", ids(paged), ids(all))
	}
	for i := 1; i < len(paged); i++ {
		if paged[i].ID <= paged[i-1].ID {
			t.Fatalf("ids not ascending: %d after %d", paged[i].ID, paged[i-1].ID)
		}
	}

	for _, f := range []jobstore.ObservationFilter{
		{Project: "", Limit: 1},
		{Project: "x", Limit: 0},
		{Project: "x", Limit: jobstore.MaxObservationPage + 1},
		{Project: "x", Limit: 1, After: -1},
		{Project: "x", Limit: 1, Before: -1},
	} {
		if _, err := os.ListObservations(ctx, f); err == nil {
			t.Errorf("filter %+v accepted", f)
		}
	}
}

// testObservationsNewestFirst: Desc lists the same rows newest first;
// Before pages back through them, every row once; with the filters and
// with After they select the same rows as an ascending listing does.
func testObservationsNewestFirst(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	os := observationStore(t, s)
	for i := range 3 {
		id := fmt.Sprintf("desc-%d", i)
		submitIn(t, s, id, jobstore.DefaultProject)
		l := claim(t, s, id, ownerA, long)
		obs := []protocol.Observation{priceObs(1, "price", "¥1", strconv.Itoa(100+i)), priceObs(2, "title", "T", fmt.Sprintf("t%d", i))}
		if _, err := os.CommitObserved(ctx, l.Token, jobstore.ObservedResult{Result: result(id), Observations: obs}); err != nil {
			t.Fatalf("commit %s: %v", id, err)
		}
	}
	submitIn(t, s, "desc-other", "other")
	l := claim(t, s, "desc-other", ownerA, long)
	if _, err := os.CommitObserved(ctx, l.Token, jobstore.ObservedResult{Result: result("o"), Observations: []protocol.Observation{priceObs(1, "price", "$1", "1")}}); err != nil {
		t.Fatal(err)
	}
	values := func(rows []jobstore.ObservationRow) string {
		var out []string
		for _, r := range rows {
			out = append(out, r.Value)
		}
		return strings.Join(out, " ")
	}
	asc := listObs(t, os, jobstore.ObservationFilter{Project: jobstore.DefaultProject})
	desc := listObs(t, os, jobstore.ObservationFilter{Project: jobstore.DefaultProject, Desc: true})
	if got, want := values(asc), "100 t0 101 t1 102 t2"; got != want {
		t.Fatalf("ascending %q, want %q", got, want)
	}
	if got, want := values(desc), "t2 102 t1 101 t0 100"; got != want {
		t.Fatalf("newest first %q, want %q", got, want)
	}
	// Pages of two, newest first, each before the last row of the one
	// before it.
	var paged []jobstore.ObservationRow
	f := jobstore.ObservationFilter{Project: jobstore.DefaultProject, Desc: true, Limit: 2}
	for range 10 {
		page := listObs(t, os, f)
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		f.Before = page[len(page)-1].ID
	}
	if values(paged) != values(desc) {
		t.Fatalf("paged newest first %q, want %q", values(paged), values(desc))
	}
	for i := 1; i < len(paged); i++ {
		if paged[i].ID >= paged[i-1].ID {
			t.Fatalf("ids not descending: %d after %d", paged[i].ID, paged[i-1].ID)
		}
	}
	for _, c := range []struct {
		f    jobstore.ObservationFilter
		want string
	}{
		{jobstore.ObservationFilter{Desc: true, Name: "price"}, "102 101 100"},
		{jobstore.ObservationFilter{Desc: true, JobID: "desc-1"}, "t1 101"},
		{jobstore.ObservationFilter{Desc: true, Name: "price", Limit: 1}, "102"},
		{jobstore.ObservationFilter{Desc: true, After: asc[1].ID, Before: asc[4].ID}, "t1 101"},
		{jobstore.ObservationFilter{Before: asc[2].ID}, "100 t0"},
		{jobstore.ObservationFilter{Desc: true, Before: asc[0].ID}, ""},
	} {
		c.f.Project = jobstore.DefaultProject
		if got := values(listObs(t, os, c.f)); got != c.want {
			t.Errorf("filter %+v: %q, want %q", c.f, got, c.want)
		}
	}
	if got := values(listObs(t, os, jobstore.ObservationFilter{Project: "other", Desc: true})); got != "1" {
		t.Errorf("project other newest first: %q", got)
	}
}

// waitClockPast waits until the store's database clock is past t (a write
// event is stamped with it).
func waitClockPast(t *testing.T, s sqlstore.Lab, at time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i := 0; ; i++ {
		j, err := s.Submit(ctx, jobstore.JobSpec{ID: fmt.Sprintf("clock-%d", i), Task: testTask(), Project: "clock"})
		if err != nil {
			t.Fatal(err)
		}
		if j.CreatedAt.After(at) {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("the database clock did not pass", at)
		}
		time.Sleep(time.Millisecond)
	}
}

// testObservationsOutbox: with an outbox key the message that publishes
// the result is written with the observations in one transaction.
func testObservationsOutbox(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	os := observationStore(t, s)
	submitIn(t, s, "obs-out", "lab")
	l := claim(t, s, "obs-out", ownerA, long)
	key := jobstore.OutboxKey("obs-out")
	if _, err := os.CommitObserved(ctx, l.Token, jobstore.ObservedResult{Result: result("ok"), Observations: []protocol.Observation{priceObs(1, "price", "1", "1")}, OutboxKey: key}); err != nil {
		t.Fatal(err)
	}
	fx, err := s.ListEffects(ctx, jobstore.EffectFilter{Kind: jobstore.EffectKindOutbox, JobID: "obs-out"})
	if err != nil || len(fx) != 1 || fx[0].Key != key {
		t.Fatalf("outbox %+v, %v", fx, err)
	}
	if rows := listObs(t, os, jobstore.ObservationFilter{Project: "lab"}); len(rows) != 1 {
		t.Fatalf("rows %+v", rows)
	}
}

// verbEvents returns the write events of verb of job id, in order.
func verbEvents(t *testing.T, s sqlstore.Lab, id, verb string) []jobstore.WriteEvent {
	t.Helper()
	evs, err := s.WriteEvents(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []jobstore.WriteEvent
	for _, e := range evs {
		if e.Verb == verb {
			out = append(out, e)
		}
	}
	return out
}

// testObservationsRecorded: RecordObservations, the observations an AI
// session records outside a result. Under the current token of a live
// lease each call adds rows linked to its own observe write event (never
// hiding, nor hidden by, the result's observations at their positions);
// a lease that expired (not yet reclaimed), a token of an earlier
// generation, a finished job and a forged token are refused as Renew is,
// their write events accepted false and their rows kept as refused,
// outside the default listing, within the job's bound of refused rows;
// an unknown job keeps only its write event; invalid input writes
// nothing; a token records at most MaxRecordedObservations.
func testObservationsRecorded(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	os := observationStore(t, s)
	dev := phone("S1", "SM-G991B")
	dev.Facts = &protocol.PhoneFacts{SDK: 33}
	hello(t, s, ownerA, dev)
	task := testTask()
	task.Device = protocol.DeviceSelector{}
	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "rec-1", Task: task, Project: "lab"}); err != nil {
		t.Fatal(err)
	}
	l, err := claimFor(t, s, ownerA, 1, dev)
	if err != nil || l.Token.JobID != "rec-1" || l.Device != "S1" {
		t.Fatalf("claim for: %v, %+v", err, l)
	}
	if err := s.RegisterArtifact(ctx, l.Token, jobstore.ArtifactRecord{Name: "screenshot-002.png", Key: l.Token.ObjectKey("screenshot-002.png"), Size: 3, SHA256: sumA, ContentType: "image/png"}); err != nil {
		t.Fatal(err)
	}
	price := protocol.Observation{Step: 2, Name: "price", Raw: "¥1,280", Value: "1280", Parse: protocol.ParsePrice, Currency: "JPY",
		Bounds: [4]int{10, 200, 500, 260}, ObservedAt: observedAt, App: &protocol.AppVersion{Package: "com.example.shop"},
		Evidence: []protocol.Evidence{{Name: "screenshot-002.png", SHA256: sumA}}}
	if err := os.RecordObservations(ctx, l.Token, []protocol.Observation{price}); err != nil {
		t.Fatalf("record under the current token: %v", err)
	}
	stock := protocol.Observation{Step: 3, Name: "stock", Raw: "3 left", Value: "3 left", Parse: protocol.ParseText}
	if err := os.RecordObservations(ctx, l.Token, []protocol.Observation{stock, stock}); err != nil {
		t.Fatalf("record again under the current token: %v", err)
	}
	evs := verbEvents(t, s, "rec-1", jobstore.VerbObserve)
	if len(evs) != 2 || !evs[0].Accepted || !evs[1].Accepted || evs[0].Owner != ownerA || evs[0].Generation != 1 {
		t.Fatalf("observe write events %+v, want two accepted under %s g1", evs, ownerA)
	}
	// The job's result, with an observation of its own at position 0,
	// neither hides nor is hidden by the recorded ones.
	if _, err := os.CommitObserved(ctx, l.Token, jobstore.ObservedResult{Result: result("ok"),
		Observations: []protocol.Observation{priceObs(5, "title", "Shoes", "Shoes")}}); err != nil {
		t.Fatalf("commit observed: %v", err)
	}
	rows := listObs(t, os, jobstore.ObservationFilter{Project: "lab"})
	if len(rows) != 4 {
		t.Fatalf("%d rows, want the 3 recorded and the result's: %+v", len(rows), rows)
	}
	want := jobstore.ObservationRow{
		ID: rows[0].ID, Project: "lab", JobID: "rec-1", Generation: 1, Owner: ownerA, AgentID: "agent-a",
		PhoneSerial: "S1", PhoneModel: "SM-G991B", PhoneSDK: 33, PhonePlatform: protocol.PlatformAndroid,
		Step: 2, Name: "price", Raw: "¥1,280", Value: "1280",
		Parse: protocol.ParsePrice, Currency: "JPY", Bounds: [4]int{10, 200, 500, 260}, AppPackage: "com.example.shop",
		ObservedAt: observedAt, AcceptedAt: evs[0].At,
		Evidence: []jobstore.ObservationEvidence{{Name: "screenshot-002.png", Key: l.Token.ObjectKey("screenshot-002.png"), SHA256: sumA}},
		Accepted: true, WriteEvent: evs[0].ID,
	}
	if fmt.Sprintf("%+v", rows[0]) != fmt.Sprintf("%+v", want) {
		t.Fatalf("recorded row\n got  %+v\n want %+v", rows[0], want)
	}
	for i, r := range rows[1:3] {
		if r.Name != "stock" || r.WriteEvent != evs[1].ID || !r.AcceptedAt.Equal(evs[1].At) || !r.Accepted {
			t.Fatalf("row %d %+v, want stock under write event %+v", i+1, r, evs[1])
		}
	}
	if rows[3].Name != "title" || rows[3].Step != 5 {
		t.Fatalf("the result's row %+v", rows[3])
	}

	// Refused as Renew is: a finished job, a token of an earlier
	// generation, a lease that expired before it was reclaimed, a forged
	// token. Each attempt is an observe write event accepted false and its
	// rows are kept as refused, never listed by default.
	late := protocol.Observation{Step: 9, Name: "price", Raw: "¥999", Value: "999", Parse: protocol.ParsePrice, Currency: "JPY"}
	err = os.RecordObservations(ctx, l.Token, []protocol.Observation{late})
	wantErr(t, "record after the job succeeded", err, fencing.ErrStale)

	submitIn(t, s, "rec-2", "lab")
	old := claim(t, s, "rec-2", ownerA, long)
	cur := reassign(t, s, "rec-2", ownerB)
	err = os.RecordObservations(ctx, old.Token, []protocol.Observation{late})
	wantErr(t, "record under an earlier generation", err, fencing.ErrStale)
	err = os.RecordObservations(ctx, tok("rec-2", fencing.Owner("agent-b", "forged"), cur.Token.Generation), []protocol.Observation{late})
	wantErr(t, "record under a forged token", err, fencing.ErrStale)

	submitIn(t, s, "rec-3", "lab")
	exp := claim(t, s, "rec-3", ownerA, short)
	waitClockPast(t, s, exp.ExpiresAt)
	err = os.RecordObservations(ctx, exp.Token, []protocol.Observation{late})
	wantErr(t, "record under an expired lease", err, fencing.ErrStale)
	if j := get(t, s, "rec-3"); j.Status != jobstore.StatusInProgress || j.Generation != 1 || j.WorkerID != ownerA {
		t.Fatalf("the expired job %+v, want still in progress under %s g1 (not reclaimed)", j, ownerA)
	}
	_, err = s.Renew(ctx, exp.Token, long)
	wantErr(t, "renew of the expired lease", err, fencing.ErrStale)

	for _, c := range []struct {
		id   string
		tk   fencing.Token
		want int
	}{
		{"rec-1", l.Token, 3},
		{"rec-2", old.Token, 2},
		{"rec-3", exp.Token, 1},
	} {
		evs := verbEvents(t, s, c.id, jobstore.VerbObserve)
		if len(evs) != c.want || evs[len(evs)-1].Accepted {
			t.Fatalf("%s: observe write events %+v, want %d, the last refused", c.id, evs, c.want)
		}
	}
	if rows := listObs(t, os, jobstore.ObservationFilter{Project: "lab"}); len(rows) != 4 {
		t.Fatalf("%d rows listed by default after the refusals, want the 4 accepted", len(rows))
	}
	refused := 0
	for _, r := range listObs(t, os, jobstore.ObservationFilter{Project: "lab", All: true}) {
		if r.Accepted {
			continue
		}
		refused++
		if r.Value != "999" || r.Step != 9 {
			t.Fatalf("refused row %+v", r)
		}
	}
	if refused != 4 {
		t.Fatalf("%d refused rows, want 4", refused)
	}

	// An unknown job: refused, its attempt recorded, no rows.
	err = os.RecordObservations(ctx, tok("rec-none", ownerA, 1), []protocol.Observation{late})
	wantErr(t, "record under an unknown job", err, jobstore.ErrNotFound)
	if evs := verbEvents(t, s, "rec-none", jobstore.VerbObserve); len(evs) != 1 || evs[0].Accepted {
		t.Fatalf("unknown job's write events %+v", evs)
	}

	// Invalid input writes nothing, not even a write event.
	submitIn(t, s, "rec-4", "lab")
	full := claim(t, s, "rec-4", ownerA, long)
	for _, obs := range [][]protocol.Observation{nil, {{Name: "9bad", Parse: protocol.ParseText}}, {{Name: "p", Raw: strings.Repeat("x", protocol.MaxObservedBytes+1)}}} {
		err := os.RecordObservations(ctx, full.Token, obs)
		wantErr(t, "invalid observations", err, jobstore.ErrInvalidObservation)
	}
	if evs := verbEvents(t, s, "rec-4", jobstore.VerbObserve); len(evs) != 0 {
		t.Fatalf("invalid observations recorded write events %+v", evs)
	}

	// Recordings under one token at the same moment each keep all their
	// rows.
	const together = 8
	errs := make(chan error, together)
	for i := range together {
		go func() {
			errs <- os.RecordObservations(ctx, full.Token, []protocol.Observation{{Step: i, Name: "n", Raw: "r", Value: "r", Parse: protocol.ParseText}})
		}()
	}
	for range together {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent recording: %v", err)
		}
	}
	if n := countObs(t, os, jobstore.ObservationFilter{Project: "lab", JobID: "rec-4"}); n != together {
		t.Fatalf("%d rows after %d concurrent recordings", n, together)
	}

	// A token records at most MaxRecordedObservations; past it nothing is
	// written.
	batch := make([]protocol.Observation, protocol.MaxObservations)
	for i := range batch {
		batch[i] = protocol.Observation{Step: i, Name: "n", Raw: "r", Value: "r", Parse: protocol.ParseText}
	}
	calls := together
	for left := jobstore.MaxRecordedObservations - together; left > 0; left -= len(batch) {
		if err := os.RecordObservations(ctx, full.Token, batch[:min(left, len(batch))]); err != nil {
			t.Fatalf("record a batch: %v", err)
		}
		calls++
	}
	err = os.RecordObservations(ctx, full.Token, batch[:1])
	wantErr(t, "record past the token's bound", err, jobstore.ErrObservationLimit)
	if n := len(verbEvents(t, s, "rec-4", jobstore.VerbObserve)); n != calls {
		t.Fatalf("%d observe write events, want one per accepted call (%d)", n, calls)
	}
	if n := countObs(t, os, jobstore.ObservationFilter{Project: "lab", JobID: "rec-4", All: true}); n != jobstore.MaxRecordedObservations {
		t.Fatalf("token holds %d rows, want the bound %d", n, jobstore.MaxRecordedObservations)
	}

	// Forged tokens fill a job's refused rows up to the bound, and no
	// further.
	submitIn(t, s, "rec-5", "bound")
	claim(t, s, "rec-5", ownerA, long)
	for i := range jobstore.MaxRefusedObservations/protocol.MaxObservations + 1 {
		forged := tok("rec-5", fencing.Owner("agent-a", fmt.Sprintf("forged-%d", i)), 1)
		wantErr(t, "forged token", os.RecordObservations(ctx, forged, batch), fencing.ErrStale)
	}
	if n := countObs(t, os, jobstore.ObservationFilter{Project: "bound", All: true}); n != jobstore.MaxRefusedObservations {
		t.Fatalf("job keeps %d refused rows, want the bound %d", n, jobstore.MaxRefusedObservations)
	}
}

// testObservationsPhonePlatform: a row names the platform and OS version
// of its phone as the token's agent last reported them, for a result's
// observations and for recorded ones: an iPhone is ios with its iOS
// version; a phone reported without a platform is android with its
// Android version; a phone the agent no longer lists takes the platform
// the job's selector names, its OS version not known.
func testObservationsPhonePlatform(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	os := observationStore(t, s)
	iphone := protocol.Device{Serial: "00008110-A", State: protocol.DeviceReady, Platform: protocol.PlatformIOS, Model: "iPhone 15",
		Facts: &protocol.PhoneFacts{IOSVersion: "17.5.1"}}
	android := phone("R5CT", "SM-G991B")
	android.Facts = &protocol.PhoneFacts{SDK: 34, AndroidVersion: "14"}
	hello(t, s, ownerA, iphone, android)
	for _, c := range []struct{ id, platform string }{{"on-iphone", protocol.PlatformIOS}, {"on-android", protocol.PlatformAndroid}} {
		task := testTask()
		task.Device = protocol.DeviceSelector{Platform: c.platform}
		if _, err := s.Submit(ctx, jobstore.JobSpec{ID: c.id, Task: task, Project: "lab"}); err != nil {
			t.Fatal(err)
		}
	}
	type want struct{ serial, platform, version string }
	wants := map[string]want{"on-iphone": {iphone.Serial, protocol.PlatformIOS, "17.5.1"}, "on-android": {"R5CT", protocol.PlatformAndroid, "14"}}
	for range 2 {
		l, err := claimFor(t, s, ownerA, 2, iphone, android)
		if err != nil {
			t.Fatalf("claim for: %v", err)
		}
		if err := os.RecordObservations(ctx, l.Token, []protocol.Observation{{Step: 1, Name: "stock", Raw: "3", Value: "3", Parse: protocol.ParseText}}); err != nil {
			t.Fatalf("record: %v", err)
		}
		if _, err := os.CommitObserved(ctx, l.Token, jobstore.ObservedResult{Result: result("ok"), Observations: []protocol.Observation{priceObs(2, "price", "¥100", "100")}}); err != nil {
			t.Fatalf("commit observed: %v", err)
		}
	}
	// The agent no longer lists the phone when its job's result comes.
	task := testTask()
	task.Device = protocol.DeviceSelector{Serial: "00008110-B", Platform: protocol.PlatformIOS}
	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "gone", Task: task, Project: "lab"}); err != nil {
		t.Fatal(err)
	}
	gone := protocol.Device{Serial: "00008110-B", State: protocol.DeviceReady, Platform: protocol.PlatformIOS, Model: "iPhone 13"}
	l, err := claimFor(t, s, ownerB, 1, gone)
	if err != nil || l.Token.JobID != "gone" {
		t.Fatalf("claim for the unlisted phone: %v, %+v", err, l)
	}
	if _, err := os.CommitObserved(ctx, l.Token, jobstore.ObservedResult{Result: result("ok"), Observations: []protocol.Observation{priceObs(2, "price", "¥200", "200")}}); err != nil {
		t.Fatalf("commit observed: %v", err)
	}
	wants["gone"] = want{"00008110-B", protocol.PlatformIOS, ""}

	rows := listObs(t, os, jobstore.ObservationFilter{Project: "lab"})
	if len(rows) != 5 {
		t.Fatalf("%d rows, want 5: %+v", len(rows), rows)
	}
	for _, r := range rows {
		w := wants[r.JobID]
		if r.PhoneSerial != w.serial || r.PhonePlatform != w.platform || r.PhoneOSVersion != w.version {
			t.Errorf("row %s of %s: phone %q %q %q, want %q %q %q", r.Name, r.JobID, r.PhoneSerial, r.PhonePlatform, r.PhoneOSVersion,
				w.serial, w.platform, w.version)
		}
	}
}
