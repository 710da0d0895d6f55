package mcp_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/mcp"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// export reads project's dataset as CSV through the API with the token of
// name (query: more parameters) and returns its rows by column name.
func (e *env) export(name, project, query string) []map[string]string {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, e.base+"/api/v1/projects/"+project+"/observations?format=csv"+query, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.tokens[name])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		e.t.Fatalf("export %s: %d %s (%v)", project, resp.StatusCode, body, err)
	}
	recs, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
	if err != nil || len(recs) == 0 {
		e.t.Fatalf("export %s: %q is not CSV with a header: %v", project, body, err)
	}
	var rows []map[string]string
	for _, r := range recs[1:] {
		row := map[string]string{}
		for i, col := range recs[0] {
			row[col] = r[i]
		}
		rows = append(rows, row)
	}
	return rows
}

// TestMCPRecordObservation: an AI session on the real edgecoord binary
// records the price it read off the shop's screen with record_observation:
// the value is read as a price, the element's bounds and app are kept, and
// the row is in the project's CSV export with the session's phone and its
// latest screenshot and UI dump as evidence, their keys and sha256 those
// registered under the session's token. Bad arguments and a session
// without a screenshot are tool errors that record nothing. Then the
// session is lost: its agent dies and its lease expires and is reclaimed.
// A late record_observation is refused by the store's fence, named as
// such; write_events holds it as a refused observe attempt under the
// session's token, and the default export still holds only the first row
// (the refused one shows with generations=all, accepted false).
func TestMCPRecordObservation(t *testing.T) {
	e := newEnv(t, 1500*time.Millisecond, time.Minute)
	pc := e.startAgent("pc-a", capture.SimOptions{Model: "Pixel-Sim", Tags: []string{"project:lab"}, Width: 240, Height: 400,
		Catalogue: []capture.SimProduct{{Name: "Matcha latte", Price: "¥1,280"}, {Name: "Hojicha", Price: "¥980"}}})
	cs := e.connect(alice)
	var open mcp.OpenOut
	structured(t, ok(t, cs, mcp.ToolOpenSession, nil), &open)
	rec := func(args map[string]any) map[string]any {
		args["session_id"] = open.SessionID
		return args
	}
	price := func() map[string]any {
		return rec(map[string]any{"name": "price", "raw": "¥1,280", "parse": "price", "currency": "JPY"})
	}
	fails(t, cs, mcp.ToolRecordObservation, price(), "no screenshot to record as evidence")

	ok(t, cs, mcp.ToolLaunchApp, map[string]any{"session_id": open.SessionID, "package": capture.SimShop})
	ok(t, cs, mcp.ToolScreenshot, map[string]any{"session_id": open.SessionID})
	els := elements(t, cs, open.SessionID)
	at := slices.IndexFunc(els, func(el mcp.Element) bool {
		return el.Text == "¥1,280" && strings.HasSuffix(el.ResourceID, ":id/price")
	})
	if at < 0 || els[at].Package != capture.SimShop {
		t.Fatalf("no price element of %s in %+v", capture.SimShop, els)
	}

	// Bad arguments are tool errors naming the argument.
	bad := price()
	bad["raw"] = "¥1,280 ¥980"
	fails(t, cs, mcp.ToolRecordObservation, bad, "raw: read price")
	bad = price()
	bad["name"] = "9price"
	fails(t, cs, mcp.ToolRecordObservation, bad, "name: the observation's name")
	bad = price()
	bad["element"], bad["bounds"] = at, []int{1, 2, 3, 4}
	fails(t, cs, mcp.ToolRecordObservation, bad, "element: give element_index or bounds, not both")
	bad = price()
	bad["element"] = len(els)
	fails(t, cs, mcp.ToolRecordObservation, bad, fmt.Sprintf("element: %d is not an index of the %d elements", len(els), len(els)))
	bad = price()
	bad["raw"] = strings.Repeat("9", 5000)
	fails(t, cs, mcp.ToolRecordObservation, bad, "raw: 5000 bytes, at most 4096")

	args := price()
	args["element"] = at
	var got mcp.RecordOut
	structured(t, ok(t, cs, mcp.ToolRecordObservation, args), &got)
	arts, err := e.store.Artifacts(e.ctx, open.JobID, 1)
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]jobstore.ArtifactRecord{}
	for _, a := range arts {
		registered[a.Name] = a
	}
	shot, dump := registered["screenshot-002.png"], registered["ui_dump-003.xml"]
	wantEvidence := []jobstore.ObservationEvidence{{Name: shot.Name, Key: shot.Key, SHA256: shot.SHA256}, {Name: dump.Name, Key: dump.Key, SHA256: dump.SHA256}}
	if shot.Key != "jobs/"+open.JobID+"/g1/screenshot-002.png" || len(shot.SHA256) != 64 || dump.Key == "" {
		t.Fatalf("registered artifacts %+v", arts)
	}
	if got.Step != 3 || got.Name != "price" || got.Raw != "¥1,280" || got.Value != "1280" || got.Parse != "price" || got.Currency != "JPY" ||
		got.Bounds != els[at].Bounds || got.AppPackage != capture.SimShop || !slices.Equal(got.Evidence, wantEvidence) {
		t.Fatalf("recorded %+v, want price 1280 JPY at %v of %s after step 3 with evidence %+v", got, els[at].Bounds, capture.SimShop, wantEvidence)
	}

	// The row, in the project's export.
	rows := e.export(alice, "lab", "")
	if len(rows) != 1 {
		t.Fatalf("export %+v, want one row", rows)
	}
	row := rows[0]
	for col, want := range map[string]string{
		"job_id": open.JobID, "generation": "1", "agent_id": "pc-a", "phone_serial": "sim-pc-a", "phone_model": "Pixel-Sim",
		"step": "3", "name": "price", "raw": "¥1,280", "value": "1280", "parse": "price", "currency": "JPY", "selector": "",
		"app_package": capture.SimShop, "bounds": fmt.Sprintf("[%d,%d,%d,%d]", els[at].Bounds[0], els[at].Bounds[1], els[at].Bounds[2], els[at].Bounds[3]),
		"accepted": "true",
	} {
		if row[col] != want {
			t.Errorf("export %s = %q, want %q", col, row[col], want)
		}
	}
	var ev []jobstore.ObservationEvidence
	if err := json.Unmarshal([]byte(row["evidence"]), &ev); err != nil || !slices.Equal(ev, wantEvidence) {
		t.Fatalf("export evidence %s (%v), want %+v", row["evidence"], err, wantEvidence)
	}
	if row["observed_at"] == "" || !strings.HasPrefix(row["owner"], "pc-a/") {
		t.Fatalf("export row %+v", row)
	}

	// The session is lost: its agent dies; its lease expires and the
	// reaper takes the job back.
	pc.Kill()
	testenv.Eventually(t, 20*time.Second, "the dead agent's lease reclaimed", func() bool {
		j, err := e.store.Get(e.ctx, open.JobID)
		return err == nil && j.Generation >= 2
	})
	late := price()
	late["raw"], late["bounds"] = "¥999", []int{0, 0, 10, 10}
	fails(t, cs, mcp.ToolRecordObservation, late, "observation not recorded: the store refused the observation under the session's token",
		"lost at generation 1 after step 3", "Open a new session")
	var observe []jobstore.WriteEvent
	evs, err := e.store.WriteEvents(e.ctx, open.JobID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Verb == jobstore.VerbObserve {
			observe = append(observe, ev)
		}
	}
	if len(observe) != 2 || !observe[0].Accepted || observe[1].Accepted || observe[1].Generation != 1 || observe[1].Owner != row["owner"] {
		t.Fatalf("observe write events %+v, want the accepted one and the late one refused under %s g1", observe, row["owner"])
	}
	if rows := e.export(alice, "lab", ""); len(rows) != 1 || rows[0]["id"] != row["id"] {
		t.Fatalf("export after the refusal %+v, want only the first row", rows)
	}
	all := e.export(alice, "lab", "&generations=all")
	if len(all) != 2 || all[1]["accepted"] != "false" || all[1]["value"] != "999" || all[1]["write_event_id"] != fmt.Sprint(observe[1].ID) {
		t.Fatalf("export with generations=all %+v, want the refused row after the first", all)
	}
	// It stays lost.
	fails(t, cs, mcp.ToolScreenshot, map[string]any{"session_id": open.SessionID}, "lost at generation 1 after step 3")
}
