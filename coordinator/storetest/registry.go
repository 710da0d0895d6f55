package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// The scheduler and registry part of the suite.
var registryTests = []struct {
	name string
	fn   func(t *testing.T, s sqlstore.Lab)
}{
	{"ClaimForSelectors", testClaimForSelectors},
	{"ClaimForFactSelectors", testClaimForFactSelectors},
	{"ClaimForAppSelectors", testClaimForAppSelectors},
	{"ClaimForPlatformSelectors", testClaimForPlatformSelectors},
	{"ClaimSessionWithoutIME", testClaimSessionWithoutIME},
	{"ClaimForCapacity", testClaimForCapacity},
	{"ClaimForSession", testClaimForSession},
	{"ClaimForRace", testClaimForRace},
	{"TakeOverExpired", testTakeOverExpired},
	{"ClaimForEffectCapability", testClaimForEffectCapability},
	{"AgentHello", testAgentHello},
	{"AgentHelloReleasesOtherBoots", testAgentHelloReleases},
	{"AgentHeartbeat", testAgentHeartbeat},
	{"AgentDrainAndSettings", testAgentDrainAndSettings},
	{"AuthorizeUpload", testAuthorizeUpload},
	{"RecordRefused", testRecordRefused},
	{"RecordRefusedBounded", testRecordRefusedBounded},
	{"Cancel", testCancel},
	{"ListAndCount", testListAndCount},
}

func phone(serial, model string, tags ...string) protocol.Device {
	return protocol.Device{Serial: serial, State: protocol.DeviceReady, Model: model, Tags: tags}
}

func submitSel(t *testing.T, s sqlstore.Lab, id string, sel protocol.DeviceSelector) {
	t.Helper()
	task := testTask()
	task.Device = sel
	if _, err := s.Submit(t.Context(), jobstore.JobSpec{ID: id, Task: task}); err != nil {
		t.Fatalf("submit %s: %v", id, err)
	}
	// Submission order is the claim order; keep created_at apart on
	// millisecond clocks.
	time.Sleep(2 * time.Millisecond)
}

func claimFor(t *testing.T, s sqlstore.Lab, owner string, slots int, devs ...protocol.Device) (jobstore.Lease, error) {
	t.Helper()
	return s.ClaimFor(t.Context(), jobstore.ClaimRequest{Owner: owner, Devices: devs, Slots: slots, TTL: long})
}

func hello(t *testing.T, s sqlstore.Lab, owner string, devs ...protocol.Device) (jobstore.Agent, []fencing.Token) {
	t.Helper()
	agentID, bootID, err := fencing.SplitOwner(owner)
	if err != nil {
		t.Fatal(err)
	}
	a, toks, err := s.AgentHello(t.Context(), jobstore.AgentHello{
		AgentID: agentID, BootID: bootID, Version: "1.2.3", Devices: devs, Slots: 2,
		Capabilities: []string{"screenshot"}, CoordinatorID: "c1",
	})
	if err != nil {
		t.Fatalf("hello %s: %v", owner, err)
	}
	return a, toks
}

