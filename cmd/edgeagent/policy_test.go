package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// Deadlines, retry classes and attempt limits on the real edgeagent binary
// (docs/operations.md, "Deadlines, attempts and end states").

// reapInterval is the lab coordinator's reap interval (newLabStore).
const reapInterval = 100 * time.Millisecond

// fakePhone is a fake phone behind the real adb server with the tags the
// agent's config gives it.
type fakePhone struct {
	*fakeadbd.Phone
	tags []string
}

// startPhones starts fake phones and connects them to adb; each phone i
// has tags[i] (YAML flow list) and opts.
func startPhones(t *testing.T, adb *testenv.ADBServer, opts fakeadbd.Options, tags ...string) []fakePhone {
	t.Helper()
	var out []fakePhone
	for _, tg := range tags {
		p, err := fakeadbd.Start(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		if o, err := adb.Run("connect", p.Addr()); err != nil {
			t.Fatalf("adb connect: %v: %s", err, o)
		}
		out = append(out, fakePhone{Phone: p, tags: strings.Split(strings.Trim(tg, "[]"), ", ")})
	}
	return out
}

// devices are the agent's devices for phones behind adb.
func devices(phones []fakePhone) []e2e.Phone {
	var out []e2e.Phone
	for _, p := range phones {
		out = append(out, e2e.Phone{Serial: p.Serial(), Tags: p.tags})
	}
	return out
}

func (l *lab) submitSpec(t *testing.T, spec jobstore.JobSpec) string {
	t.Helper()
	j, err := l.store.Submit(l.ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// ended waits for the job to reach an end state and returns it.
func (l *lab) ended(t *testing.T, jobID string, within time.Duration) jobstore.Job {
	t.Helper()
	var final jobstore.Job
	testenv.Eventually(t, within, "job "+jobID+" to end", func() bool {
		j, err := l.store.Get(l.ctx, jobID)
		final = j
		return err == nil && jobstore.Finished(j.Status)
	})
	return final
}

// allEvents returns every write event of a job, oldest first.
func (l *lab) allEvents(t *testing.T, jobID string) []jobstore.WriteEvent {
	t.Helper()
	evs, err := l.store.WriteEvents(l.ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// objects lists the objects stored under prefix with their metadata.
func (l *lab) objects(t *testing.T, prefix string) []minio.ObjectInfo {
	t.Helper()
	mc := l.mio.Client(t)
	var out []minio.ObjectInfo
	for o := range mc.ListObjects(l.ctx, l.mio.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list %s: %v", prefix, o.Err)
		}
		info, err := mc.StatObject(l.ctx, l.mio.Bucket, o.Key, minio.StatObjectOptions{})
		if err != nil {
			t.Fatalf("stat %s: %v", o.Key, err)
		}
		out = append(out, info)
	}
	return out
}

// TestDeadlineTimesOut: a job with a 5 s deadline and a 60 s wait step on
// the real agent ends TIMED_OUT no later than its deadline plus one reap
// interval plus the stop latency, on the database clock; the phone then
// runs the next job, and nothing of the timed-out job is written
// afterwards: no accepted write event, no object.
func TestDeadlineTimesOut(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	// stopLatency bounds the time from the deadline (or the revoke) to the
	// recorded end: one database round trip of the reaper's or the agent's.
	const stopLatency = time.Second
	const deadline = 5 * time.Second
	l := newLab(t, 2*time.Second)
	p := l.env.StartAgent(e2e.AgentOptions{})
	jobID := l.submitSpec(t, jobstore.JobSpec{Task: protocol.Task{
		TimeoutMS: deadline.Milliseconds(),
		Steps:     []protocol.Step{screenshot, wait(60_000), screenshot},
	}})
	final := l.ended(t, jobID, 60*time.Second)
	if final.Status != jobstore.StatusTimedOut {
		t.Fatalf("job ended %s (%s), want TIMED_OUT", final.Status, final.FailReason)
	}
	evs := l.allEvents(t, jobID)
	var grant, end *jobstore.WriteEvent
	endIdx := -1
	for i, e := range evs {
		if grant == nil && e.Accepted && e.Verb == jobstore.VerbClaim {
			grant = &evs[i]
		}
		if endIdx < 0 && e.Accepted && (e.Verb == jobstore.VerbTimeout || e.Verb == jobstore.VerbFail) {
			end, endIdx = &evs[i], i
		}
	}
	if grant == nil || end == nil {
		t.Fatalf("no accepted grant and end among %+v", evs)
	}
	if end.Cause != protocol.CauseDeadline || end.Class != protocol.FailClassJob {
		t.Errorf("end event %+v: want class job, cause deadline", *end)
	}
	// The first grant set the deadline on the database clock; the grant's
	// write event reads the clock again a moment later in the same
	// statement.
	granted := final.DeadlineAt.Add(-deadline)
	if d := grant.At.Sub(granted); d < 0 || d > stopLatency {
		t.Errorf("deadline %v is %v after the first grant's event at %v, want %v", final.DeadlineAt, final.DeadlineAt.Sub(grant.At), grant.At, deadline)
	}
	took := end.At.Sub(granted)
	t.Logf("first grant %v, deadline %v, %s (%s) %v: %v after the grant", granted, final.DeadlineAt, end.Verb, end.Owner, end.At, took)
	if limit := deadline + reapInterval + stopLatency; took > limit {
		t.Errorf("TIMED_OUT %v after the first grant, want at most %v (deadline + reap interval + stop latency)", took, limit)
	}
	if end.At.Before(final.DeadlineAt.Add(-time.Millisecond)) {
		t.Errorf("ended at %v, before the deadline %v", end.At, final.DeadlineAt)
	}
	// Every generation's grant: under load a lease can run out before the
	// deadline and the job be granted again, each generation writing
	// under its own prefix, stamped with its own owner.
	owners := map[int64]string{}
	for _, e := range evs[:endIdx] {
		if e.Accepted && (e.Verb == jobstore.VerbClaim || e.Verb == jobstore.VerbReassign) {
			owners[e.Generation] = e.Owner
		}
	}

	// The phone is free again: the next job runs on it.
	next := l.submit(t, screenshot)
	if j := l.ended(t, next, 60*time.Second); j.Status != jobstore.StatusSucceeded || j.Device != "sim-1" {
		t.Fatalf("next job %s on %q (%s), want SUCCEEDED on sim-1", j.Status, j.Device, j.FailReason)
	}

	// Nothing was written for the timed-out job after its end.
	for _, e := range l.allEvents(t, jobID)[endIdx+1:] {
		if e.Accepted {
			t.Errorf("accepted write after TIMED_OUT: %+v", e)
		}
	}
	objs := l.objects(t, "jobs/"+jobID+"/")
	var before bool
	for _, o := range objs {
		var gen int64
		if _, err := fmt.Sscanf(strings.TrimPrefix(o.Key, "jobs/"+jobID+"/"), "g%d/", &gen); err != nil || owners[gen] == "" {
			t.Errorf("object %s outside every generation granted before the end (%v)", o.Key, owners)
			continue
		}
		if o.UserMetadata["Owner"] != owners[gen] || o.UserMetadata["Generation"] != fmt.Sprint(gen) {
			t.Errorf("%s stamps %v, want owner %s generation %d", o.Key, o.UserMetadata, owners[gen], gen)
		}
		if o.LastModified.After(end.At) {
			t.Errorf("%s stored at %v, after TIMED_OUT at %v", o.Key, o.LastModified, end.At)
		}
		if strings.HasSuffix(o.Key, "/screenshot-002.png") {
			t.Errorf("the step after the wait ran: %s", o.Key)
		}
		before = before || strings.HasSuffix(o.Key, "/screenshot-001.png")
	}
	if !before {
		t.Errorf("the screenshot before the wait was not stored: %v", objs)
	}
	var stopped bool
	for _, e := range p.Entries("job stopped") {
		stopped = stopped || e["job_id"] == jobID
	}
	if !stopped {
		t.Error(`no "job stopped" log line for the timed-out job`)
	}
	p.MustCleanShutdown(t)
}

// logEvents logs the job's write events when the test failed.
func logEvents(t *testing.T, l *lab, jobID string) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, e := range l.allEvents(t, jobID) {
				t.Logf("event %+v", e)
			}
		}
	})
}

