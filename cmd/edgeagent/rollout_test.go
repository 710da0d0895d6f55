//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// The placeholders of the documented upgrade commands: the version and
// the API's address.
const (
	docVersion = "v1.4.0"
	docAPI     = "https://coord.example.org"
)

// documentedUpgrade returns the command lines of the sh blocks of
// docs/operations.md, "Upgrade the fleet" (continuation lines joined,
// comments dropped): release keygen, release add, rollout start and
// rollout status, in that order.
func documentedUpgrade(t *testing.T) [][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		cmds          [][]string
		in, block     bool
		line, pending string
	)
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line = sc.Text()
		switch {
		case strings.HasPrefix(line, "#") && !block:
			in = strings.TrimLeft(line, "# ") == "Upgrade the fleet"
		case in && line == "```sh":
			block = true
		case block && line == "```":
			block = false
		case block:
			line, _, _ = strings.Cut(line, " #")
			pending += " " + strings.TrimSpace(line)
			if strings.HasSuffix(pending, `\`) {
				pending = strings.TrimSuffix(pending, `\`)
				continue
			}
			cmds = append(cmds, strings.Fields(pending))
			pending = ""
		}
	}
	want := []string{"edgecoord release keygen", "edgecoord release add", "edgecoord rollout start", "edgecoord rollout status"}
	if len(cmds) != len(want) {
		t.Fatalf("docs/operations.md, Upgrade the fleet: %d commands %q, want %d: %q", len(cmds), cmds, len(want), want)
	}
	for i, c := range cmds {
		if !strings.HasPrefix(strings.Join(c, " ")+" ", want[i]+" ") {
			t.Fatalf("docs/operations.md, Upgrade the fleet: command %d is %q, want %s …", i+1, strings.Join(c, " "), want[i])
		}
	}
	return cmds
}

// rolloutAgent is agent id's row of a rollout status.
func rolloutAgent(v api.RolloutView, id string) api.RolloutAgentView {
	for _, a := range v.AgentStates {
		if a.ID == id {
			return a
		}
	}
	return api.RolloutAgentView{}
}

// fleetAgent is a real edgeagent with a fake phone behind its own adb
// server, run from its own copy of the binary under a supervisor.
type fleetAgent struct {
	id    string
	exe   string
	phone fakePhone
	sup   *e2e.Supervisor
	job   string // its held job
	owner string // the job's lease owner
}

// heldJob is a job that waits on the phone until the test opens
// Settings on it (releaseJob): an agent told to update while it runs
// must wait for it.
func heldJob(serial string) jobstore.JobSpec {
	return jobstore.JobSpec{Task: protocol.Task{Device: protocol.DeviceSelector{Serial: serial}, Steps: []protocol.Step{{
		Op: protocol.OpWaitFor, Element: &protocol.Selector{ID: "com.android.settings:id/title"}, TimeoutMS: protocol.MaxWaitForMS,
	}}}}
}

// TestRolloutRealAgents follows docs/operations.md, "Upgrade the fleet",
// command for command, against the real edgecoord (PostgreSQL, MinIO,
// NATS) and two real edgeagent binaries built as v1.0.0, each with a fake
// phone and run by a supervisor that starts it again when it exits, as
// systemd does:
//
//   - release keygen, release add of v2.0.0 and of v3.0.0 (a build that
//     crashes at every start), each agent's config trusting the key;
//   - each agent runs a job that waits until the test lets it end; a
//     rollout of v2.0.0 in steps 50%,100% tells pc-1 first: it drains
//     while pc-2 is not told, its job ends SUCCEEDED in its one attempt
//     with every lease write accepted, then it exits 75 and comes back as
//     v2.0.0; then pc-2 the same; the rollout completes and no job failed
//     for the update;
//   - a rollout of v3.0.0 with --max-failures 1 tells pc-1, whose v3
//     crashes until the third start puts v2 back; v2 reports rolled_back,
//     the rollout pauses, and pc-2 is never told.
func TestRolloutRealAgents(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs edgecoord and three builds of edgeagent")
	}
	doc := documentedUpgrade(t)
	v1, v2, v3 := agentBuilds(t)
	env := e2e.NewEnv(t)
	c := env.StartCoordinator(e2e.CoordinatorOptions{ID: "fleet", API: true, Storage: true})
	tok := c.Token(t, "ops", "lab", "read,admin")
	store, ctx := c.Store(), t.Context()
	work := t.TempDir()

	// op runs documented command i in work with the version and the API's
	// address put in, and extra arguments after it; it must exit 0.
	op := func(i int, version string, extra ...string) string {
		t.Helper()
		args := slices.Clone(doc[i][1:])
		for j, a := range args {
			switch a {
			case docVersion:
				args[j] = version
			case docAPI:
				args[j] = c.Base
			}
		}
		args = append(args, extra...)
		out, errOut, code := e2e.Run(t, e2e.Command{Path: testenv.Binary(t, "edgecoord"), Args: args, Dir: work,
			Env: []string{"EDGECOORD_API_TOKEN=" + tok}})
		if code != 0 {
			t.Fatalf("edgecoord %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	const keygen, add, start, status = 0, 1, 2, 3
	statusJSON := func() api.RolloutView {
		t.Helper()
		var v api.RolloutView
		if out := op(status, "", "--json"); json.Unmarshal([]byte(out), &v) != nil {
			t.Fatalf("rollout status --json: %s", out)
		}
		return v
	}

	pub := strings.TrimSpace(op(keygen, ""))
	if _, err := protocol.ParseReleaseKey(pub); err != nil {
		t.Fatalf("release keygen printed %q: %v", pub, err)
	}
	dist := filepath.Join(work, doc[add][len(doc[add])-1])
	if err := os.MkdirAll(filepath.Dir(dist), 0o700); err != nil {
		t.Fatal(err)
	}
	for v, b := range map[string][]byte{"v2.0.0": v2, "v3.0.0": v3} {
		if err := os.WriteFile(dist, b, 0o755); err != nil {
			t.Fatal(err)
		}
		op(add, v)
	}

	agents := map[string]*fleetAgent{}
	ids := []string{"pc-1", "pc-2"}
	for _, id := range ids {
		adb := testenv.StartADB(t)
		phones := startPhones(t, adb, fakeadbd.Options{}, "[lab]")
		f := &fleetAgent{id: id, exe: filepath.Join(t.TempDir(), "edgeagent"), phone: phones[0]}
		if err := os.WriteFile(f.exe, v1, 0o755); err != nil {
			t.Fatal(err)
		}
		a := env.NewAgent(e2e.AgentOptions{ID: id, ADB: adb, Phones: devices(phones), Extra: updateConfig(pub)})
		f.sup = e2e.Supervise(t, a.RunCommand(f.exe), e2e.SuperviseOptions{PreventExit: []int{2}})
		agents[id] = f
	}
	for _, id := range ids {
		f := agents[id]
		testenv.Eventually(t, e2e.WaitTimeout, id+" online as v1.0.0 with its phone ready", func() bool {
			a, err := store.GetAgent(ctx, id)
			return err == nil && a.Version == "v1.0.0" && slices.ContainsFunc(a.Devices, func(d protocol.Device) bool {
				return d.Serial == f.phone.Serial() && d.Ready()
			})
		})
		j, err := store.Submit(ctx, heldJob(f.phone.Serial()))
		if err != nil {
			t.Fatal(err)
		}
		f.job = j.ID
		testenv.Eventually(t, e2e.WaitTimeout, id+" running its job", func() bool {
			j, err := store.Get(ctx, f.job)
			f.owner = j.WorkerID
			return err == nil && j.Status == jobstore.StatusInProgress && strings.HasPrefix(j.WorkerID, id+"/")
		})
	}

	// Rollout of v2.0.0: one agent per step, each draining its job first.
	first := strings.TrimSpace(op(start, "v2.0.0"))
	for i, id := range ids {
		f := agents[id]
		var u *jobstore.AgentUpdate
		testenv.Eventually(t, e2e.WaitTimeout, id+" told to update to v2.0.0", func() bool {
			u = rolloutAgent(statusJSON(), id).Update
			return u != nil && u.RolloutID == first || f.sup.Current().Exited()
		})
		if u == nil || u.State != protocol.UpdateDraining {
			t.Fatalf("%s told to update while its job runs: %+v (exits %v), want it draining", id, u, f.sup.Exits())
		}
		v := statusJSON()
		if i == 0 && rolloutAgent(v, "pc-2").Status != "pending" {
			t.Fatalf("pc-2 while pc-1 drains in step 1: %+v", rolloutAgent(v, "pc-2"))
		}
		if j, err := store.Get(ctx, f.job); err != nil || j.Status != jobstore.StatusInProgress {
			t.Fatalf("%s's job while it drains: %s (%v)", id, j.Status, err)
		}
		if f.sup.Current().Exited() || len(f.sup.Processes()) != 1 {
			t.Fatalf("%s exited while its job runs (exits %v)", id, f.sup.Exits())
		}
		if err := f.phone.Sim().Launch(ctx, "com.android.settings"); err != nil {
			t.Fatal(err)
		}
		f.sup.WaitStarts(t, 2)
		testenv.Eventually(t, e2e.WaitTimeout, id+" back as v2.0.0", func() bool {
			a, err := store.GetAgent(ctx, id)
			return err == nil && a.Version == "v2.0.0"
		})
	}
	testenv.Eventually(t, e2e.WaitTimeout, "rollout "+first+" completed", func() bool {
		return statusJSON().State == jobstore.RolloutCompleted
	})
	v := statusJSON()
	for _, id := range ids {
		f := agents[id]
		if a := rolloutAgent(v, id); a.Status != jobstore.RolloutAgentDone || a.Version != "v2.0.0" || a.Update == nil || a.Update.State != protocol.UpdateDone {
			t.Errorf("%s after the rollout: %+v (update %+v)", id, a, a.Update)
		}
		j, err := store.Get(ctx, f.job)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != jobstore.StatusSucceeded || j.Attempts != 1 || len(j.AttemptEnds) != 0 || j.WorkerID != f.owner {
			t.Errorf("%s's job %s after %d attempts on %s, ends %+v: want SUCCEEDED in one attempt on %s", id, j.Status, j.Attempts, j.WorkerID, j.AttemptEnds, f.owner)
		}
		evs, err := store.WriteEvents(ctx, f.job)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if !e.Accepted {
				t.Errorf("%s's job: %s by %s refused: its lease was lost", id, e.Verb, e.Owner)
			}
		}
		if exits := f.sup.Exits(); !slices.Equal(exits, []int{agent.ExitUpdate}) {
			t.Errorf("%s exits %v, want [%d]: v1 exits for the update", id, exits, agent.ExitUpdate)
		}
		if out, _, code := c.CLI(t, "agent", "show", id); code != 0 || !regexp.MustCompile(`(?m)^\s*version\s+v2\.0\.0$`).MatchString(out) {
			t.Errorf("edgecoord agent show %s: exit %d:\n%s", id, code, out)
		}
		wantFile(t, f.exe, v2, id+"'s binary after the update is not v2")
	}
	failed, err := store.ListJobs(ctx, jobstore.JobFilter{Statuses: []string{jobstore.StatusFailed}})
	if err != nil || len(failed) != 0 {
		t.Fatalf("failed jobs %+v (%v)", failed, err)
	}
	if out := op(status, ""); !strings.Contains(out, "completed") || strings.Count(out, "v2.0.0") < 3 {
		t.Fatalf("rollout status:\n%s", out)
	}

	// Rollout of v3.0.0, which crashes: pc-1 rolls back, the rollout
	// pauses before pc-2.
	second := strings.TrimSpace(op(start, "v3.0.0"))
	testenv.Eventually(t, e2e.WaitTimeout, "rollout "+second+" paused", func() bool {
		return statusJSON().State == jobstore.RolloutPaused
	})
	v = statusJSON()
	if a := rolloutAgent(v, "pc-1"); a.Status != jobstore.RolloutAgentFailed || a.Version != "v2.0.0" ||
		!strings.Contains(a.LastOutcome, protocol.UpdateRolledBack) || a.Update == nil || a.Update.RolloutID != second {
		t.Errorf("pc-1 after v3.0.0: %+v (update %+v)", a, a.Update)
	}
	if a := rolloutAgent(v, "pc-2"); a.Status != "pending" || a.Order != nil || a.Version != "v2.0.0" || a.Update == nil || a.Update.RolloutID != first {
		t.Errorf("pc-2, which the paused rollout did not tell: %+v (update %+v)", a, a.Update)
	}
	want := []int{agent.ExitUpdate, agent.ExitUpdate, 1, 1, agent.ExitUpdate}
	if exits := agents["pc-1"].sup.Exits(); !slices.Equal(exits, want) {
		t.Errorf("pc-1 exits %v, want %v: v1 and v2 for the updates, v3 crashing twice, v3 putting v2 back", exits, want)
	}
	wantFile(t, agents["pc-1"].exe, v2, "pc-1's binary after the rollback is not v2")
	if exits := agents["pc-2"].sup.Exits(); len(agents["pc-2"].sup.Processes()) != 2 || !slices.Equal(exits, []int{agent.ExitUpdate}) {
		t.Errorf("pc-2 exits %v: the v3.0.0 rollout touched it", exits)
	}
	wantFile(t, agents["pc-2"].exe, v2, "pc-2's binary changed in the paused rollout")
	if out := op(status, ""); !strings.Contains(out, "paused") || !strings.Contains(out, protocol.UpdateRolledBack) {
		t.Fatalf("rollout status of the paused rollout:\n%s", out)
	}
	for _, id := range ids {
		if code := agents[id].sup.Stop(t); code != 0 {
			t.Errorf("%s exited %d after SIGTERM", id, code)
		}
	}
}
