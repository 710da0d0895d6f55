package agent_test

import (
	"encoding/json"
	"testing"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
)

// A job's extract steps send their observations with the fenced result,
// each with its evidence (uploaded like any capture), the shop's version
// and the phone's locale and time zone from its facts; the result's
// document lists the apps the job launched with their versions. An
// extract that cannot read its value fails the job as extract_failed.
func TestResultCarriesObservations(t *testing.T) {
	leakCheck(t)
	sim := capture.NewSimulated(capture.SimOptions{Serial: "sim-1", Width: 720, Height: 1280,
		Catalogue:   []capture.SimProduct{{Name: "抹茶ラテ", Price: "¥1,280"}, {Name: "麦茶", Price: "¥1,280〜"}},
		AppVersions: map[string]protocol.AppVersion{capture.SimShop: {VersionName: "5.2.1", VersionCode: 521}}})
	inv := capture.NewInventory()
	if err := inv.Add(sim); err != nil {
		t.Fatal(err)
	}
	f, err := sim.Facts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	inv.SetFacts("sim-1", f)
	r := newRig(t, rigSetup{phones: agent.InventoryPhones(inv, "", capture.OpLogOptions{})})
	price := func(name string) protocol.Step {
		return protocol.Step{Op: protocol.OpExtract, Name: "price", Parse: protocol.ParsePrice,
			Element: &protocol.Selector{ID: "com.example.shop:id/price", Below: &protocol.Selector{Text: name}}}
	}
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, protocol.Task{Steps: []protocol.Step{{Op: protocol.OpLaunch, Package: capture.SimShop}, price("抹茶ラテ")}}); err != nil {
		t.Fatal(err)
	}
	r.waitGone(tok.JobID)
	var res protocol.Result
	for _, q := range r.coord.requests(tok.JobID) {
		if q.verb == protocol.VerbResult {
			if err := json.Unmarshal(q.data, &res); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(res.Observations) != 1 {
		t.Fatalf("result observations %+v, want one", res.Observations)
	}
	o := res.Observations[0]
	if o.Name != "price" || o.Raw != "¥1,280" || o.Value != "1280" || o.Currency != "JPY" || o.Step != 2 ||
		o.App == nil || o.App.VersionName != "5.2.1" || o.App.VersionCode != 521 || o.Locale != "ja-JP" || o.TimeZone != "Asia/Tokyo" {
		t.Fatalf("observation %+v (app %+v)", o, o.App)
	}
	r.store.mu.Lock()
	for _, ev := range o.Evidence {
		if _, ok := r.store.objects[tok.ObjectKey(ev.Name)]; !ok {
			t.Errorf("evidence %s was not uploaded", ev.Name)
		}
	}
	r.store.mu.Unlock()
	if len(o.Evidence) != 2 {
		t.Errorf("evidence %+v, want the dump and the screenshot", o.Evidence)
	}
	var doc struct {
		Apps []protocol.AppVersion `json:"apps"`
	}
	if err := json.Unmarshal(res.Result, &doc); err != nil || len(doc.Apps) != 1 || doc.Apps[0].Package != capture.SimShop || doc.Apps[0].VersionName != "5.2.1" {
		t.Fatalf("result document %s: apps %+v", res.Result, doc.Apps)
	}

	tok = r.token(2)
	tok.JobID = "range"
	if err := r.coord.assign("pc-a", tok, protocol.Task{Steps: []protocol.Step{{Op: protocol.OpLaunch, Package: capture.SimShop}, price("麦茶")}}); err != nil {
		t.Fatal(err)
	}
	r.waitFail(tok, protocol.FailClassJob, protocol.CauseExtractFailed)
}
