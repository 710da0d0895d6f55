package storetest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/protocol"
)

var releaseTests = []struct {
	name string
	fn   func(t *testing.T, s sqlstore.Lab)
}{
	{"Releases", testReleases},
	{"AgentUpdates", testAgentUpdates},
	{"Rollouts", testRollouts},
	{"RolloutClaimRace", testRolloutClaimRace},
}

func releaseStore(t *testing.T, s sqlstore.Lab) jobstore.ReleaseStore {
	t.Helper()
	rs, ok := s.(jobstore.ReleaseStore)
	if !ok {
		t.Fatalf("%T is not a jobstore.ReleaseStore", s)
	}
	return rs
}

func releaseRecord(version, goos, goarch string, digit byte) jobstore.ReleaseRecord {
	return jobstore.ReleaseRecord{
		Release: protocol.Release{Version: version, OS: goos, Arch: goarch, Size: 1 << 20,
			SHA256: strings.Repeat(string(digit), 64), Signature: "c2ln"},
		AddedBy: "ops",
	}
}

// testReleases: a release is recorded once per version, OS and
// architecture with the database's time; adding the same digest again
// returns the record, another digest is ErrReleaseConflict and changes
// nothing; the list is newest first; an invalid release is refused.
func testReleases(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	rs := releaseStore(t, s)
	if list, err := rs.ListReleases(ctx); err != nil || len(list) != 0 {
		t.Fatalf("list of an empty store: %v, %v", list, err)
	}
	a := releaseRecord("v1.4.0", "linux", "amd64", 'a')
	rec, created, err := rs.AddRelease(ctx, a)
	if err != nil || !created || rec.Release != a.Release || rec.AddedBy != "ops" || rec.AddedAt.IsZero() {
		t.Fatalf("add: %+v created %t, %v", rec, created, err)
	}
	again, created, err := rs.AddRelease(ctx, a)
	if err != nil || created || again != rec {
		t.Fatalf("add of the same digest again: %+v created %t, %v; want %+v", again, created, err, rec)
	}
	other := releaseRecord("v1.4.0", "linux", "amd64", 'b')
	if _, _, err := rs.AddRelease(ctx, other); !errors.Is(err, jobstore.ErrReleaseConflict) {
		t.Fatalf("add of another digest for the same version/os/arch: %v, want ErrReleaseConflict", err)
	}
	win := releaseRecord("v1.4.0", "windows", "amd64", 'c')
	if _, created, err := rs.AddRelease(ctx, win); err != nil || !created {
		t.Fatalf("add windows: created %t, %v", created, err)
	}
	got, err := rs.GetRelease(ctx, "v1.4.0", "linux", "amd64")
	if err != nil || got != rec {
		t.Fatalf("get: %+v, %v; want %+v", got, err, rec)
	}
	if _, err := rs.GetRelease(ctx, "v1.4.0", "darwin", "arm64"); !errors.Is(err, jobstore.ErrReleaseNotFound) {
		t.Fatalf("get of an unknown release: %v, want ErrReleaseNotFound", err)
	}
	list, err := rs.ListReleases(ctx)
	if err != nil || len(list) != 2 || list[0].OS != "windows" || list[1] != rec {
		t.Fatalf("list: %+v, %v; want windows then linux", list, err)
	}
	bad := releaseRecord("1.4", "linux", "amd64", 'd')
	if _, _, err := rs.AddRelease(ctx, bad); err == nil || !strings.Contains(err.Error(), "version") {
		t.Fatalf("add of a release whose version is none: %v", err)
	}
}

