package main

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/api/apitest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestJobRequiresAppVersion: two fake phones behind the real adb have the
// shop app at 5.1.0 and 5.2.1; their agent reads the versions with their
// facts, and agent show lists them. A job asking for the shop at >=5.2
// runs on the 5.2.1 phone and one asking for <5.2 on the other (one after
// the other, so the first phone in serial order is free for each); a job
// asking for >=6 waits, saying what each phone has; a requirement that is
// not a version is refused naming its field, through the API (422) and
// the CLI (exit 2).
func TestJobRequiresAppVersion(t *testing.T) {
	t.Parallel()
	version := func(name string, code int64) fakeadbd.Options {
		return fakeadbd.Options{AppVersions: map[string]protocol.AppVersion{capture.SimShop: {VersionName: name, VersionCode: code}}}
	}
	l := startSurveyLab(t, "apps", version("5.1.0", 510), version("5.2.1", 521))
	old, cur := l.phones[0].Serial(), l.phones[1].Serial()
	b := &apiBinary{Coordinator: l.coord, client: apitest.Client(t)}
	tok := b.Token(t, "surveyor", "lab", "read,submit")

	out, _, code := b.CLI(t, "agent", "show", "pc-bin")
	for _, want := range []string{"  " + old + " apps: com.example.shop 5.1.0 (510)", "  " + cur + " apps: com.example.shop 5.2.1 (521)"} {
		if code != 0 || !strings.Contains(out, want+"\n") {
			t.Errorf("agent show (exit %d) lacks %q:\n%s", code, want, out)
		}
	}

	show := func(id string) api.JobView {
		t.Helper()
		r := b.call(t, "GET", "/api/v1/jobs/"+id, tok, "")
		var j api.JobView
		r.into(t, &j)
		return j
	}
	submit := func(req string) api.JobView {
		t.Helper()
		r := b.call(t, "POST", "/api/v1/jobs", tok, `{"device": {"apps": {"com.example.shop": "`+req+`"}}, "steps": [{"op": "launch", "package": "com.example.shop"}]}`)
		var j api.JobView
		r.into(t, &j)
		if r.status != http.StatusCreated {
			t.Fatalf("submit %s: %d %s", req, r.status, r.body)
		}
		return j
	}
	for _, c := range []struct{ req, phone string }{{">=5.2", cur}, {"<5.2", old}} {
		j := submit(c.req)
		testenv.Eventually(t, e2e.WaitTimeout, "the job requiring "+c.req+" ends", func() bool { return jobstore.Finished(show(j.ID).Status) })
		if j = show(j.ID); j.Status != jobstore.StatusSucceeded || j.Phone != c.phone {
			t.Errorf("job requiring com.example.shop %s: %s on %s, want succeeded on %s (%s)", c.req, j.Status, j.Phone, c.phone, j.FailReason)
		}
	}

	j := submit(">=6")
	serials := []string{old + " has com.example.shop 5.1.0 (510)", cur + " has com.example.shop 5.2.1 (521)"}
	slices.Sort(serials)
	want := "waiting for phone app=com.example.shop>=6 (no phone has the app at that version: " + strings.Join(serials, ", ") + ")"
	if got := show(j.ID); got.Status != jobstore.StatusQueued || got.Waiting != want {
		t.Errorf("job requiring >=6: %s, waiting %q, want %q", got.Status, got.Waiting, want)
	}

	r := b.call(t, "POST", "/api/v1/jobs", tok, `{"device": {"apps": {"com.example.shop": ">= five"}}, "steps": [{"op": "screenshot"}]}`)
	var p api.Problem
	r.into(t, &p)
	if r.status != http.StatusUnprocessableEntity || p.Field != "device.apps.com.example.shop" || !strings.Contains(p.Detail, `"five" is not a version`) {
		t.Errorf("bad requirement: %d %s", r.status, r.body)
	}
	file := writeFile(t, "job.yaml", "device:\n  apps: {com.example.shop: \"latest\"}\nsteps: [{op: screenshot}]\n")
	if _, errOut, code := b.CLI(t, "job", "submit", "-f", file); code != exitUsage || !strings.Contains(errOut, `device: apps.com.example.shop: "latest": "latest" is not a version`) {
		t.Errorf("CLI submit of a bad requirement: exit %d, %s", code, errOut)
	}
}