func testClaimForSelectors(t *testing.T, s sqlstore.Lab) {
	submitSel(t, s, "any", protocol.DeviceSelector{})
	submitSel(t, s, "by-serial", protocol.DeviceSelector{Serial: "S2"})
	submitSel(t, s, "never", protocol.DeviceSelector{Serial: "absent"})
	submitSel(t, s, "by-model", protocol.DeviceSelector{Model: "Pixel 7"})
	submitSel(t, s, "by-tags", protocol.DeviceSelector{Tags: []string{"eu", "rooted"}})
	submitSel(t, s, "offline-only", protocol.DeviceSelector{Serial: "S9"})

	devs := []protocol.Device{
		phone("S3", "Pixel 7", "eu", "rooted", "us"),
		phone("S1", "SM-G991B", "eu"),
		phone("S2", "Pixel 7"),
		{Serial: "S9", State: protocol.DeviceOffline, Model: "Pixel 7", Tags: []string{"eu", "rooted"}},
	}
	// Oldest matching first; each on the first free matching phone in
	// serial order; one job per phone.
	want := []struct{ job, dev string }{
		{"any", "S1"},
		{"by-serial", "S2"},
		{"by-model", "S3"},
	}
	for _, w := range want {
		l, err := claimFor(t, s, ownerA, 10, devs...)
		if err != nil {
			t.Fatalf("claim for %s: %v", w.job, err)
		}
		if l.Token != tok(w.job, ownerA, 1) || l.Device != w.dev {
			t.Fatalf("claim got %v on %q, want %s on %s", l.Token, l.Device, w.job, w.dev)
		}
		if !reflect.DeepEqual(l.Task.Steps, testTask().Steps) {
			t.Fatalf("lease task %+v", l.Task)
		}
		j := get(t, s, w.job)
		if j.Status != jobstore.StatusInProgress || j.WorkerID != ownerA || j.Device != w.dev || !j.LeaseExpiresAt.Equal(l.ExpiresAt) {
			t.Fatalf("claimed job %+v", j)
		}
	}
	// Every phone is busy now: by-tags waits for S3.
	_, err := claimFor(t, s, ownerA, 10, devs...)
	wantErr(t, "claim with every phone busy", err, jobstore.ErrNoJob)
	// Another agent with a matching phone gets it; the job for an absent
	// phone and the one for an offline phone stay queued.
	l, err := claimFor(t, s, ownerB, 10, phone("T1", "x", "rooted", "eu"), phone("T2", "Pixel 7"))
	if err != nil || l.Token.JobID != "by-tags" || l.Device != "T1" {
		t.Fatalf("claim for B: %v on %q, %v", l.Token, l.Device, err)
	}
	_, err = claimFor(t, s, ownerB, 10, phone("T2", "x"))
	wantErr(t, "claim with no matching phone", err, jobstore.ErrNoJob)
	for _, id := range []string{"never", "offline-only"} {
		if j := get(t, s, id); j.Status != jobstore.StatusQueued || j.Generation != 0 {
			t.Fatalf("job %s: %+v", id, j)
		}
	}
	// A phone frees up when its job ends.
	if err := s.Commit(t.Context(), tok("by-serial", ownerA, 1), result("done")); err != nil {
		t.Fatal(err)
	}
	submitSel(t, s, "later", protocol.DeviceSelector{Serial: "S2"})
	l, err = claimFor(t, s, ownerA, 10, devs...)
	if err != nil || l.Token.JobID != "later" || l.Device != "S2" {
		t.Fatalf("claim after a phone freed: %v on %q, %v", l.Token, l.Device, err)
	}
	_, err = claimFor(t, s, ownerC, 10)
	wantErr(t, "claim without phones", err, jobstore.ErrNoJob)
	if _, err := s.ClaimFor(t.Context(), jobstore.ClaimRequest{Owner: "no-boot", Slots: 1, TTL: long}); err == nil || errors.Is(err, jobstore.ErrNoJob) {
		t.Fatalf("claim with a malformed owner: %v", err)
	}
}

