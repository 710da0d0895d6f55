package storetest

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// attemptTests are the conformance tests of attempts, retry classes,
// deadlines and end states (docs/operations.md, "Deadlines, attempts and
// end states").
var attemptTests = []struct {
	name string
	fn   func(t *testing.T, s sqlstore.Lab)
}{
	{"AttemptsCounted", testAttemptsCounted},
	{"DeadlineSetAtFirstGrant", testDeadlineSetAtFirstGrant},
	{"FailJobClass", testFailJobClass},
	{"FailInfrastructureRetried", testFailInfrastructureRetried},
	{"FailBackoff", testFailBackoff},
	{"SleepHandBackImmediate", testSleepHandBackImmediate},
	{"FailEndStates", testFailEndStates},
	{"ReclaimExhausted", testReclaimExhausted},
	{"HelloReleaseExhausted", testHelloReleaseExhausted},
	{"AttemptLimitGrants", testAttemptLimitGrants},
	{"ExpireDeadlines", testExpireDeadlines},
	{"FinishedRefuseWrites", testFinishedRefuseWrites},
	{"ResolveGivesAnAttempt", testResolveGivesAnAttempt},
}

// submitPolicy submits a job of the test task with an attempt limit and a
// timeout.
func submitPolicy(t *testing.T, s sqlstore.Lab, id string, maxAttempts int, timeout time.Duration) {
	t.Helper()
	task := testTask()
	task.TimeoutMS = timeout.Milliseconds()
	if _, err := s.Submit(t.Context(), jobstore.JobSpec{ID: id, Task: task, MaxAttempts: maxAttempts}); err != nil {
		t.Fatalf("submit %s: %v", id, err)
	}
}

// classified is an attempt end as a write event records it.
type classified struct {
	verb, owner  string
	gen          int64
	class, cause string
}