// grants returns the generations of the job's accepted grants, oldest
// first.
func grants(evs []jobstore.WriteEvent) []int64 {
	var out []int64
	for _, e := range evs {
		if e.Accepted && (e.Verb == jobstore.VerbClaim || e.Verb == jobstore.VerbReassign) {
			out = append(out, e.Generation)
		}
	}
	return out
}

// unplugRun waits until the job's n-th attempt (grant) has stored its
// first screenshot on a phone, unplugs that phone and returns its serial
// and the attempt's generation.
func unplugRun(t *testing.T, l *lab, phones []fakePhone, jobID string, n int) (string, int64) {
	t.Helper()
	var (
		serial string
		gen    int64
		ended  jobstore.Job
	)
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("attempt %d of job %s to store a screenshot", n, jobID), func() bool {
		evs := l.allEvents(t, jobID)
		j, err := l.store.Get(l.ctx, jobID)
		if err == nil && jobstore.Finished(j.Status) {
			ended = j
			return true
		}
		g := grants(evs)
		if len(g) < n {
			return false
		}
		gen = g[n-1]
		if err != nil || j.Generation != gen || j.Status != jobstore.StatusInProgress {
			return false
		}
		for _, e := range evs {
			if e.Accepted && e.Verb == jobstore.VerbArtifact && e.Generation == gen {
				serial = j.Device
				return true
			}
		}
		return false
	})
	if ended.ID != "" {
		t.Fatalf("job %s ended %s (%s) before its attempt %d", jobID, ended.Status, ended.FailReason, n)
	}
	for _, p := range phones {
		if p.Serial() == serial {
			p.Unplug()
			return serial, gen
		}
	}
	t.Fatalf("job %s runs on %q, not one of the test's phones", jobID, serial)
	return "", 0
}

