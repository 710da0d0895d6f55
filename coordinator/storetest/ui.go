package storetest

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/protocol"
)

var uiTests = []struct {
	name string
	fn   func(t *testing.T, s sqlstore.Lab)
}{
	{"UISessions", testUISessions},
	{"UIActions", testUIActions},
	{"PhoneScreens", testPhoneScreens},
	{"RunningJobs", testRunningJobs},
	{"FleetAgents", testFleetAgents},
}

func uiStore(t *testing.T, s sqlstore.Lab) jobstore.UIStore {
	t.Helper()
	u, ok := s.(jobstore.UIStore)
	if !ok {
		t.Fatalf("%T does not keep dashboard sessions", s)
	}
	return u
}

func testUISessions(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	u := uiStore(t, s)
	a := s.(jobstore.APIStore)
	tok, err := a.CreateAPIToken(ctx, jobstore.APIToken{Name: "ops", Hash: sha256.Sum256([]byte("t")), Projects: []string{"p1"}, Scopes: []string{"read"}})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte("cookie secret"))
	sess, err := u.CreateUISession(ctx, h, tok.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if d := sess.ExpiresAt.Sub(sess.CreatedAt); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("session lasts %s, want an hour", d)
	}
	got, gotTok, err := u.UISession(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if got.TokenID != tok.ID || gotTok.Name != "ops" || len(gotTok.Projects) != 1 || gotTok.Projects[0] != "p1" || gotTok.Revoked() {
		t.Errorf("session %+v, token %+v", got, gotTok)
	}
	if _, _, err := u.UISession(ctx, sha256.Sum256([]byte("other"))); !errors.Is(err, jobstore.ErrUISessionNotFound) {
		t.Errorf("unknown session: err = %v, want ErrUISessionNotFound", err)
	}
	// A revoked token's session is found with its token revoked: the
	// caller refuses it.
	if _, err := a.RevokeAPIToken(ctx, "ops"); err != nil {
		t.Fatal(err)
	}
	if _, gotTok, err = u.UISession(ctx, h); err != nil || !gotTok.Revoked() {
		t.Errorf("session of a revoked token: %+v, %v", gotTok, err)
	}
	// An expired session is not found, and the next login deletes it.
	short := sha256.Sum256([]byte("short"))
	if _, err := u.CreateUISession(ctx, short, tok.ID, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if _, _, err := u.UISession(ctx, short); !errors.Is(err, jobstore.ErrUISessionNotFound) {
		t.Errorf("expired session: err = %v, want ErrUISessionNotFound", err)
	}
	if err := u.DeleteUISession(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, _, err := u.UISession(ctx, h); !errors.Is(err, jobstore.ErrUISessionNotFound) {
		t.Errorf("deleted session: err = %v, want ErrUISessionNotFound", err)
	}
	if err := u.DeleteUISession(ctx, h); err != nil {
		t.Errorf("delete twice: %v", err)
	}
}

func testUIActions(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	u := uiStore(t, s)
	for _, a := range []jobstore.UIAction{
		{TokenName: "ops", Action: jobstore.UIActionDrain, Target: "agent-a"},
		{TokenName: "ops", Action: jobstore.UIActionCancel, Target: "j1", JobID: "j1", Detail: "wrong phone"},
		{TokenName: "bob", Action: jobstore.UIActionResume, Target: "agent-a"},
	} {
		if err := u.RecordUIAction(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	all, err := u.UIActions(ctx, jobstore.UIActionFilter{})
	if err != nil || len(all) != 3 || all[0].Action != "drain" || all[2].TokenName != "bob" || all[0].At.IsZero() {
		t.Fatalf("all actions %+v, %v", all, err)
	}
	byAgent, err := u.UIActions(ctx, jobstore.UIActionFilter{Target: "agent-a"})
	if err != nil || len(byAgent) != 2 {
		t.Errorf("agent-a's actions %+v, %v", byAgent, err)
	}
	byJob, err := u.UIActions(ctx, jobstore.UIActionFilter{JobID: "j1"})
	if err != nil || len(byJob) != 1 || byJob[0].Detail != "wrong phone" {
		t.Errorf("j1's actions %+v, %v", byJob, err)
	}
	last, err := u.UIActions(ctx, jobstore.UIActionFilter{Limit: 1})
	if err != nil || len(last) != 1 || last[0].TokenName != "bob" {
		t.Errorf("the newest action %+v, %v", last, err)
	}
}

func testPhoneScreens(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	u := uiStore(t, s)
	hello(t, s, ownerA, phone("S1", "Pixel 7"), phone("S2", "Pixel 7"))
	run := func(id, project, name, contentType string, devs ...protocol.Device) {
		t.Helper()
		task := testTask()
		task.Device = protocol.DeviceSelector{Serial: devs[0].Serial}
		if _, err := s.Submit(ctx, jobstore.JobSpec{ID: id, Task: task, Project: project}); err != nil {
			t.Fatal(err)
		}
		l, err := claimFor(t, s, ownerA, 4, devs...)
		if err != nil {
			t.Fatalf("claim %s: %v", id, err)
		}
		rec := artifact(l.Token, name, "1")
		rec.ContentType = contentType
		if err := s.RegisterArtifact(ctx, l.Token, rec); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(ctx, l.Token, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // apart on millisecond clocks
	}
	run("old", "p1", "old.png", "image/png", phone("S1", "Pixel 7"))
	run("new", "p1", "new.png", "image/png", phone("S1", "Pixel 7"))
	run("xml", "p1", "dump.xml", "application/xml", phone("S1", "Pixel 7"))
	run("other", "p2", "secret.png", "image/png", phone("S2", "Pixel 7"))

	refs := []jobstore.PhoneRef{{AgentID: "agent-a", Serial: "S1"}, {AgentID: "agent-a", Serial: "S2"}, {AgentID: "agent-b", Serial: "S1"}}
	got, err := u.PhoneScreens(ctx, refs, nil)
	if err != nil {
		t.Fatal(err)
	}
	byPhone := map[string]jobstore.PhoneScreen{}
	for _, p := range got {
		byPhone[p.AgentID+"/"+p.Serial] = p
	}
	if len(got) != 2 || byPhone["agent-a/S1"].JobID != "new" || byPhone["agent-a/S1"].Name != "new.png" ||
		byPhone["agent-a/S1"].Generation != 1 || byPhone["agent-a/S2"].Project != "p2" || byPhone["agent-a/S1"].At.IsZero() {
		t.Errorf("screens %+v", got)
	}
	got, err = u.PhoneScreens(ctx, refs, []string{"p1"})
	if err != nil || len(got) != 1 || got[0].JobID != "new" {
		t.Errorf("screens of p1 %+v, %v", got, err)
	}
	if got, err = u.PhoneScreens(ctx, refs, []string{}); err != nil || len(got) != 0 {
		t.Errorf("screens of no project %+v, %v", got, err)
	}
	// One row per phone: a newer image on S1 replaces its thumbnail, and
	// one of a project the caller does not see hides S1's.
	run("later", "p2", "later.png", "image/jpeg", phone("S1", "Pixel 7"))
	got, err = u.PhoneScreens(ctx, refs, nil)
	if err != nil || len(got) != 2 {
		t.Fatalf("screens after a newer image %+v, %v", got, err)
	}
	for _, p := range got {
		if p.Serial == "S1" && (p.JobID != "later" || p.ContentType != "image/jpeg" || p.Project != "p2") {
			t.Errorf("S1's newest screen %+v", p)
		}
	}
	if got, err = u.PhoneScreens(ctx, refs, []string{"p1"}); err != nil || len(got) != 0 {
		t.Errorf("screens of p1 after a newer image of p2 %+v, %v", got, err)
	}
}

func testRunningJobs(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	u := uiStore(t, s)
	hello(t, s, ownerA, phone("S1", "Pixel 7"))
	for _, id := range []string{"run", "wait"} {
		task := testTask()
		task.Device = protocol.DeviceSelector{Serial: "S1"}
		if _, err := s.Submit(ctx, jobstore.JobSpec{ID: id, Task: task, Project: "p1"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := claimFor(t, s, ownerA, 4, phone("S1", "Pixel 7")); err != nil {
		t.Fatal(err)
	}
	got, err := u.RunningJobs(ctx)
	if err != nil || len(got) != 1 || got[0].ID != "run" || got[0].Project != "p1" ||
		got[0].WorkerID != ownerA || got[0].Device != "S1" {
		t.Fatalf("running jobs %+v, %v (owner %s)", got, err, ownerA)
	}
}

// testFleetAgents: FleetAgents lists what Agents lists, each agent's
// device list as the stored JSON of what Agents decodes (Devices left nil),
// and a changed device list shows at once.
func testFleetAgents(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	u := uiStore(t, s)
	hello(t, s, ownerA, phone("S1", "Pixel 7", "lab"), phone("S2", "Pixel 8"))
	for round, want := range [][]string{{"S1 Pixel 7 [lab]", "S2 Pixel 8 []"}, {"S1 Pixel 7 [lab]", "S2 Pixel 8 []"}, {"S3 Pixel 9 [x]"}} {
		if round == 2 {
			hello(t, s, ownerA, phone("S3", "Pixel 9", "x"))
		}
		all, err := s.Agents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fleet, err := u.FleetAgents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(fleet) != len(all) || len(fleet) != 1 || fleet[0].ID != all[0].ID || fleet[0].Version != all[0].Version ||
			fleet[0].Slots != all[0].Slots || !slices.Equal(fleet[0].Capabilities, all[0].Capabilities) {
			t.Fatalf("round %d: fleet agents %+v, agents %+v", round, fleet, all)
		}
		if fleet[0].Devices != nil {
			t.Fatalf("round %d: fleet agent decoded its devices: %+v", round, fleet[0].Devices)
		}
		var devs []protocol.Device
		if err := json.Unmarshal(fleet[0].DevicesJSON, &devs); err != nil {
			t.Fatalf("round %d: devices JSON %q: %v", round, fleet[0].DevicesJSON, err)
		}
		if !reflect.DeepEqual(devs, all[0].Devices) {
			t.Errorf("round %d: fleet devices %+v, agents' %+v", round, devs, all[0].Devices)
		}
		var got []string
		for _, d := range devs {
			got = append(got, fmt.Sprintf("%s %s %v", d.Serial, d.Model, d.Tags))
		}
		if !slices.Equal(got, want) {
			t.Errorf("round %d: devices %q, want %q", round, got, want)
		}
	}
}