// attemptEnds lists the accepted write events that carry a class.
func attemptEnds(t *testing.T, s sqlstore.Lab, id string) []classified {
	t.Helper()
	evs, err := s.WriteEvents(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []classified
	for _, e := range evs {
		if e.Accepted && (e.Class != "" || e.Cause != "") {
			out = append(out, classified{e.Verb, e.Owner, e.Generation, e.Class, e.Cause})
		}
	}
	return out
}

func infra(cause, reason string) jobstore.Failure {
	return jobstore.Failure{Reason: reason, Class: protocol.FailClassInfrastructure, Cause: cause}
}

func testAttemptsCounted(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	s.SetRetryPolicy(jobstore.RetryPolicy{Backoff: time.Millisecond, BackoffMax: time.Millisecond})
	submitPolicy(t, s, "n", 10, 0)
	if j := get(t, s, "n"); j.Attempts != 0 || j.MaxAttempts != 10 || len(j.AttemptEnds) != 0 {
		t.Fatalf("submitted job: %+v", j)
	}
	claim(t, s, "n", ownerA, long) // Claim
	reassign(t, s, "n", ownerB)    // Reassign
	if j := get(t, s, "n"); j.Attempts != 2 {
		t.Fatalf("attempts after claim and reassign: %d", j.Attempts)
	}
	lb, err := s.Reassign(ctx, "n", ownerA, short)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(expiredWait)
	// TakeOverExpired
	if _, _, err := s.TakeOverExpired(ctx, jobstore.ClaimRequest{Owner: ownerC, Devices: []protocol.Device{phone("C1", "Pixel 7")}, Slots: 1, TTL: long}); err != nil {
		t.Fatalf("take over: %v", err)
	}
	j := get(t, s, "n")
	if j.Attempts != 4 || len(j.AttemptEnds) != 1 || j.AttemptEnds[0] != (jobstore.AttemptEnd{
		Generation: lb.Token.Generation, Class: protocol.FailClassInfrastructure, Cause: protocol.CauseLeaseExpired}) {
		t.Fatalf("after takeover: attempts %d, ends %+v", j.Attempts, j.AttemptEnds)
	}
	if err := s.Fail(ctx, fencing.Token{JobID: "n", Owner: ownerC, Generation: j.Generation}, infra(protocol.CausePhoneUnplugged, "gone")); err != nil {
		t.Fatal(err)
	}
	// ClaimFor, once the backoff has passed.
	var l jobstore.Lease
	for deadline := time.Now().Add(10 * time.Second); ; {
		l, err = claimFor(t, s, ownerB, 1, phone("B1", "Pixel 7"))
		if err == nil || !errors.Is(err, jobstore.ErrNoJob) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("claim for: %v", err)
	}
	if err := s.Fail(ctx, l.Token, infra(protocol.CauseAdbServerGone, "")); err != nil {
		t.Fatal(err)
	}
	// ClaimNext
	if _, err := s.ClaimNext(ctx, ownerA, long); err != nil {
		t.Fatal(err)
	}
	if j := get(t, s, "n"); j.Attempts != 6 {
		t.Fatalf("attempts after six grants: %d (%+v)", j.Attempts, j)
	}
	want := []classified{
		{jobstore.VerbReclaim, ownerA, lb.Token.Generation, protocol.FailClassInfrastructure, protocol.CauseLeaseExpired},
		{jobstore.VerbFail, ownerC, lb.Token.Generation + 1, protocol.FailClassInfrastructure, protocol.CausePhoneUnplugged},
		{jobstore.VerbFail, ownerB, l.Token.Generation, protocol.FailClassInfrastructure, protocol.CauseAdbServerGone},
	}
	if got := attemptEnds(t, s, "n"); !reflect.DeepEqual(got, want) {
		t.Fatalf("classified events:\n got %+v\nwant %+v", got, want)
	}
}

func testDeadlineSetAtFirstGrant(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	s.SetRetryPolicy(jobstore.RetryPolicy{Backoff: time.Millisecond, BackoffMax: time.Millisecond})
	submitPolicy(t, s, "d", 3, time.Hour)
	if j := get(t, s, "d"); !j.DeadlineAt.IsZero() {
		t.Fatalf("deadline before the first grant: %v", j.DeadlineAt)
	}
	l := claim(t, s, "d", ownerA, long)
	j := get(t, s, "d")
	if j.DeadlineAt.IsZero() || !l.DeadlineAt.Equal(j.DeadlineAt) {
		t.Fatalf("deadline %v, lease deadline %v", j.DeadlineAt, l.DeadlineAt)
	}
	wantUTC(t, "lease deadline", l.DeadlineAt)
	// The deadline is the database clock at the grant plus the timeout:
	// the lease expiry is that clock plus the ttl.
	if d := l.DeadlineAt.Sub(l.ExpiresAt) + long; d < time.Hour-time.Second || d > time.Hour+time.Second {
		t.Fatalf("deadline − expiry + ttl = %s, want about 1h", d)
	}
	if ms := coordinator.DeadlineMS(l, long); ms < (time.Hour-time.Second).Milliseconds() || ms > time.Hour.Milliseconds()+1000 {
		t.Fatalf("DeadlineMS = %d", ms)
	}
	// Kept across attempts.
	if err := s.Fail(ctx, l.Token, infra(protocol.CausePhoneUnplugged, "")); err != nil {
		t.Fatal(err)
	}
	l2 := claim(t, s, "d", ownerB, long)
	if !l2.DeadlineAt.Equal(l.DeadlineAt) || !get(t, s, "d").DeadlineAt.Equal(l.DeadlineAt) {
		t.Fatalf("deadline moved: %v then %v", l.DeadlineAt, l2.DeadlineAt)
	}

	// No timeout, no deadline.
	submit(t, s, "none")
	ln := claim(t, s, "none", ownerA, long)
	if !ln.DeadlineAt.IsZero() || !get(t, s, "none").DeadlineAt.IsZero() || coordinator.DeadlineMS(ln, long) != 0 {
		t.Fatalf("deadline of a job without timeout: %v", ln.DeadlineAt)
	}
}

// testFailJobClass: a job error fails at once, without retry, whatever
// attempts are left.
func testFailJobClass(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submitPolicy(t, s, "bad", 5, 0)
	l := claim(t, s, "bad", ownerA, long)
	f := jobstore.Failure{Reason: "step 1 (launch): package com.nope is not installed", Class: protocol.FailClassJob, Cause: protocol.CauseAppNotInstalled}
	if err := s.Fail(ctx, l.Token, f); err != nil {
		t.Fatal(err)
	}
	j := get(t, s, "bad")
	if j.Status != jobstore.StatusFailed || j.Generation != 1 || j.Attempts != 1 || j.FailReason != f.Reason ||
		!reflect.DeepEqual(j.AttemptEnds, []jobstore.AttemptEnd{{Generation: 1, Class: protocol.FailClassJob, Cause: protocol.CauseAppNotInstalled, Reason: f.Reason}}) {
		t.Fatalf("job after a job error: %+v", j)
	}
	_, err := s.ClaimNext(ctx, ownerB, long)
	wantErr(t, "claim after a job error", err, jobstore.ErrNoJob)
	want := []classified{{jobstore.VerbFail, ownerA, 1, protocol.FailClassJob, protocol.CauseAppNotInstalled}}
	if got := attemptEnds(t, s, "bad"); !reflect.DeepEqual(got, want) {
		t.Fatalf("classified events %+v", got)
	}

	// No class and no requeue: the job's own error too.
	submit(t, s, "plain")
	lp := claim(t, s, "plain", ownerA, long)
	if err := s.Fail(ctx, lp.Token, jobstore.Failure{Reason: "boom"}); err != nil {
		t.Fatal(err)
	}
	if j := get(t, s, "plain"); j.Status != jobstore.StatusFailed || j.FailReason != "boom" {
		t.Fatalf("unclassified failure: %+v", j)
	}
	want = []classified{{jobstore.VerbFail, ownerA, 1, protocol.FailClassJob, ""}}
	if got := attemptEnds(t, s, "plain"); !reflect.DeepEqual(got, want) {
		t.Fatalf("classified events %+v", got)
	}
}

// testFailInfrastructureRetried: an infrastructure failure goes back to the
// queue at generation + 1 with the backoff, the old token stale, until the
// attempts are used up; then FAILED with every cause listed.
func testFailInfrastructureRetried(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	backoff := 300 * time.Millisecond
	s.SetRetryPolicy(jobstore.RetryPolicy{Backoff: backoff, BackoffMax: time.Minute})
	submitPolicy(t, s, "r", 3, 0)

	l1 := claim(t, s, "r", ownerA, long)
	if err := s.Fail(ctx, l1.Token, infra(protocol.CausePhoneUnplugged, "adb: device offline")); err != nil {
		t.Fatal(err)
	}
	j := get(t, s, "r")
	if j.Status != jobstore.StatusQueued || j.Generation != 2 || j.WorkerID != "" || j.Device != "" ||
		!j.LeaseExpiresAt.IsZero() || j.Attempts != 1 || j.FailReason != "adb: device offline" {
		t.Fatalf("job after an infrastructure failure: %+v", j)
	}
	// Not before the backoff, by the database clock (NotBefore and
	// UpdatedAt are read from it in the same statement).
	if d := j.NotBefore.Sub(j.UpdatedAt); d < backoff-5*time.Millisecond || d > backoff+time.Second {
		t.Fatalf("not_before − updated_at = %s, want about %s", d, backoff)
	}
	// The old token is stale for every write.
	before := j
	_, err := s.Renew(ctx, l1.Token, long)
	wantErr(t, "renew of the retried token", err, fencing.ErrStale)
	wantErr(t, "commit of the retried token", s.Commit(ctx, l1.Token, result("late")), fencing.ErrStale)
	wantErr(t, "fail of the retried token", s.Fail(ctx, l1.Token, infra(protocol.CausePhoneUnplugged, "")), fencing.ErrStale)
	wantErr(t, "artifact of the retried token", s.RegisterArtifact(ctx, l1.Token, artifact(l1.Token, "a.png", "1")), fencing.ErrStale)
	wantUnchanged(t, "writes of the retried token", before, get(t, s, "r"))

	// A legacy release (requeue, no class) is retried too, recorded as
	// infrastructure; the backoff doubles.
	l2 := claim(t, s, "r", ownerB, long)
	if l2.Token.Generation != 3 {
		t.Fatalf("second attempt at generation %d", l2.Token.Generation)
	}
	if err := s.Fail(ctx, l2.Token, jobstore.Failure{Reason: "draining", Requeue: true}); err != nil {
		t.Fatal(err)
	}
	j = get(t, s, "r")
	if j.Status != jobstore.StatusQueued || j.Generation != 4 || j.Attempts != 2 {
		t.Fatalf("job after a release: %+v", j)
	}
	if d := j.NotBefore.Sub(j.UpdatedAt); d < 2*backoff-5*time.Millisecond || d > 2*backoff+time.Second {
		t.Fatalf("second backoff %s, want about %s", d, 2*backoff)
	}

	// The third attempt's lease expires: the attempts are used up.
	l3 := claim(t, s, "r", ownerC, short)
	time.Sleep(expiredWait)
	toks, err := s.ReclaimExpired(ctx, 0)
	if err != nil || len(toks) != 1 || toks[0] != l3.Token {
		t.Fatalf("reclaim: %v, %v", toks, err)
	}
	j = get(t, s, "r")
	wantReason := "attempts exhausted (3 of 3): g1 phone_unplugged: adb: device offline; g3: draining; g5 lease_expired"
	if j.Status != jobstore.StatusFailed || j.Generation != 5 || j.Attempts != 3 || j.FailReason != wantReason {
		t.Fatalf("job after its last attempt: status %s gen %d attempts %d reason %q, want reason %q",
			j.Status, j.Generation, j.Attempts, j.FailReason, wantReason)
	}
	wantEnds := []jobstore.AttemptEnd{
		{Generation: 1, Class: protocol.FailClassInfrastructure, Cause: protocol.CausePhoneUnplugged, Reason: "adb: device offline"},
		{Generation: 3, Class: protocol.FailClassInfrastructure, Reason: "draining"},
		{Generation: 5, Class: protocol.FailClassInfrastructure, Cause: protocol.CauseLeaseExpired},
	}
	if !reflect.DeepEqual(j.AttemptEnds, wantEnds) {
		t.Fatalf("attempt ends %+v", j.AttemptEnds)
	}
	var parts []string
	for _, e := range j.AttemptEnds {
		parts = append(parts, e.String())
	}
	if got := "attempts exhausted (3 of 3): " + strings.Join(parts, "; "); got != wantReason {
		t.Fatalf("AttemptEnd.String lists %q, the store %q", got, wantReason)
	}
	_, err = s.ClaimNext(ctx, ownerA, long)
	wantErr(t, "claim of an exhausted job", err, jobstore.ErrNoJob)
	want := []classified{
		{jobstore.VerbFail, ownerA, 1, protocol.FailClassInfrastructure, protocol.CausePhoneUnplugged},
		{jobstore.VerbFail, ownerB, 3, protocol.FailClassInfrastructure, ""},
		{jobstore.VerbReclaim, ownerC, 5, protocol.FailClassInfrastructure, protocol.CauseLeaseExpired},
	}
	if got := attemptEnds(t, s, "r"); !reflect.DeepEqual(got, want) {
		t.Fatalf("classified events:\n got %+v\nwant %+v", got, want)
	}
}

// testFailBackoff: the backoff doubles per attempt up to its cap.
func testFailBackoff(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	s.SetRetryPolicy(jobstore.RetryPolicy{Backoff: 200 * time.Millisecond, BackoffMax: 500 * time.Millisecond})
	submitPolicy(t, s, "b", 10, 0)
	for i, want := range []time.Duration{200, 400, 500, 500} {
		want *= time.Millisecond
		l := claim(t, s, "b", ownerA, long)
		if err := s.Fail(ctx, l.Token, infra(protocol.CauseStorageUnreachable, "")); err != nil {
			t.Fatal(err)
		}
		j := get(t, s, "b")
		if d := j.NotBefore.Sub(j.UpdatedAt); d < want-5*time.Millisecond || d > want+time.Second {
			t.Fatalf("attempt %d: backoff %s, want about %s", i+1, d, want)
		}
	}
}

// testSleepHandBackImmediate: a job handed back because the agent's PC is
// going to sleep (cause agent_sleep), the agent shuts down
// (agent_shutdown) or updates itself (agent_update) is queued again with
// no backoff and granted at once to
// another agent; each counts as an attempt, and any other infrastructure
// failure waits out the backoff as usual.
func testSleepHandBackImmediate(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	s.SetRetryPolicy(jobstore.RetryPolicy{Backoff: time.Hour, BackoffMax: time.Hour})
	submitPolicy(t, s, "s", 5, 0)
	l1 := claim(t, s, "s", ownerA, long)
	if err := s.Fail(ctx, l1.Token, jobstore.Failure{Reason: "the PC is going to sleep", Requeue: true,
		Class: protocol.FailClassInfrastructure, Cause: protocol.CauseAgentSleep}); err != nil {
		t.Fatal(err)
	}
	j := get(t, s, "s")
	if j.Status != jobstore.StatusQueued || j.Generation != 2 || j.WorkerID != "" || j.Attempts != 1 {
		t.Fatalf("job after a sleep hand-back: %+v", j)
	}
	if d := j.NotBefore.Sub(j.UpdatedAt); d > time.Second {
		t.Fatalf("not_before − updated_at = %s after a sleep hand-back, want none (the backoff is an hour)", d)
	}
	// Granted again at once, to another agent.
	l2, err := s.ClaimNext(ctx, ownerB, long)
	if err != nil || l2.Token.JobID != "s" || l2.Token.Generation != 3 {
		t.Fatalf("claim after a sleep hand-back: %+v, %v", l2.Token, err)
	}
	wantEnds := []jobstore.AttemptEnd{{Generation: 1, Class: protocol.FailClassInfrastructure, Cause: protocol.CauseAgentSleep, Reason: "the PC is going to sleep"}}
	if j := get(t, s, "s"); !reflect.DeepEqual(j.AttemptEnds, wantEnds) || j.Attempts != 2 {
		t.Fatalf("attempts %d, ends %+v, want 2 and %+v", j.Attempts, j.AttemptEnds, wantEnds)
	}
	// A shutdown release is queued again at once too.
	if err := s.Fail(ctx, l2.Token, infra(protocol.CauseAgentShutdown, "agent shutting down")); err != nil {
		t.Fatal(err)
	}
	if j := get(t, s, "s"); j.NotBefore.Sub(j.UpdatedAt) > time.Second {
		t.Fatalf("not_before − updated_at = %s after a shutdown release, want none", j.NotBefore.Sub(j.UpdatedAt))
	}
	// So is a hand-back before a self-update.
	lu, err := s.ClaimNext(ctx, ownerA, long)
	if err != nil || lu.Token.JobID != "s" {
		t.Fatalf("claim after a shutdown release: %+v, %v", lu.Token, err)
	}
	if err := s.Fail(ctx, lu.Token, infra(protocol.CauseAgentUpdate, "agent updating")); err != nil {
		t.Fatal(err)
	}
	if j := get(t, s, "s"); j.Status != jobstore.StatusQueued || j.NotBefore.Sub(j.UpdatedAt) > time.Second {
		t.Fatalf("%s, not_before − updated_at = %s after an update hand-back, want QUEUED and none", j.Status, j.NotBefore.Sub(j.UpdatedAt))
	}
	// Any other infrastructure failure keeps its backoff.
	l3, err := s.ClaimNext(ctx, ownerA, long)
	if err != nil || l3.Token.JobID != "s" {
		t.Fatalf("claim after an update hand-back: %+v, %v", l3.Token, err)
	}
	if err := s.Fail(ctx, l3.Token, infra(protocol.CausePhoneUnplugged, "phone unplugged")); err != nil {
		t.Fatal(err)
	}
	if j := get(t, s, "s"); j.NotBefore.Sub(j.UpdatedAt) < time.Hour-time.Second {
		t.Fatalf("not_before − updated_at = %s after an unplugged phone, want the backoff", j.NotBefore.Sub(j.UpdatedAt))
	}
}

// testFailEndStates: a deadline fail is TIMED_OUT, an effect in doubt
// NEEDS_DECISION, whatever the class.
func testFailEndStates(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	cases := []struct {
		id   string
		f    jobstore.Failure
		want string
	}{
		{"deadline", jobstore.Failure{Reason: "deadline passed at step 3", Class: protocol.FailClassInfrastructure, Cause: protocol.CauseDeadline}, jobstore.StatusTimedOut},
		{"deadline-noreason", jobstore.Failure{Cause: protocol.CauseDeadline, Requeue: true}, jobstore.StatusTimedOut},
		{"decision", jobstore.Failure{Reason: jobstore.ReasonNeedsDecision + ": effect k is in doubt", Class: protocol.FailClassJob}, jobstore.StatusNeedsDecision},
	}
	for _, tc := range cases {
		submitPolicy(t, s, tc.id, 3, 0)
		l := claim(t, s, tc.id, ownerA, long)
		if err := s.Fail(ctx, l.Token, tc.f); err != nil {
			t.Fatal(err)
		}
		j := get(t, s, tc.id)
		if j.Status != tc.want || j.Generation != 1 || !j.LeaseExpiresAt.IsZero() || j.FailReason == "" {
			t.Fatalf("%s: job %+v, want %s", tc.id, j, tc.want)
		}
		if !jobstore.Finished(j.Status) {
			t.Fatalf("%s: %s is not finished", tc.id, j.Status)
		}
		_, err := s.ClaimNext(ctx, ownerB, long)
		wantErr(t, tc.id+": claim", err, jobstore.ErrNoJob)
	}
}

// testReclaimExhausted: a lease expiry is retried like any
// infrastructure failure; with no attempt left the job is FAILED.
func testReclaimExhausted(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submitPolicy(t, s, "one", 1, 0)
	submitPolicy(t, s, "two", 2, 0)
	l1 := claim(t, s, "one", ownerA, short)
	l2 := claim(t, s, "two", ownerA, short)
	time.Sleep(expiredWait)
	toks, err := s.ReclaimExpired(ctx, 0)
	if err != nil || len(toks) != 2 {
		t.Fatalf("reclaim: %v, %v", toks, err)
	}
	if j := get(t, s, "one"); j.Status != jobstore.StatusFailed || j.Generation != l1.Token.Generation ||
		j.FailReason != "attempts exhausted (1 of 1): g1 lease_expired" || !j.LeaseExpiresAt.IsZero() {
		t.Fatalf("job with one attempt: %+v", j)
	}
	if j := get(t, s, "two"); j.Status != jobstore.StatusQueued || j.Generation != l2.Token.Generation+1 || j.NotBefore.IsZero() {
		t.Fatalf("job with two attempts: %+v", j)
	}
	for _, id := range []string{"one", "two"} {
		want := []classified{{jobstore.VerbReclaim, ownerA, 1, protocol.FailClassInfrastructure, protocol.CauseLeaseExpired}}
		if got := attemptEnds(t, s, id); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: classified events %+v", id, got)
		}
	}
}