// TestUnpluggedPhoneRetried: phones behind the real adb server are
// unplugged mid-job; the agent classifies the failure
// infrastructure/phone_unplugged and the coordinator retries the job on
// another matching phone at the next generation, until max_attempts: a job
// whose every attempt lost its phone ends FAILED with each cause listed.
func TestUnpluggedPhoneRetried(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	adb := testenv.StartADB(t)
	phones := startPhones(t, adb, fakeadbd.Options{}, "[lab, retry]", "[lab, retry]", "[lab, exhaust]", "[lab, exhaust]")
	l := newLabWith(t, 3*time.Second, func(o *coordinator.Options, _ testenv.MinIOServer) {
		o.Retry = jobstore.RetryPolicy{Backoff: 200 * time.Millisecond, BackoffMax: 500 * time.Millisecond}
	})
	p := l.env.StartAgent(e2e.AgentOptions{ADB: adb, Phones: devices(phones)})
	task := func(tag string) protocol.Task {
		return protocol.Task{
			Device: protocol.DeviceSelector{Tags: []string{tag}},
			Steps:  []protocol.Step{screenshot, wait(4000), screenshot},
		}
	}
	unplugEnd := func(t *testing.T, a jobstore.AttemptEnd, gen int64) {
		t.Helper()
		if a.Generation != gen || a.Class != protocol.FailClassInfrastructure || a.Cause != protocol.CausePhoneUnplugged {
			t.Errorf("attempt end %+v, want generation %d infrastructure/phone_unplugged", a, gen)
		}
	}

	t.Run("retried on another phone", func(t *testing.T) {
		jobID := l.submitSpec(t, jobstore.JobSpec{Task: task("retry"), MaxAttempts: 3})
		logEvents(t, l, jobID)
		lost, gen := unplugRun(t, l, phones[:2], jobID, 1)
		final := l.ended(t, jobID, 90*time.Second)
		if final.Status != jobstore.StatusSucceeded {
			t.Fatalf("job ended %s (%s), want SUCCEEDED", final.Status, final.FailReason)
		}
		// A retry raises the generation when the job goes back to the
		// queue and the next grant raises it again.
		g := grants(l.allEvents(t, jobID))
		if final.Device == lost || final.Attempts != 2 || len(g) != 2 || final.Generation != g[1] || g[1] <= gen {
			t.Errorf("job succeeded on %s at generation %d after %d attempts (grants at %v); want the second attempt, on the other phone than %s, above generation %d",
				final.Device, final.Generation, final.Attempts, g, lost, gen)
		}
		if len(final.AttemptEnds) != 1 {
			t.Fatalf("attempt ends %+v, want the unplugged one", final.AttemptEnds)
		}
		unplugEnd(t, final.AttemptEnds[0], gen)
		var fails int
		for _, e := range l.allEvents(t, jobID) {
			if e.Verb == jobstore.VerbFail && e.Accepted {
				fails++
				if e.Generation != gen || e.Class != protocol.FailClassInfrastructure || e.Cause != protocol.CausePhoneUnplugged {
					t.Errorf("fail event %+v, want generation %d infrastructure/phone_unplugged", e, gen)
				}
			}
		}
		if fails != 1 {
			t.Errorf("%d accepted fails, want 1", fails)
		}
	})

	t.Run("attempts exhausted", func(t *testing.T) {
		jobID := l.submitSpec(t, jobstore.JobSpec{Task: task("exhaust"), MaxAttempts: 2})
		logEvents(t, l, jobID)
		first, gen1 := unplugRun(t, l, phones[2:], jobID, 1)
		second, gen2 := unplugRun(t, l, phones[2:], jobID, 2)
		if first == second {
			t.Fatalf("both attempts on %s, which was unplugged", first)
		}
		final := l.ended(t, jobID, 60*time.Second)
		if final.Status != jobstore.StatusFailed || final.Attempts != 2 || final.Generation != gen2 {
			t.Fatalf("job %s after %d attempts at generation %d (%s), want FAILED after 2 at generation %d",
				final.Status, final.Attempts, final.Generation, final.FailReason, gen2)
		}
		if len(final.AttemptEnds) != 2 {
			t.Fatalf("attempt ends %+v, want two", final.AttemptEnds)
		}
		t.Logf("fail reason: %s", final.FailReason)
		unplugEnd(t, final.AttemptEnds[0], gen1)
		unplugEnd(t, final.AttemptEnds[1], gen2)
		for _, want := range []string{"attempts exhausted (2 of 2)", fmt.Sprintf("g%d phone_unplugged", gen1), fmt.Sprintf("g%d phone_unplugged", gen2)} {
			if !strings.Contains(final.FailReason, want) {
				t.Errorf("fail reason %q does not list %q", final.FailReason, want)
			}
		}
	})

	p.MustCleanShutdown(t)
}