// testAgentUpdates: the last update state an agent reports replaces the
// one before, with the database's time; a state that is none is refused,
// and overlong text is cut to its bound.
func testAgentUpdates(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	rs := releaseStore(t, s)
	if err := rs.SetAgentUpdate(ctx, "pc-1", protocol.UpdateStatus{State: protocol.UpdateDownloading, Target: "v1.4.0", RolloutID: "r1"}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", 2000)
	if err := rs.SetAgentUpdate(ctx, "pc-1", protocol.UpdateStatus{State: protocol.UpdateFailed, Target: "v1.4.0", Outcome: long, AtUnixMilli: 42, RolloutID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if err := rs.SetAgentUpdate(ctx, "pc-2", protocol.UpdateStatus{State: protocol.UpdateOptedOut}); err != nil {
		t.Fatal(err)
	}
	if err := rs.SetAgentUpdate(ctx, "pc-3", protocol.UpdateStatus{State: "exploded"}); err == nil {
		t.Fatal("an update state that is none was recorded")
	}
	ups, err := rs.AgentUpdates(ctx)
	if err != nil || len(ups) != 2 {
		t.Fatalf("agent updates: %+v, %v; want pc-1 and pc-2", ups, err)
	}
	u := ups[0]
	if u.AgentID != "pc-1" || u.State != protocol.UpdateFailed || u.AtUnixMilli != 42 || u.RolloutID != "r1" || u.ReportedAt.IsZero() ||
		len(u.Outcome) > 512 || !strings.HasPrefix(long, u.Outcome) || len(u.Outcome) < 500 {
		t.Fatalf("pc-1: %+v (outcome %d bytes)", u, len(u.Outcome))
	}
	if ups[1].AgentID != "pc-2" || ups[1].State != protocol.UpdateOptedOut {
		t.Fatalf("pc-2: %+v", ups[1])
	}
}

func newRollout(id string) jobstore.Rollout {
	return jobstore.Rollout{ID: id, Version: "v1.4.0", Agents: "pc-*", Steps: []int{50, 100}, MaxFailures: 1,
		TimeoutMS: time.Minute.Milliseconds(), CreatedBy: "ops"}
}

// testRollouts: a rollout starts running at its first step; only one is
// active at a time; agents are claimed once each, up to the limit and only
// in the step under way; an updating agent ends once; pause, resume (which
// counts the failures so far as the base) and abort move the state only
// from the states they apply to; advancing past the last step completes
// it, and another rollout may then start.
func testRollouts(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	rs := releaseStore(t, s)
	r, err := rs.CreateRollout(ctx, newRollout("r1"))
	if err != nil || r.State != jobstore.RolloutRunning || r.Step != 0 || r.CreatedAt.IsZero() || len(r.Steps) != 2 || r.Steps[1] != 100 || r.Agents != "pc-*" {
		t.Fatalf("create: %+v, %v", r, err)
	}
	if _, err := rs.CreateRollout(ctx, newRollout("r2")); !errors.Is(err, jobstore.ErrRolloutActive) {
		t.Fatalf("a second active rollout: %v, want ErrRolloutActive", err)
	}
	bad := newRollout("r3")
	bad.Steps = []int{50, 25}
	if _, err := rs.CreateRollout(ctx, bad); err == nil || !strings.Contains(err.Error(), "steps") {
		t.Fatalf("steps that do not ascend: %v", err)
	}
	if _, err := rs.GetRollout(ctx, "nope"); !errors.Is(err, jobstore.ErrRolloutNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	claim := func(agent string, step, limit int) bool {
		t.Helper()
		ok, err := rs.StartRolloutAgent(ctx, jobstore.RolloutAgent{RolloutID: "r1", AgentID: agent, Step: step}, limit)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !claim("pc-1", 0, 1) || claim("pc-1", 0, 5) || claim("pc-2", 0, 1) || claim("pc-2", 1, 5) {
		t.Fatal("claims: want pc-1 once, nothing past the limit or in another step")
	}
	if ok, err := rs.EndRolloutAgent(ctx, jobstore.RolloutAgent{RolloutID: "r1", AgentID: "pc-1", State: jobstore.RolloutAgentFailed, Outcome: "rolled back"}); err != nil || !ok {
		t.Fatalf("end pc-1: %t, %v", ok, err)
	}
	if ok, _ := rs.EndRolloutAgent(ctx, jobstore.RolloutAgent{RolloutID: "r1", AgentID: "pc-1", State: jobstore.RolloutAgentDone}); ok {
		t.Fatal("an agent that ended ended again")
	}
	agents, err := rs.RolloutAgents(ctx, "r1")
	if err != nil || len(agents) != 1 || agents[0].State != jobstore.RolloutAgentFailed || agents[0].Outcome != "rolled back" || agents[0].SentAt.IsZero() || agents[0].EndedAt.IsZero() {
		t.Fatalf("agents: %+v, %v", agents, err)
	}
	change := func(from []string, to, reason string, reset bool) (jobstore.Rollout, error) {
		return rs.ChangeRollout(ctx, jobstore.RolloutChange{ID: "r1", From: from, To: to, Reason: reason, ResetFailures: reset})
	}
	if r, err = change([]string{jobstore.RolloutRunning}, jobstore.RolloutPaused, "1 agent failed", false); err != nil || r.State != jobstore.RolloutPaused || r.Reason != "1 agent failed" {
		t.Fatalf("pause: %+v, %v", r, err)
	}
	if claim("pc-2", 0, 5) {
		t.Fatal("a paused rollout claimed an agent")
	}
	if _, err := change([]string{jobstore.RolloutRunning}, jobstore.RolloutPaused, "", false); !errors.Is(err, jobstore.ErrRolloutState) {
		t.Fatalf("pause of a paused rollout: %v, want ErrRolloutState", err)
	}
	if r, err = change([]string{jobstore.RolloutPaused}, jobstore.RolloutRunning, "", true); err != nil || r.State != jobstore.RolloutRunning || r.FailureBase != 1 {
		t.Fatalf("resume: %+v, %v; want running with failure base 1", r, err)
	}
	if _, err := rs.AdvanceRollout(ctx, "r1", 1); !errors.Is(err, jobstore.ErrRolloutState) {
		t.Fatalf("advance from a step not under way: %v", err)
	}
	if r, err = rs.AdvanceRollout(ctx, "r1", 0); err != nil || r.Step != 1 || r.State != jobstore.RolloutRunning {
		t.Fatalf("advance: %+v, %v", r, err)
	}
	if !claim("pc-2", 1, 5) {
		t.Fatal("pc-2 not claimed in step 2")
	}
	if r, err = rs.AdvanceRollout(ctx, "r1", 1); err != nil || r.State != jobstore.RolloutCompleted {
		t.Fatalf("advance past the last step: %+v, %v", r, err)
	}
	if _, err := change([]string{jobstore.RolloutRunning, jobstore.RolloutPaused}, jobstore.RolloutAborted, "", false); !errors.Is(err, jobstore.ErrRolloutState) {
		t.Fatalf("abort of a completed rollout: %v", err)
	}
	r2, err := rs.CreateRollout(ctx, newRollout("r2"))
	if err != nil {
		t.Fatalf("a rollout after the completed one: %v", err)
	}
	if _, err := rs.CreateRollout(ctx, newRollout("r1")); err == nil {
		t.Fatal("a rollout id reused")
	}
	if r2, err = rs.ChangeRollout(ctx, jobstore.RolloutChange{ID: "r2", From: []string{jobstore.RolloutRunning, jobstore.RolloutPaused}, To: jobstore.RolloutAborted, Reason: "by ops"}); err != nil || r2.State != jobstore.RolloutAborted {
		t.Fatalf("abort: %+v, %v", r2, err)
	}
	list, err := rs.ListRollouts(ctx, false)
	if err != nil || len(list) != 2 || list[0].ID != "r2" || list[1].ID != "r1" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if active, err := rs.ListRollouts(ctx, true); err != nil || len(active) != 0 {
		t.Fatalf("active: %+v, %v", active, err)
	}
}

// testRolloutClaimRace: coordinators claiming agents for the same step at
// once never claim more than the limit.
func testRolloutClaimRace(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	rs := releaseStore(t, s)
	if _, err := rs.CreateRollout(ctx, newRollout("race")); err != nil {
		t.Fatal(err)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed int
	)
	for i := range 12 {
		wg.Go(func() {
			ok, err := rs.StartRolloutAgent(ctx, jobstore.RolloutAgent{RolloutID: "race", AgentID: "pc-" + string(rune('a'+i)), Step: 0}, 3)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				claimed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	agents, err := rs.RolloutAgents(ctx, "race")
	if err != nil || claimed != 3 || len(agents) != 3 {
		t.Fatalf("claimed %d, recorded %d (%v); want 3", claimed, len(agents), err)
	}
}