func testClaimForCapacity(t *testing.T, s sqlstore.Lab) {
	for i := range 4 {
		submitSel(t, s, fmt.Sprintf("cap-%d", i), protocol.DeviceSelector{})
	}
	devs := []protocol.Device{phone("P1", "m"), phone("P2", "m"), phone("P3", "m")}
	for i := range 2 {
		if _, err := claimFor(t, s, ownerA, 2, devs...); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	_, err := claimFor(t, s, ownerA, 2, devs...)
	wantErr(t, "claim beyond the slots", err, jobstore.ErrNoJob)
	// Jobs granted without a phone (management reassignment) count too.
	reassign(t, s, "cap-2", ownerB)
	_, err = claimFor(t, s, ownerB, 1, devs...)
	wantErr(t, "claim with the slot taken by a reassigned job", err, jobstore.ErrNoJob)
	if l, err := claimFor(t, s, ownerB, 2, devs...); err != nil || l.Token.JobID != "cap-3" {
		t.Fatalf("claim with a free slot: %v, %v", l.Token, err)
	}
}

func testClaimForSession(t *testing.T, s sqlstore.Lab) {
	submitSel(t, s, "sess", protocol.DeviceSelector{})
	hello(t, s, ownerA2, phone("P1", "m")) // agent-a runs as boot-2 now
	_, err := claimFor(t, s, ownerA, 1, phone("P1", "m"))
	wantErr(t, "claim for an old boot", err, jobstore.ErrNoJob)
	if _, err := s.SetAgentDraining(t.Context(), "agent-a", true); err != nil {
		t.Fatal(err)
	}
	_, err = claimFor(t, s, ownerA2, 1, phone("P1", "m"))
	wantErr(t, "claim for a draining agent", err, jobstore.ErrNoJob)
	if _, err := s.SetAgentDraining(t.Context(), "agent-a", false); err != nil {
		t.Fatal(err)
	}
	// The agent's own report of draining blocks grants as well.
	if _, err := s.AgentHeartbeat(t.Context(), jobstore.AgentBeat{AgentID: "agent-a", BootID: "boot-2", Draining: true}); err != nil {
		t.Fatal(err)
	}
	_, err = claimFor(t, s, ownerA2, 1, phone("P1", "m"))
	wantErr(t, "claim for an agent that reports draining", err, jobstore.ErrNoJob)
	if _, err := s.AgentHeartbeat(t.Context(), jobstore.AgentBeat{AgentID: "agent-a", BootID: "boot-2"}); err != nil {
		t.Fatal(err)
	}
	if l, err := claimFor(t, s, ownerA2, 1, phone("P1", "m")); err != nil || l.Token != tok("sess", ownerA2, 1) {
		t.Fatalf("claim for the current boot: %v, %v", l.Token, err)
	}
}

// testClaimForRace: many claims for one agent at once never exceed its
// slots nor put two jobs on one phone, and grant each job once.
func testClaimForRace(t *testing.T, s sqlstore.Lab) {
	const jobs, phones, claimers, slots = 40, 10, 12, 3
	// Each job names its phone, so concurrent claims reach for different
	// phones; only the per-agent serialisation keeps them within the slots.
	var devs []protocol.Device
	for i := range phones {
		devs = append(devs, phone(fmt.Sprintf("P%02d", i), "m"))
	}
	for i := range jobs {
		if _, err := s.Submit(t.Context(), jobstore.JobSpec{ID: fmt.Sprintf("cr-%02d", i),
			Task: protocol.Task{Device: protocol.DeviceSelector{Serial: devs[i%phones].Serial}, Steps: testTask().Steps}}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu     sync.Mutex
		leases []jobstore.Lease
		wg     sync.WaitGroup
	)
	for _, owner := range []string{ownerA, ownerB} {
		for range claimers {
			wg.Go(func() {
				for {
					l, err := s.ClaimFor(t.Context(), jobstore.ClaimRequest{Owner: owner, Devices: devs, Slots: slots, TTL: long})
					if errors.Is(err, jobstore.ErrNoJob) {
						return
					}
					if err != nil {
						t.Errorf("claim: %v", err)
						return
					}
					mu.Lock()
					leases = append(leases, l)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	perOwner := map[string]int{}
	onPhone := map[string]bool{}
	jobsSeen := map[string]bool{}
	for _, l := range leases {
		perOwner[l.Token.Owner]++
		key := l.Token.Owner + " " + l.Device
		if onPhone[key] {
			t.Errorf("two jobs on phone %s", key)
		}
		onPhone[key] = true
		if jobsSeen[l.Token.JobID] {
			t.Errorf("job %s granted twice", l.Token.JobID)
		}
		jobsSeen[l.Token.JobID] = true
	}
	if perOwner[ownerA] != slots || perOwner[ownerB] != slots {
		t.Fatalf("grants per owner %v, want %d each", perOwner, slots)
	}
}

// testClaimForEffectCapability: a job with effect steps goes only to an
// agent that announced the effect capability, by ClaimFor and by
// TakeOverExpired; other jobs go to any agent.
func testClaimForEffectCapability(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	fx := testTask()
	fx.Steps[1].Effect = &protocol.EffectSpec{Key: "order-1/submit"}
	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "fx", Task: fx}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	submit(t, s, "plain")
	plainCaps := []string{"screenshot", "input"}
	effectCaps := []string{"screenshot", "input", protocol.CapabilityEffect}
	req := func(owner string, ttl time.Duration, caps []string, serial string) jobstore.ClaimRequest {
		return jobstore.ClaimRequest{Owner: owner, Devices: []protocol.Device{phone(serial, "Pixel 7")}, Slots: 2, TTL: ttl, Capabilities: caps}
	}

	// The oldest job has effects: an agent without the capability gets the
	// next one, then nothing.
	l, err := s.ClaimFor(ctx, req(ownerB, long, plainCaps, "B1"))
	if err != nil || l.Token.JobID != "plain" {
		t.Fatalf("claim without the effect capability: got %v, %v; want job plain", l.Token, err)
	}
	_, err = s.ClaimFor(ctx, req(ownerB, long, nil, "B2"))
	wantErr(t, "claim of an effect job without the capability", err, jobstore.ErrNoJob)
	if j := get(t, s, "fx"); j.Status != jobstore.StatusQueued {
		t.Fatalf("effect job granted to an agent without the capability: %+v", j)
	}

	l, err = s.ClaimFor(ctx, req(ownerA, short, effectCaps, "A1"))
	if err != nil || l.Token.JobID != "fx" {
		t.Fatalf("claim with the effect capability: got %v, %v; want job fx", l.Token, err)
	}
	time.Sleep(expiredWait)
	_, _, err = s.TakeOverExpired(ctx, req(ownerB, long, plainCaps, "B2"))
	wantErr(t, "take over of an effect job without the capability", err, jobstore.ErrNoJob)
	lc, old, err := s.TakeOverExpired(ctx, req(ownerC, long, effectCaps, "C1"))
	if err != nil || old != l.Token || lc.Token != tok("fx", ownerC, 2) {
		t.Fatalf("take over with the effect capability: %v from %v, %v", lc.Token, old, err)
	}
}

func testTakeOverExpired(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submitSel(t, s, "exp", protocol.DeviceSelector{Model: "M"})
	submitSel(t, s, "live", protocol.DeviceSelector{})
	claim(t, s, "live", ownerC, long)
	req := jobstore.ClaimRequest{Owner: ownerB, Devices: []protocol.Device{phone("B1", "M")}, Slots: 1, TTL: long}
	_, _, err := s.TakeOverExpired(ctx, req)
	wantErr(t, "take over an unexpired lease", err, jobstore.ErrNoJob)
	la, err := s.ClaimFor(ctx, jobstore.ClaimRequest{Owner: ownerA, Devices: []protocol.Device{phone("A1", "M")}, Slots: 1, TTL: short})
	if err != nil || la.Token.JobID != "exp" {
		t.Fatalf("claim: %v %v", la.Token, err)
	}
	time.Sleep(expiredWait)

	// The expired owner itself, and an agent without a matching phone, do
	// not take it.
	_, _, err = s.TakeOverExpired(ctx, jobstore.ClaimRequest{Owner: ownerA, Devices: []protocol.Device{phone("A2", "M")}, Slots: 5, TTL: long})
	wantErr(t, "take over by the same owner", err, jobstore.ErrNoJob)
	_, _, err = s.TakeOverExpired(ctx, jobstore.ClaimRequest{Owner: ownerB, Devices: []protocol.Device{phone("B1", "other")}, Slots: 1, TTL: long})
	wantErr(t, "take over without a matching phone", err, jobstore.ErrNoJob)

	lb, old, err := s.TakeOverExpired(ctx, req)
	if err != nil {
		t.Fatalf("take over: %v", err)
	}
	if old != la.Token || lb.Token != tok("exp", ownerB, 2) || lb.Device != "B1" {
		t.Fatalf("take over: old %v new %v on %q", old, lb.Token, lb.Device)
	}
	wantUTC(t, "lease expiry", lb.ExpiresAt)
	j := get(t, s, "exp")
	if j.Status != jobstore.StatusInProgress || j.WorkerID != ownerB || j.Generation != 2 || j.Device != "B1" {
		t.Fatalf("taken over job %+v", j)
	}
	_, err = s.Renew(ctx, la.Token, long)
	wantErr(t, "renew of the old token", err, fencing.ErrStale)
	if err := s.Commit(ctx, la.Token, result("late")); !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("late commit: %v", err)
	}
	if err := s.Commit(ctx, lb.Token, result("new")); err != nil {
		t.Fatalf("commit of the new owner: %v", err)
	}
	evs, err := s.WriteEvents(ctx, "exp")
	if err != nil {
		t.Fatal(err)
	}
	var got []event
	for _, e := range evs {
		got = append(got, event{e.Verb, e.Owner, e.Generation, e.Accepted})
		if (e.Verb == jobstore.VerbReclaim || e.Verb == jobstore.VerbReassign) && e.Detail != jobstore.DetailLeaseExpired {
			t.Errorf("%s event detail %q", e.Verb, e.Detail)
		}
	}
	// Takeovers that found nothing are not attempts on this job.
	want := []event{
		{jobstore.VerbClaim, ownerA, 1, true},
		{jobstore.VerbReclaim, ownerA, 1, true},
		{jobstore.VerbReassign, ownerB, 2, true},
		{jobstore.VerbRenew, ownerA, 1, false},
		{jobstore.VerbResult, ownerA, 1, false},
		{jobstore.VerbResult, ownerB, 2, true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	if j := get(t, s, "live"); j.WorkerID != ownerC || j.Generation != 1 {
		t.Fatalf("unexpired job touched: %+v", j)
	}
	// Nothing expired is left; ReclaimExpired agrees.
	if toks, err := s.ReclaimExpired(ctx, 0); err != nil || len(toks) != 0 {
		t.Fatalf("reclaim after takeover: %v, %v", toks, err)
	}
}

func testAgentHello(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	_, err := s.GetAgent(ctx, "agent-a")
	wantErr(t, "get unknown agent", err, jobstore.ErrAgentNotFound)
	devs := []protocol.Device{phone("P1", "Pixel 7", "eu"), {Serial: "P2", State: "unauthorized"}}
	a, toks := hello(t, s, ownerA, devs...)
	if len(toks) != 0 {
		t.Fatalf("first hello released %v", toks)
	}
	if a.ID != "agent-a" || a.BootID != "boot-1" || a.Version != "1.2.3" || a.Slots != 2 || a.CoordinatorID != "c1" ||
		!reflect.DeepEqual(a.Devices, devs) || !reflect.DeepEqual(a.Capabilities, []string{"screenshot"}) ||
		a.Draining || len(a.Settings) != 0 || a.Owner() != ownerA {
		t.Fatalf("agent %+v", a)
	}
	wantUTC(t, "connected_at", a.ConnectedAt)
	wantUTC(t, "last_seen", a.LastSeen)
	if !a.Online(time.Second) || a.SeenAgo < 0 || a.SeenAgo > time.Second {
		t.Fatalf("agent just seen: seen ago %v", a.SeenAgo)
	}
	g, err := s.GetAgent(ctx, "agent-a")
	if err != nil || g.BootID != a.BootID || !g.LastSeen.Equal(a.LastSeen) || !g.ConnectedAt.Equal(a.ConnectedAt) {
		t.Fatalf("get agent %+v, %v", g, err)
	}
	time.Sleep(5 * time.Millisecond)
	again, _ := hello(t, s, ownerA, devs[:1]...)
	if !again.ConnectedAt.Equal(a.ConnectedAt) || !again.LastSeen.After(a.LastSeen) || len(again.Devices) != 1 {
		t.Fatalf("reconnect hello: %+v (first %+v)", again, a)
	}
	restarted, _ := hello(t, s, ownerA2)
	if restarted.BootID != "boot-2" || !restarted.ConnectedAt.After(a.ConnectedAt) || len(restarted.Devices) != 0 || restarted.Devices == nil {
		t.Fatalf("restart hello: %+v", restarted)
	}
	hello(t, s, ownerB)
	list, err := s.Agents(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "agent-a" || list[1].ID != "agent-b" {
		t.Fatalf("agents %+v, %v", list, err)
	}
	if _, _, err := s.AgentHello(ctx, jobstore.AgentHello{AgentID: "a.b", BootID: "x"}); err == nil {
		t.Fatal("hello with an invalid agent id accepted")
	}
	if _, _, err := s.AgentHello(ctx, jobstore.AgentHello{AgentID: "ok"}); err == nil {
		t.Fatal("hello without a boot id accepted")
	}
}

func testAgentHelloReleases(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	// Agent ids chosen so that a careless prefix or LIKE match would catch
	// the wrong agent's jobs.
	own := func(agent, boot string) string { return fencing.Owner(agent, boot) }
	held := map[string]string{
		"r1": own("pc_1", "old"), "r2": own("pc_1", "old"), "r3": own("pc_1", "older"),
		"keep-same-boot": own("pc_1", "new"),
		"keep-other":     own("pcx1", "old"),
		"keep-prefix":    own("pc_1-2", "old"),
	}
	ids := make([]string, 0, len(held))
	for id := range held {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	leases := map[string]jobstore.Lease{}
	for _, id := range ids {
		submit(t, s, id)
		leases[id] = claim(t, s, id, held[id], long)
	}
	submit(t, s, "done")
	ld := claim(t, s, "done", own("pc_1", "old"), long)
	if err := s.Commit(ctx, ld.Token, result("x")); err != nil {
		t.Fatal(err)
	}

	_, toks := hello(t, s, own("pc_1", "new"))
	var got []string
	for _, tk := range toks {
		if tk != leases[tk.JobID].Token {
			t.Errorf("released token %v, want %v", tk, leases[tk.JobID].Token)
		}
		got = append(got, tk.JobID)
	}
	sort.Strings(got)
	if !reflect.DeepEqual(got, []string{"r1", "r2", "r3"}) {
		t.Fatalf("released %v, want r1 r2 r3", got)
	}
	for _, id := range []string{"r1", "r2", "r3"} {
		j := get(t, s, id)
		if j.Status != jobstore.StatusQueued || j.Generation != 2 || j.WorkerID != "" || !j.LeaseExpiresAt.IsZero() {
			t.Fatalf("released job %s: %+v", id, j)
		}
		evs := events(t, s, id)
		if last := evs[len(evs)-1]; last != (event{jobstore.VerbReclaim, held[id], 1, true}) {
			t.Fatalf("job %s last event %v", id, last)
		}
		all, _ := s.WriteEvents(ctx, id)
		if d := all[len(all)-1].Detail; d != jobstore.DetailAgentRestarted {
			t.Fatalf("release detail %q", d)
		}
		err := s.Commit(ctx, leases[id].Token, result("old life"))
		wantErr(t, "commit of a released job", err, fencing.ErrStale)
	}
	for _, id := range []string{"keep-same-boot", "keep-other", "keep-prefix"} {
		if j := get(t, s, id); j.Status != jobstore.StatusInProgress || j.WorkerID != held[id] || j.Generation != 1 {
			t.Fatalf("job %s touched: %+v", id, j)
		}
	}
	if j := get(t, s, "done"); j.Status != jobstore.StatusSucceeded {
		t.Fatalf("finished job touched: %+v", j)
	}
	// The same boot again releases nothing.
	if _, toks := hello(t, s, own("pc_1", "new")); len(toks) != 0 {
		t.Fatalf("reconnect released %v", toks)
	}
}

func testAgentHeartbeat(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	_, err := s.AgentHeartbeat(ctx, jobstore.AgentBeat{AgentID: "agent-a", BootID: "boot-1"})
	wantErr(t, "heartbeat of an unknown agent", err, jobstore.ErrNoSession)
	a, _ := hello(t, s, ownerA, phone("P1", "m"))
	time.Sleep(5 * time.Millisecond)
	hb, err := s.AgentHeartbeat(ctx, jobstore.AgentBeat{AgentID: "agent-a", BootID: "boot-1"})
	if err != nil {
		t.Fatal(err)
	}
	if !hb.LastSeen.After(a.LastSeen) || len(hb.Devices) != 1 || !hb.Online(time.Second) {
		t.Fatalf("heartbeat %+v after hello %+v", hb, a)
	}
	hb, err = s.AgentHeartbeat(ctx, jobstore.AgentBeat{AgentID: "agent-a", BootID: "boot-1", Devices: []protocol.Device{phone("P1", "m"), phone("P2", "m")}, Draining: true})
	if err != nil || len(hb.Devices) != 2 || !hb.AgentDraining || hb.Draining {
		t.Fatalf("heartbeat with devices, draining: %+v, %v", hb, err)
	}
	_, err = s.AgentHeartbeat(ctx, jobstore.AgentBeat{AgentID: "agent-a", BootID: "boot-2"})
	wantErr(t, "heartbeat of another boot", err, jobstore.ErrNoSession)
	if _, err := s.SetAgentSettings(ctx, "fresh", map[string]string{"k": "v"}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.AgentHeartbeat(ctx, jobstore.AgentBeat{AgentID: "fresh"})
	wantErr(t, "heartbeat of an agent without a session", err, jobstore.ErrNoSession)
	time.Sleep(expiredWait)
	g, err := s.GetAgent(ctx, "agent-a")
	if err != nil || g.Online(expiredWait/2) || !g.Online(time.Minute) {
		t.Fatalf("agent silent for %v: seen ago %v, %v", expiredWait, g.SeenAgo, err)
	}
}

func testAgentDrainAndSettings(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	_, err := s.SetAgentDraining(ctx, "agent-a", true)
	wantErr(t, "drain an unknown agent", err, jobstore.ErrAgentNotFound)
	// Settings may come before the first hello; the agent then has no session.
	a, err := s.SetAgentSettings(ctx, "agent-a", map[string]string{"log_level": "debug", "x": "1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.BootID != "" || a.Owner() != "" || a.Online(time.Hour) || !reflect.DeepEqual(a.Settings, map[string]string{"log_level": "debug", "x": "1"}) {
		t.Fatalf("provisioned agent %+v", a)
	}
	a, _ = hello(t, s, ownerA)
	if !reflect.DeepEqual(a.Settings, map[string]string{"log_level": "debug", "x": "1"}) || a.Draining {
		t.Fatalf("hello lost the settings: %+v", a)
	}
	a, err = s.SetAgentSettings(ctx, "agent-a", map[string]string{"log_level": "info", "y": "2"}, []string{"x", "absent"})
	if err != nil || !reflect.DeepEqual(a.Settings, map[string]string{"log_level": "info", "y": "2"}) {
		t.Fatalf("merged settings %+v, %v", a.Settings, err)
	}
	if a, err = s.SetAgentDraining(ctx, "agent-a", true); err != nil || !a.Draining {
		t.Fatalf("drain: %+v, %v", a, err)
	}
	a, _ = hello(t, s, ownerA2)
	if !a.Draining || a.Settings["y"] != "2" {
		t.Fatalf("restart lost drain or settings: %+v", a)
	}
	if a, err = s.SetAgentDraining(ctx, "agent-a", false); err != nil || a.Draining {
		t.Fatalf("resume: %+v, %v", a, err)
	}
	if _, err := s.SetAgentSettings(ctx, "bad id", nil, nil); err == nil {
		t.Fatal("settings for an invalid agent id accepted")
	}
}

func testAuthorizeUpload(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "u")
	la := claim(t, s, "u", ownerA, long)
	if err := s.AuthorizeUpload(ctx, la.Token, "shot.png"); err != nil {
		t.Fatalf("authorize current token: %v", err)
	}
	before := get(t, s, "u")
	lb := reassign(t, s, "u", ownerB)
	err := s.AuthorizeUpload(ctx, la.Token, "late.png")
	wantErr(t, "authorize old token", err, fencing.ErrStale)
	if err := s.AuthorizeUpload(ctx, lb.Token, "shot.png"); err != nil {
		t.Fatalf("authorize new token: %v", err)
	}
	if err := s.AuthorizeUpload(ctx, lb.Token, "../x"); err == nil {
		t.Fatal("authorize an unsafe name")
	}
	err = s.AuthorizeUpload(ctx, tok("nope", ownerA, 1), "x.png")
	wantErr(t, "authorize unknown job", err, jobstore.ErrNotFound)
	if j := get(t, s, "u"); j.Generation != 2 || j.WorkerID != ownerB || before.Generation != 1 {
		t.Fatalf("authorization changed the job: %+v", j)
	}
	evs, _ := s.WriteEvents(ctx, "u")
	var ups []string
	for _, e := range evs {
		if e.Verb == jobstore.VerbUpload {
			ups = append(ups, fmt.Sprintf("%s g%d %v %s", e.Owner, e.Generation, e.Accepted, e.Detail))
		}
	}
	want := []string{ownerA + " g1 true shot.png", ownerA + " g1 false late.png", ownerB + " g2 true shot.png"}
	if !reflect.DeepEqual(ups, want) {
		t.Fatalf("upload events %q, want %q", ups, want)
	}
}

func testRecordRefused(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "f")
	l := claim(t, s, "f", ownerB, long)
	if err := s.RecordRefused(ctx, "agent-a", jobstore.VerbRenew, l.Token, "forbidden: sent by agent agent-a"); err != nil {
		t.Fatal(err)
	}
	rs, err := s.AgentRefusals(ctx)
	if err != nil || len(rs) != 1 {
		t.Fatalf("refusals %+v, %v", rs, err)
	}
	if r := rs[0]; r.AgentID != "agent-a" || r.Verb != jobstore.VerbRenew || r.Count != 1 || r.JobID != "f" || r.Owner != ownerB || r.Generation != 1 ||
		r.Detail != "forbidden: sent by agent agent-a" || r.At.IsZero() || r.Window.After(r.At) || r.At.Sub(r.Window) >= jobstore.DenialWindow {
		t.Fatalf("refusal %+v", r)
	}
	if evs, err := s.WriteEvents(ctx, "f"); err != nil || len(evs) != 1 {
		t.Fatalf("a refusal made a write event: %+v, %v", evs, err)
	}
	if j := get(t, s, "f"); j.WorkerID != ownerB || j.Status != jobstore.StatusInProgress {
		t.Fatalf("recording changed the job %+v", j)
	}
}

// testRecordRefusedBounded: 10,000 refused requests of one agent, each
// naming a job that does not exist, are counted in one row per agent, verb
// and minute.
func testRecordRefusedBounded(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	const n = 1_000 // a hundred times the rows the bound allows
	verbs := []string{jobstore.VerbRenew, jobstore.VerbResult}
	first := time.Now()
	for i := range n {
		tok := fencing.Token{JobID: fmt.Sprintf("no-such-job-%d", i), Generation: int64(i + 1), Owner: ownerB}
		if err := s.RecordRefused(ctx, "agent-a", verbs[i%2], tok, "forbidden: token of another agent"); err != nil {
			t.Fatal(err)
		}
	}
	minutes := int(time.Since(first)/jobstore.DenialWindow) + 2
	rs, err := s.AgentRefusals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, r := range rs {
		total += r.Count
	}
	if max := len(verbs) * minutes; len(rs) > max || total != n {
		t.Fatalf("%d refusals made %d rows counting %d, want at most %d rows counting %d", n, len(rs), total, max, n)
	}
}

func testCancel(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "cq")
	tk, err := s.Cancel(ctx, "cq", "cancelled by operator")
	if err != nil || tk != (fencing.Token{}) {
		t.Fatalf("cancel queued: %v, %v", tk, err)
	}
	if j := get(t, s, "cq"); j.Status != jobstore.StatusCancelled || j.FailReason != "cancelled by operator" {
		t.Fatalf("cancelled queued job %+v", j)
	}
	_, err = s.ClaimNext(ctx, ownerA, long)
	wantErr(t, "claim after cancel", err, jobstore.ErrNoJob)

	submit(t, s, "cp")
	l := claim(t, s, "cp", ownerA, long)
	tk, err = s.Cancel(ctx, "cp", "no longer needed")
	if err != nil || tk != l.Token {
		t.Fatalf("cancel in progress: %v, %v", tk, err)
	}
	j := get(t, s, "cp")
	if j.Status != jobstore.StatusCancelled || j.FailReason != "no longer needed" || !j.LeaseExpiresAt.IsZero() {
		t.Fatalf("cancelled job %+v", j)
	}
	for what, err := range map[string]error{
		"renew":  func() error { _, err := s.Renew(ctx, l.Token, long); return err }(),
		"commit": s.Commit(ctx, l.Token, result("late")),
		"upload": s.AuthorizeUpload(ctx, l.Token, "x.png"),
	} {
		wantErr(t, what+" after cancel", err, fencing.ErrStale)
	}
	_, err = s.Cancel(ctx, "cp", "again")
	wantErr(t, "cancel a finished job", err, jobstore.ErrConflict)
	_, err = s.Cancel(ctx, "nope", "x")
	wantErr(t, "cancel an unknown job", err, jobstore.ErrNotFound)

	var got []string
	evs, _ := s.WriteEvents(ctx, "cp")
	for _, e := range evs {
		if e.Verb == jobstore.VerbCancel {
			got = append(got, fmt.Sprintf("%s g%d %v %s", e.Owner, e.Generation, e.Accepted, e.Detail))
		}
	}
	want := []string{ownerA + " g1 true no longer needed", " g1 false again"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("cancel events %q, want %q", got, want)
	}
}

func testListAndCount(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if c, err := s.JobCounts(ctx); err != nil || len(c) != 0 {
		t.Fatalf("counts of an empty store: %v, %v", c, err)
	}
	for _, id := range []string{"j1", "j2", "j3", "j4"} {
		submitSel(t, s, id, protocol.DeviceSelector{})
	}
	claim(t, s, "j2", ownerA, long)
	claim(t, s, "j3", fencing.Owner("agent-ab", "x"), long)
	l4 := claim(t, s, "j4", ownerB, long)
	if err := s.Commit(ctx, l4.Token, result("x")); err != nil {
		t.Fatal(err)
	}
	c, err := s.JobCounts(ctx)
	want := map[string]int64{jobstore.StatusQueued: 1, jobstore.StatusInProgress: 2, jobstore.StatusSucceeded: 1}
	if err != nil || !reflect.DeepEqual(c, want) {
		t.Fatalf("counts %v, %v; want %v", c, err, want)
	}
	ids := func(f jobstore.JobFilter) []string {
		t.Helper()
		js, err := s.ListJobs(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	for name, tc := range map[string]struct {
		f    jobstore.JobFilter
		want []string
	}{
		"all":         {jobstore.JobFilter{}, []string{"j1", "j2", "j3", "j4"}},
		"limit":       {jobstore.JobFilter{Limit: 2}, []string{"j1", "j2"}},
		"status":      {jobstore.JobFilter{Statuses: []string{jobstore.StatusInProgress}}, []string{"j2", "j3"}},
		"two states":  {jobstore.JobFilter{Statuses: []string{jobstore.StatusQueued, jobstore.StatusSucceeded}}, []string{"j1", "j4"}},
		"agent":       {jobstore.JobFilter{AgentID: "agent-a"}, []string{"j2"}},
		"agent+state": {jobstore.JobFilter{AgentID: "agent-b", Statuses: []string{jobstore.StatusQueued}}, nil},
	} {
		if got := ids(tc.f); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