// TestAppNotInstalledNoRetry: a job that launches a package the phone
// (behind the real adb server) has not installed fails once, FAILED with
// class job and cause app_not_installed, and is not granted again.
func TestAppNotInstalledNoRetry(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	adb := testenv.StartADB(t)
	phones := startPhones(t, adb, fakeadbd.Options{Packages: []string{"com.example.survey"}}, "[lab]")
	l := newLabWith(t, 3*time.Second, func(o *coordinator.Options, _ testenv.MinIOServer) {
		o.Retry = jobstore.RetryPolicy{Backoff: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond}
	})
	p := l.env.StartAgent(e2e.AgentOptions{ADB: adb, Phones: devices(phones)})
	jobID := l.submitSpec(t, jobstore.JobSpec{MaxAttempts: 3, Task: protocol.Task{Steps: []protocol.Step{
		{Op: protocol.OpLaunch, Package: "com.example.absent"}, screenshot,
	}}})
	final := l.ended(t, jobID, 60*time.Second)
	if final.Status != jobstore.StatusFailed || final.Attempts != 1 || final.Generation != 1 {
		t.Fatalf("job %s after %d attempts at generation %d (%s), want FAILED after 1 at generation 1",
			final.Status, final.Attempts, final.Generation, final.FailReason)
	}
	if len(final.AttemptEnds) != 1 || final.AttemptEnds[0].Class != protocol.FailClassJob || final.AttemptEnds[0].Cause != protocol.CauseAppNotInstalled {
		t.Errorf("attempt ends %+v, want one job/app_not_installed", final.AttemptEnds)
	}
	// The phone is free and the job is not granted again.
	next := l.submit(t, protocol.Step{Op: protocol.OpLaunch, Package: "com.example.survey"}, screenshot)
	if j := l.ended(t, next, 60*time.Second); j.Status != jobstore.StatusSucceeded {
		t.Fatalf("next job %s (%s), want SUCCEEDED", j.Status, j.FailReason)
	}
	var grants, fails int
	for _, e := range l.allEvents(t, jobID) {
		switch {
		case e.Verb == jobstore.VerbClaim || e.Verb == jobstore.VerbReassign:
			grants++
		case e.Verb == jobstore.VerbFail && e.Accepted:
			fails++
			if e.Class != protocol.FailClassJob || e.Cause != protocol.CauseAppNotInstalled {
				t.Errorf("fail event %+v, want job/app_not_installed", e)
			}
		}
	}
	if grants != 1 || fails != 1 {
		t.Errorf("%d grants and %d accepted fails, want 1 and 1", grants, fails)
	}
	p.MustCleanShutdown(t)
}
