package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// The queue order, not_before and project limits part of the suite
// (docs/operations.md, "Priorities, projects and not_before").
var schedTests = []struct {
	name string
	fn   func(t *testing.T, s sqlstore.Lab)
}{
	{"ClaimForPriority", testClaimForPriority},
	{"ClaimForNotBefore", testClaimForNotBefore},
	{"ClaimForProjectLimit", testClaimForProjectLimit},
	{"ClaimForProjectLimitSkipsWholeProject", testClaimForProjectLimitSkips},
	{"ClaimForProjectLimitRace", testClaimForProjectLimitRace},
	{"TakeOverExpiredProjectLimit", testTakeOverProjectLimit},
	{"ClaimForDeviceProjects", testClaimForDeviceProjects},
	{"ListJobsByProject", testListJobsByProject},
	{"ProjectJobCounts", testProjectJobCounts},
}

// anyTask is a job any phone can run.
func anyTask() protocol.Task {
	return protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}}
}

// submitSpec submits spec (with anyTask when it has no steps) and keeps
// created_at of consecutive submissions apart on millisecond clocks.
func submitSpec(t *testing.T, s sqlstore.Lab, spec jobstore.JobSpec) {
	t.Helper()
	if len(spec.Task.Steps) == 0 {
		spec.Task = anyTask()
	}
	if _, err := s.Submit(t.Context(), spec); err != nil {
		t.Fatalf("submit %s: %v", spec.ID, err)
	}
	time.Sleep(2 * time.Millisecond)
}

// phones returns n ready phones named prefix-00, prefix-01, ...
func phones(prefix string, n int) []protocol.Device {
	out := make([]protocol.Device, n)
	for i := range out {
		out[i] = phone(fmt.Sprintf("%s-%02d", prefix, i), "m")
	}
	return out
}

// limitedClaim asks for a job for owner on devs under the given limits.
func limitedClaim(t *testing.T, s sqlstore.Lab, owner string, limits map[string]int, def int, devs []protocol.Device) (jobstore.Lease, error) {
	t.Helper()
	return s.ClaimFor(t.Context(), jobstore.ClaimRequest{Owner: owner, Devices: devs, Slots: len(devs), TTL: long,
		ProjectLimits: limits, DefaultProjectLimit: def})
}

// claimAll claims until ErrNoJob and returns the jobs granted, in order.
func claimAll(t *testing.T, s sqlstore.Lab, owner string, limits map[string]int, def int, devs []protocol.Device) []string {
	t.Helper()
	var ids []string
	for {
		l, err := limitedClaim(t, s, owner, limits, def, devs)
		if errors.Is(err, jobstore.ErrNoJob) {
			return ids
		}
		if err != nil {
			t.Fatalf("claim for %s: %v", owner, err)
		}
		ids = append(ids, l.Token.JobID)
	}
}

// testClaimForPriority: highest priority first, oldest first within one
// priority, across projects and with or without limits.
func testClaimForPriority(t *testing.T, s sqlstore.Lab) {
	for _, j := range []struct {
		id, project string
		prio        int
	}{
		{"p0-old", "", 0}, {"p5-old", "x", 5}, {"neg", "", -3}, {"p0-new", "y", 0}, {"p5-new", "", 5}, {"p9", "y", 9},
	} {
		submitSpec(t, s, jobstore.JobSpec{ID: j.id, Project: j.project, Priority: j.prio})
	}
	want := []string{"p9", "p5-old", "p5-new", "p0-old", "p0-new", "neg"}
	if got := claimAll(t, s, ownerA, nil, 0, phones("A", 3)); !reflect.DeepEqual(got, want[:3]) {
		t.Fatalf("without limits: granted %v, want %v", got, want[:3])
	}
	// The same order under limits that hold nobody back.
	if got := claimAll(t, s, ownerB, map[string]int{"x": 10}, 10, phones("B", 10)); !reflect.DeepEqual(got, want[3:]) {
		t.Fatalf("with limits: granted %v, want %v", got, want[3:])
	}
	if j := get(t, s, "p9"); j.Priority != 9 || j.Project != "y" {
		t.Fatalf("job p9: %+v", j)
	}
}