// testHelloReleaseExhausted: the jobs of a restarted agent's old boot end
// their attempt with cause agent_restarted; retried or FAILED.
func testHelloReleaseExhausted(t *testing.T, s sqlstore.Lab) {
	devs := []protocol.Device{phone("A1", "Pixel 7"), phone("A2", "Pixel 7")}
	hello(t, s, ownerA, devs...)
	submitPolicy(t, s, "last", 1, 0)
	time.Sleep(2 * time.Millisecond)
	submitPolicy(t, s, "more", 3, 0)
	la, err := claimFor(t, s, ownerA, 2, devs...)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := claimFor(t, s, ownerA, 2, devs...)
	if err != nil {
		t.Fatal(err)
	}
	_, released := hello(t, s, ownerA2, devs...)
	if len(released) != 2 {
		t.Fatalf("released %v", released)
	}
	if j := get(t, s, la.Token.JobID); j.Status != jobstore.StatusFailed ||
		j.FailReason != "attempts exhausted (1 of 1): g1 agent_restarted" {
		t.Fatalf("%s after the restart: %+v", la.Token.JobID, j)
	}
	if j := get(t, s, lb.Token.JobID); j.Status != jobstore.StatusQueued || j.Generation != 2 {
		t.Fatalf("%s after the restart: %+v", lb.Token.JobID, j)
	}
	for _, l := range []jobstore.Lease{la, lb} {
		want := []classified{{jobstore.VerbReclaim, ownerA, 1, protocol.FailClassInfrastructure, protocol.CauseAgentRestarted}}
		if got := attemptEnds(t, s, l.Token.JobID); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: classified events %+v", l.Token.JobID, got)
		}
	}
}