// testClaimForNotBefore: a job whose not_before is in the future (database
// clock) is not granted, even ahead of a lower priority; it is once the
// time has passed. Checked without limits, then with.
func testClaimForNotBefore(t *testing.T, s sqlstore.Lab) {
	for _, lim := range []map[string]int{nil, {"nb-1": 100}} {
		p := fmt.Sprintf("nb-%d", len(lim))
		now := time.Now()
		submitSpec(t, s, jobstore.JobSpec{ID: p + "-tomorrow", Project: p, Priority: 10, NotBefore: now.Add(24 * time.Hour)})
		submitSpec(t, s, jobstore.JobSpec{ID: p + "-soon", Project: p, Priority: 5, NotBefore: now.Add(400 * time.Millisecond)})
		submitSpec(t, s, jobstore.JobSpec{ID: p + "-past", Project: p, Priority: 1, NotBefore: now.Add(-time.Hour)})
		submitSpec(t, s, jobstore.JobSpec{ID: p + "-now", Project: p})
		owner := fmt.Sprintf("agent-%s/boot-1", p)
		// Before soon is due (on a slow machine it may be already: then
		// it comes first, by its priority).
		got := claimAll(t, s, owner, lim, 0, phones("A", 10))
		want := []string{p + "-past", p + "-now"}
		if i := slices.Index(got, p+"-soon"); i >= 0 {
			// soon became due during the grants: from then on it comes
			// first, by its priority.
			want = slices.Insert(slices.Clone(want), i, p+"-soon")
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("limits %v: granted %v, want %v", lim, got, want)
		}
		if len(got) == 2 {
			testenv.Eventually(t, 30*time.Second, "job soon granted once its not_before passed", func() bool {
				got = claimAll(t, s, owner, lim, 0, phones("A", 10))
				return len(got) > 0
			})
			if !reflect.DeepEqual(got, []string{p + "-soon"}) {
				t.Fatalf("limits %v: granted %v once soon was due, want only it", lim, got)
			}
		}
		j := get(t, s, p+"-tomorrow")
		if j.Status != jobstore.StatusQueued || j.Generation != 0 || j.NotBefore.Sub(now) < 23*time.Hour {
			t.Fatalf("job tomorrow: %+v", j)
		}
	}
}

// testClaimForProjectLimit: a project with as many in-progress jobs as its
// limit gets no more, whichever agent asks, and the next project's jobs go
// instead; a finished job makes room; the default limit covers projects
// without their own, and a project named with 0 has none.
func testClaimForProjectLimit(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	for i := range 5 {
		submitSpec(t, s, jobstore.JobSpec{ID: fmt.Sprintf("a%d", i), Project: "survey-a"})
	}
	for i := range 3 {
		submitSpec(t, s, jobstore.JobSpec{ID: fmt.Sprintf("b%d", i), Project: "survey-b"})
	}
	for i := range 3 {
		submitSpec(t, s, jobstore.JobSpec{ID: fmt.Sprintf("c%d", i), Project: "open-c"})
	}
	limits := map[string]int{"survey-a": 2, "open-c": 0}
	const def = 1
	// Agent A takes a0 and a1 (survey-a at its limit), then b0 (survey-b
	// at the default limit), then every job of open-c.
	if got, want := claimAll(t, s, ownerA, limits, def, phones("A", 4)), []string{"a0", "a1", "b0", "c0"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("agent A: %v, want %v", got, want)
	}
	if got, want := claimAll(t, s, ownerB, limits, def, phones("B", 10)), []string{"c1", "c2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("agent B: %v, want %v", got, want)
	}
	// A finished job of survey-a frees a place for the next one, wherever.
	if err := s.Commit(ctx, tok("a1", ownerA, 1), result("ok")); err != nil {
		t.Fatal(err)
	}
	if got, want := claimAll(t, s, ownerC, limits, def, phones("C", 10)), []string{"a2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("agent C after a commit: %v, want %v", got, want)
	}
	// Without limits everything left goes.
	if got, want := claimAll(t, s, ownerB, nil, 0, phones("B", 10)), []string{"a3", "a4", "b1", "b2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("agent B without limits: %v, want %v", got, want)
	}
	for _, req := range []jobstore.ClaimRequest{
		{Owner: ownerA, Slots: 1, TTL: long, DefaultProjectLimit: -1},
		{Owner: ownerA, Slots: 1, TTL: long, ProjectLimits: map[string]int{"x": -1}},
		{Owner: ownerA, Slots: 1, TTL: long, ProjectLimits: map[string]int{"bad name": 1}},
	} {
		if _, err := s.ClaimFor(ctx, req); err == nil || errors.Is(err, jobstore.ErrNoJob) {
			t.Errorf("claim with limits %v / %d: %v, want an error", req.ProjectLimits, req.DefaultProjectLimit, err)
		}
	}
}

// testClaimForProjectLimitSkips: a project at its limit with many queued
// jobs ahead of another's, of higher priority, does not keep the other's
// from being granted, nor from being granted in order.
func testClaimForProjectLimitSkips(t *testing.T, s sqlstore.Lab) {
	const queued = 300
	for i := range queued {
		if _, err := s.Submit(t.Context(), jobstore.JobSpec{ID: fmt.Sprintf("big-%03d", i), Project: "big", Priority: 1, Task: anyTask()}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Millisecond)
	for i := range 3 {
		submitSpec(t, s, jobstore.JobSpec{ID: fmt.Sprintf("small-%d", i), Project: "small"})
	}
	limits := map[string]int{"big": 2}
	got := claimAll(t, s, ownerA, limits, 0, phones("A", 10))
	if want := []string{"big-000", "big-001", "small-0", "small-1", "small-2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("granted %v, want %v", got, want)
	}
}

// testClaimForProjectLimitRace: grants for many agents at once, from as
// many goroutines (coordinators), never put more jobs of a project in
// progress than its limit. Each agent's jobs of the limited project name
// its own phone, so the grants reach for different jobs and only the
// serialisation of grants under limits keeps the count.
func testClaimForProjectLimitRace(t *testing.T, s sqlstore.Lab) {
	const limit, agents, rounds = 3, 8, 3
	serial := func(a int) string { return fmt.Sprintf("S-%d", a) }
	for r := range rounds {
		for a := range agents {
			if _, err := s.Submit(t.Context(), jobstore.JobSpec{ID: fmt.Sprintf("lim-%d-%d", r, a), Project: "lim",
				Task: protocol.Task{Device: protocol.DeviceSelector{Serial: serial(a)}, Steps: anyTask().Steps}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range rounds * agents {
		if _, err := s.Submit(t.Context(), jobstore.JobSpec{ID: fmt.Sprintf("free-%02d", i), Project: "free", Task: anyTask()}); err != nil {
			t.Fatal(err)
		}
	}
	limits := map[string]int{"lim": limit}
	for round := range rounds {
		var (
			mu     sync.Mutex
			leases []jobstore.Lease
			wg     sync.WaitGroup
		)
		start := make(chan struct{})
		for a := range agents {
			owner := fmt.Sprintf("agent-%d/boot-%d", a, round)
			wg.Go(func() {
				<-start
				l, err := s.ClaimFor(t.Context(), jobstore.ClaimRequest{Owner: owner, Devices: []protocol.Device{phone(serial(a), "m")},
					Slots: 1, TTL: long, ProjectLimits: limits})
				if errors.Is(err, jobstore.ErrNoJob) {
					return
				}
				if err != nil {
					t.Errorf("claim for %s: %v", owner, err)
					return
				}
				mu.Lock()
				leases = append(leases, l)
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		running, err := s.ListJobs(t.Context(), jobstore.JobFilter{Project: "lim", Statuses: []string{jobstore.StatusInProgress}})
		if err != nil {
			t.Fatal(err)
		}
		if len(running) != limit {
			t.Fatalf("round %d: %d jobs of project lim in progress, want its limit %d", round, len(running), limit)
		}
		if len(leases) != agents {
			t.Fatalf("round %d: %d of %d agents got a job", round, len(leases), agents)
		}
		// End this round's grants: the next starts from none in progress.
		for _, l := range leases {
			if err := s.Commit(t.Context(), l.Token, result("ok")); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// testTakeOverProjectLimit: an expired lease is taken over while its
// project is within its limit (the job itself counts), and left to the
// reaper's requeue when the project is above it.
func testTakeOverProjectLimit(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	for _, id := range []string{"t1", "t2"} {
		submitSpec(t, s, jobstore.JobSpec{ID: id, Project: "tp"})
	}
	req := func(owner string, ttl time.Duration, limit int) jobstore.ClaimRequest {
		return jobstore.ClaimRequest{Owner: owner, Devices: phones(owner[:7], 2), Slots: 2, TTL: ttl,
			ProjectLimits: map[string]int{"tp": limit}}
	}
	for range 2 {
		if _, err := s.ClaimFor(ctx, req(ownerA, short, 2)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(expiredWait)
	// Two in progress (both expired), limit 1: above it, nothing is taken
	// over.
	_, _, err := s.TakeOverExpired(ctx, req(ownerB, long, 1))
	wantErr(t, "take over above the project limit", err, jobstore.ErrNoJob)
	// Limit 2: at it, the takeover keeps the count and goes ahead.
	l, old, err := s.TakeOverExpired(ctx, req(ownerB, long, 2))
	if err != nil || old.Owner != ownerA || l.Token.Owner != ownerB {
		t.Fatalf("take over at the project limit: %v from %v, %v", l.Token, old, err)
	}
}

// testListJobsByProject: ListJobs filters by project.
func testListJobsByProject(t *testing.T, s sqlstore.Lab) {
	submitSpec(t, s, jobstore.JobSpec{ID: "l1", Project: "p1"})
	submitSpec(t, s, jobstore.JobSpec{ID: "l2"})
	submitSpec(t, s, jobstore.JobSpec{ID: "l3", Project: "p1"})
	if _, err := limitedClaim(t, s, ownerA, nil, 0, phones("A", 1)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		f    jobstore.JobFilter
		want []string
	}{
		{jobstore.JobFilter{Project: "p1"}, []string{"l1", "l3"}},
		{jobstore.JobFilter{Project: jobstore.DefaultProject}, []string{"l2"}},
		{jobstore.JobFilter{Project: "p1", Statuses: []string{jobstore.StatusQueued}}, []string{"l3"}},
		{jobstore.JobFilter{Project: "none"}, nil},
	} {
		js, err := s.ListJobs(t.Context(), tc.f)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range js {
			got = append(got, j.ID)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.f, got, tc.want)
		}
	}
}

// testProjectJobCounts: the queued and in-progress jobs of every project
// that has any, by project and then state; finished jobs are not counted.
func testProjectJobCounts(t *testing.T, s sqlstore.Lab) {
	pc, ok := s.(jobstore.ProjectCounter)
	if !ok {
		t.Skip("the store is not a jobstore.ProjectCounter")
	}
	counts := func() []jobstore.ProjectJobCount {
		t.Helper()
		c, err := pc.ProjectJobCounts(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := counts(); len(c) != 0 {
		t.Fatalf("empty store: %v", c)
	}
	for i := range 4 {
		submitSpec(t, s, jobstore.JobSpec{ID: fmt.Sprintf("pa-%d", i), Project: "pa"})
	}
	submitSpec(t, s, jobstore.JobSpec{ID: "pb-0", Project: "pb"})
	submitSpec(t, s, jobstore.JobSpec{ID: "pc-0", Project: "pc"})
	got := claimAll(t, s, ownerA, map[string]int{"pa": 2}, 0, phones("A", 4))
	if want := []string{"pa-0", "pa-1", "pb-0", "pc-0"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("granted %v, want %v", got, want)
	}
	if err := s.Commit(t.Context(), tok("pc-0", ownerA, 1), result("ok")); err != nil {
		t.Fatal(err)
	}
	want := []jobstore.ProjectJobCount{
		{Project: "pa", Status: jobstore.StatusQueued, N: 2},
		{Project: "pa", Status: jobstore.StatusInProgress, N: 2},
		{Project: "pb", Status: jobstore.StatusInProgress, N: 1},
	}
	if c := counts(); !reflect.DeepEqual(c, want) {
		t.Fatalf("counts %+v, want %+v", c, want)
	}
}

// testClaimForDeviceProjects: a phone restricted to some projects
// (ClaimRequest.DeviceProjects, the coordinator's phone rule) takes only
// their jobs, older jobs of other projects waiting for another phone; a
// phone open to all projects but some never takes theirs; a phone without
// an entry takes any job.
func testClaimForDeviceProjects(t *testing.T, s sqlstore.Lab) {
	submitSpec(t, s, jobstore.JobSpec{ID: "other-1", Project: "other"})
	submitSpec(t, s, jobstore.JobSpec{ID: "lab-1", Project: "lab"})
	submitSpec(t, s, jobstore.JobSpec{ID: "lab-2", Project: "lab"})
	claim := func(owner, serial string, dp *jobstore.DeviceProjects) (jobstore.Lease, error) {
		req := jobstore.ClaimRequest{Owner: owner, Devices: []protocol.Device{phone(serial, "m")}, Slots: 5, TTL: long}
		if dp != nil {
			req.DeviceProjects = map[string]jobstore.DeviceProjects{serial: *dp}
		}
		return s.ClaimFor(t.Context(), req)
	}
	l, err := claim(ownerA, "LAB", &jobstore.DeviceProjects{Projects: []string{"lab"}, Only: true})
	if err != nil || l.Token.JobID != "lab-1" || l.Device != "LAB" {
		t.Fatalf("claim on a phone of lab only: %v on %q, %v; want lab-1, the older other-1 left", l.Token, l.Device, err)
	}
	if l, err := claim(ownerB, "NOTLAB", &jobstore.DeviceProjects{Projects: []string{"lab", "x"}}); err != nil || l.Token.JobID != "other-1" {
		t.Fatalf("claim on a phone closed to lab: %v, %v; want other-1", l.Token, err)
	}
	_, err = claim(ownerC, "NOTLAB2", &jobstore.DeviceProjects{Projects: []string{"lab"}})
	wantErr(t, "claim on a phone closed to lab with only lab queued", err, jobstore.ErrNoJob)
	_, err = claim(ownerC, "NOONE", &jobstore.DeviceProjects{Only: true})
	wantErr(t, "claim on a phone open to no project", err, jobstore.ErrNoJob)
	if l, err := claim(ownerC, "ANY", nil); err != nil || l.Token.JobID != "lab-2" {
		t.Fatalf("claim on an unrestricted phone: %v, %v; want lab-2", l.Token, err)
	}
}