// testAttemptLimitGrants: ClaimFor and TakeOverExpired never grant a job
// whose attempts are used up or whose deadline passed; an operator's
// Reassign still may.
func testAttemptLimitGrants(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	devA := phone("A1", "Pixel 7")
	devB := phone("B1", "Pixel 7")
	submitPolicy(t, s, "once", 1, 0)
	l, err := s.ClaimFor(ctx, jobstore.ClaimRequest{Owner: ownerA, Devices: []protocol.Device{devA}, Slots: 1, TTL: short})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(expiredWait)
	_, _, err = s.TakeOverExpired(ctx, jobstore.ClaimRequest{Owner: ownerB, Devices: []protocol.Device{devB}, Slots: 1, TTL: long})
	wantErr(t, "take over a job with no attempt left", err, jobstore.ErrNoJob)
	if j := get(t, s, "once"); j.Status != jobstore.StatusInProgress || j.Generation != l.Token.Generation || j.Attempts != 1 {
		t.Fatalf("job after a refused takeover: %+v", j)
	}
	// The operator may grant it all the same: one attempt more.
	lr := reassign(t, s, "once", ownerB)
	if j := get(t, s, "once"); j.Attempts != 2 || j.MaxAttempts != 1 || lr.Token.Generation != 2 {
		t.Fatalf("job after the operator's reassignment: %+v", j)
	}
	if err := s.Fail(ctx, lr.Token, infra(protocol.CausePhoneUnplugged, "")); err != nil {
		t.Fatal(err)
	}
	// (The attempt the operator took away is not listed: it did not fail.)
	if j := get(t, s, "once"); j.Status != jobstore.StatusFailed || j.FailReason != "attempts exhausted (2 of 1): g2 phone_unplugged" {
		t.Fatalf("job failed past its limit: %+v", j)
	}

	// A queued job whose deadline passed is not granted (the reaper ends
	// it); one with time left is.
	submitPolicy(t, s, "late", 3, 100*time.Millisecond)
	s.SetRetryPolicy(jobstore.RetryPolicy{Backoff: time.Millisecond, BackoffMax: time.Millisecond})
	ll := claim(t, s, "late", ownerA, long)
	if err := s.Fail(ctx, ll.Token, infra(protocol.CausePhoneUnplugged, "")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(expiredWait)
	_, err = s.ClaimFor(ctx, jobstore.ClaimRequest{Owner: ownerC, Devices: []protocol.Device{phone("C1", "Pixel 7")}, Slots: 1, TTL: long})
	wantErr(t, "claim of a job past its deadline", err, jobstore.ErrNoJob)
}

// testExpireDeadlines: jobs past their deadline end TIMED_OUT in one sweep,
// queued or in progress; the tokens taken away are returned and stale.
func testExpireDeadlines(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	s.SetRetryPolicy(jobstore.RetryPolicy{Backoff: time.Minute, BackoffMax: time.Minute})
	submitPolicy(t, s, "run", 3, 100*time.Millisecond)
	submitPolicy(t, s, "wait", 3, 100*time.Millisecond)
	submitPolicy(t, s, "later", 3, time.Hour)
	submitPolicy(t, s, "never", 3, 0)
	lr := claim(t, s, "run", ownerA, long)
	lw := claim(t, s, "wait", ownerA, long)
	if err := s.Fail(ctx, lw.Token, infra(protocol.CausePhoneUnplugged, "")); err != nil {
		t.Fatal(err) // queued again, not before a minute
	}
	claim(t, s, "later", ownerB, long)
	claim(t, s, "never", ownerB, long)
	time.Sleep(expiredWait)
	toks, err := s.ExpireDeadlines(ctx, 0)
	if err != nil || !reflect.DeepEqual(toks, []fencing.Token{lr.Token}) {
		t.Fatalf("expire: %v, %v; want [%v]", toks, err, lr.Token)
	}
	for _, id := range []string{"run", "wait"} {
		j := get(t, s, id)
		if j.Status != jobstore.StatusTimedOut || j.FailReason != jobstore.DetailDeadline || !j.LeaseExpiresAt.IsZero() {
			t.Fatalf("%s after its deadline: %+v", id, j)
		}
	}
	if j := get(t, s, "run"); j.Generation != lr.Token.Generation || len(j.AttemptEnds) != 1 ||
		j.AttemptEnds[0] != (jobstore.AttemptEnd{Generation: 1, Class: protocol.FailClassJob, Cause: protocol.CauseDeadline}) {
		t.Fatalf("run after its deadline: %+v", j)
	}
	for _, id := range []string{"later", "never"} {
		if j := get(t, s, id); j.Status != jobstore.StatusInProgress {
			t.Fatalf("%s: %+v", id, j)
		}
	}
	// The old token's writes are stale.
	before := get(t, s, "run")
	wantErr(t, "commit after the deadline", s.Commit(ctx, lr.Token, result("late")), fencing.ErrStale)
	_, err = s.Renew(ctx, lr.Token, long)
	wantErr(t, "renew after the deadline", err, fencing.ErrStale)
	wantErr(t, "artifact after the deadline", s.RegisterArtifact(ctx, lr.Token, artifact(lr.Token, "x.png", "1")), fencing.ErrStale)
	wantErr(t, "upload after the deadline", s.AuthorizeUpload(ctx, lr.Token, "x.png"), fencing.ErrStale)
	wantErr(t, "fail after the deadline", s.Fail(ctx, lr.Token, jobstore.Failure{Reason: "x"}), fencing.ErrStale)
	wantUnchanged(t, "writes after the deadline", before, get(t, s, "run"))
	if toks, err := s.ExpireDeadlines(ctx, 0); err != nil || len(toks) != 0 {
		t.Fatalf("second sweep: %v, %v", toks, err)
	}

	want := []classified{{jobstore.VerbTimeout, ownerA, 1, protocol.FailClassJob, protocol.CauseDeadline}}
	if got := attemptEnds(t, s, "run"); !reflect.DeepEqual(got, want) {
		t.Fatalf("run: classified events %+v", got)
	}
	want = []classified{
		{jobstore.VerbFail, ownerA, 1, protocol.FailClassInfrastructure, protocol.CausePhoneUnplugged},
		{jobstore.VerbTimeout, "", 2, protocol.FailClassJob, protocol.CauseDeadline},
	}
	if got := attemptEnds(t, s, "wait"); !reflect.DeepEqual(got, want) {
		t.Fatalf("wait: classified events %+v", got)
	}

	// The limit bounds one sweep.
	for _, id := range []string{"l1", "l2", "l3"} {
		submitPolicy(t, s, id, 3, time.Millisecond)
		claim(t, s, id, ownerC, long)
	}
	time.Sleep(expiredWait)
	if toks, err := s.ExpireDeadlines(ctx, 2); err != nil || len(toks) != 2 {
		t.Fatalf("limited sweep: %v, %v", toks, err)
	}
	if toks, err := s.ExpireDeadlines(ctx, 2); err != nil || len(toks) != 1 {
		t.Fatalf("second limited sweep: %v, %v", toks, err)
	}
}

// testFinishedRefuseWrites: no fenced write is accepted for a job in any
// end state.
func testFinishedRefuseWrites(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	end := map[string]func(l jobstore.Lease){
		jobstore.StatusSucceeded: func(l jobstore.Lease) {
			if err := s.Commit(ctx, l.Token, result("ok")); err != nil {
				t.Fatal(err)
			}
		},
		jobstore.StatusFailed: func(l jobstore.Lease) {
			if err := s.Fail(ctx, l.Token, jobstore.Failure{Class: protocol.FailClassJob, Cause: protocol.CauseAssertion}); err != nil {
				t.Fatal(err)
			}
		},
		jobstore.StatusCancelled: func(l jobstore.Lease) {
			if _, err := s.Cancel(ctx, l.Token.JobID, "stop"); err != nil {
				t.Fatal(err)
			}
		},
		jobstore.StatusTimedOut: func(l jobstore.Lease) {
			if err := s.Fail(ctx, l.Token, jobstore.Failure{Cause: protocol.CauseDeadline}); err != nil {
				t.Fatal(err)
			}
		},
		jobstore.StatusNeedsDecision: func(l jobstore.Lease) {
			if err := s.Fail(ctx, l.Token, jobstore.Failure{Reason: jobstore.ReasonNeedsDecision + ": k"}); err != nil {
				t.Fatal(err)
			}
		},
	}
	for state, fn := range end {
		id := "end-" + state
		submit(t, s, id)
		l := claim(t, s, id, ownerA, long)
		fn(l)
		before := get(t, s, id)
		if before.Status != state || !jobstore.Finished(before.Status) {
			t.Fatalf("%s: status %s", id, before.Status)
		}
		_, err := s.Renew(ctx, l.Token, long)
		wantErr(t, state+": renew", err, fencing.ErrStale)
		wantErr(t, state+": commit", s.Commit(ctx, l.Token, result("again")), fencing.ErrStale)
		wantErr(t, state+": fail", s.Fail(ctx, l.Token, infra(protocol.CausePhoneUnplugged, "")), fencing.ErrStale)
		wantErr(t, state+": artifact", s.RegisterArtifact(ctx, l.Token, artifact(l.Token, "x.png", "1")), fencing.ErrStale)
		wantErr(t, state+": upload", s.AuthorizeUpload(ctx, l.Token, "x.png"), fencing.ErrStale)
		_, err = s.Cancel(ctx, id, "again")
		wantErr(t, state+": cancel", err, jobstore.ErrConflict)
		_, err = s.Reassign(ctx, id, ownerB, long)
		wantErr(t, state+": reassign", err, jobstore.ErrConflict)
		if toks, err := s.ExpireDeadlines(ctx, 0); err != nil || len(toks) != 0 {
			t.Fatalf("%s: expire: %v, %v", state, toks, err)
		}
		wantUnchanged(t, state+": writes", before, get(t, s, id))
	}
}

// testResolveGivesAnAttempt: a person's decision queues a NEEDS_DECISION
// job again, with an attempt left and a fresh deadline at its next grant.
func testResolveGivesAnAttempt(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submitPolicy(t, s, "nd", 1, time.Hour)
	l := claim(t, s, "nd", ownerA, long)
	reserve(t, s, l.Token, "once-1")
	first := get(t, s, "nd").DeadlineAt
	if err := s.Fail(ctx, l.Token, jobstore.Failure{Reason: jobstore.ReasonNeedsDecision + ": effect once-1 is in doubt", Class: protocol.FailClassInfrastructure}); err != nil {
		t.Fatal(err)
	}
	if j := get(t, s, "nd"); j.Status != jobstore.StatusNeedsDecision || !jobstore.NeedsDecision(j) {
		t.Fatalf("job with an effect in doubt: %+v", j)
	}
	if _, requeued, err := s.ResolveEffect(ctx, "once-1", jobstore.ResolveRetry, "not sent"); err != nil || !requeued {
		t.Fatalf("resolve: requeued=%v, %v", requeued, err)
	}
	j := get(t, s, "nd")
	if j.Status != jobstore.StatusQueued || j.MaxAttempts != 2 || j.Attempts != 1 || !j.DeadlineAt.IsZero() {
		t.Fatalf("job after the decision: %+v", j)
	}
	time.Sleep(2 * time.Millisecond)
	l2, err := claimFor(t, s, ownerB, 1, phone("B1", "Pixel 7"))
	if err != nil {
		t.Fatalf("claim after the decision: %v", err)
	}
	if l2.DeadlineAt.IsZero() || !l2.DeadlineAt.After(first) {
		t.Fatalf("deadline after the decision %v, first %v", l2.DeadlineAt, first)
	}
}
