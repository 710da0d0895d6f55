package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// Lease lengths used by the suite: long never expires during a test, short
// expires after a brief sleep (expiredWait).
const (
	long        = time.Minute
	short       = 50 * time.Millisecond
	expiredWait = 150 * time.Millisecond
)

// Owners: a and b are two agents; a2 is agent a after a restart (new boot id).
var (
	ownerA  = fencing.Owner("agent-a", "boot-1")
	ownerA2 = fencing.Owner("agent-a", "boot-2")
	ownerB  = fencing.Owner("agent-b", "boot-1")
	ownerC  = fencing.Owner("agent-c", "boot-1")
)

// Run runs the conformance suite. open is called once per subtest and must
// return a fresh, empty store, closed when that test ends. Subtests run in
// parallel.
func Run(t *testing.T, open func(t *testing.T) sqlstore.Lab) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s sqlstore.Lab)
	}{
		{"SubmitGet", testSubmitGet},
		{"SubmitJobID", testSubmitJobID},
		{"Claim", testClaim},
		{"ClaimNext", testClaimNext},
		{"Renew", testRenew},
		{"Commit", testCommit},
		{"Reassign", testReassign},
		{"ReclaimExpired", testReclaimExpired},
		{"ReclaimLimit", testReclaimLimit},
		{"Fail", testFail},
		{"Artifacts", testArtifacts},
		{"WriteEvents", testWriteEvents},
		{"CommitRace", testCommitRace},
		{"ReassignRace", testReassignRace},
		{"StaleWriterExperiment", testStaleWriterExperiment},
	}
	tests = append(tests, registryTests...)
	tests = append(tests, effectTests...)
	tests = append(tests, fastpathTests...)
	tests = append(tests, apiTests...)
	tests = append(tests, schedTests...)
	tests = append(tests, eventTests...)
	tests = append(tests, attemptTests...)
	tests = append(tests, uiTests...)
	tests = append(tests, observationTests...)
	tests = append(tests, exportTests...)
	tests = append(tests, apkTests...)
	tests = append(tests, scheduleTests...)
	tests = append(tests, releaseTests...)
	tests = append(tests, enrollTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
}

func testTask() protocol.Task {
	return protocol.Task{
		Device: protocol.DeviceSelector{Model: "Pixel 7"},
		Steps: []protocol.Step{
			{Op: protocol.OpLaunch, Package: "com.example.app"},
			{Op: protocol.OpTap, X: 10, Y: 20},
			{Op: protocol.OpScreenshot, Name: "screen.png"},
		},
	}
}

func submit(t *testing.T, s sqlstore.Lab, id string) jobstore.Job {
	t.Helper()
	j, err := s.Submit(t.Context(), jobstore.JobSpec{ID: id, Task: testTask()})
	if err != nil {
		t.Fatalf("submit %s: %v", id, err)
	}
	return j
}

func claim(t *testing.T, s sqlstore.Lab, id, owner string, ttl time.Duration) jobstore.Lease {
	t.Helper()
	l, err := s.Claim(t.Context(), id, owner, ttl)
	if err != nil {
		t.Fatalf("claim %s for %s: %v", id, owner, err)
	}
	return l
}

func reassign(t *testing.T, s sqlstore.Lab, id, owner string) jobstore.Lease {
	t.Helper()
	l, err := s.Reassign(t.Context(), id, owner, long)
	if err != nil {
		t.Fatalf("reassign %s to %s: %v", id, owner, err)
	}
	return l
}

func get(t *testing.T, s sqlstore.Lab, id string) jobstore.Job {
	t.Helper()
	j, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return j
}

func tok(id, owner string, gen int64) fencing.Token {
	return fencing.Token{JobID: id, Owner: owner, Generation: gen}
}

func result(v string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"value": %q, "items": [1, 2, 3]}`, v))
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func wantUTC(t *testing.T, what string, tm time.Time) {
	t.Helper()
	if tm.IsZero() {
		t.Fatalf("%s is zero", what)
	}
	if tm.Location() != time.UTC {
		t.Fatalf("%s in %v, want UTC", what, tm.Location())
	}
}

// wantUnchanged fails unless the job's lease state is the same as before.
func wantUnchanged(t *testing.T, what string, before, after jobstore.Job) {
	t.Helper()
	if before.Status != after.Status || before.Generation != after.Generation ||
		before.WorkerID != after.WorkerID || !before.LeaseExpiresAt.Equal(after.LeaseExpiresAt) ||
		!jsonEqual(before.Result, after.Result) || before.CompletedBy != after.CompletedBy {
		t.Fatalf("%s changed the job:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

// testSubmitJobID: a job id is 1 to 64 characters of [A-Za-z0-9_-]
// (docs/protocol.md section 2): an id that could put the job's objects
// under another job's prefix (jobs/<job_id>/g<generation>/), or that is not
// one subject token, is refused at submit with an error naming the id, and
// nothing is stored.
func testSubmitJobID(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	for _, id := range []string{"a", "job_7-X", strings.Repeat("x", 64)} {
		if j, err := s.Submit(ctx, jobstore.JobSpec{ID: id, Task: testTask()}); err != nil || j.ID != id {
			t.Fatalf("submit %q: %+v, %v", id, j, err)
		}
	}
	for _, id := range []string{"victim/g1", "a/b", "..", ".", "a..b", "job.1", "a b", "grüße", strings.Repeat("x", 65), strings.Repeat("y", 2000)} {
		_, err := s.Submit(ctx, jobstore.JobSpec{ID: id, Task: testTask()})
		if err == nil || !strings.Contains(err.Error(), "invalid job id") {
			t.Errorf("submit with id %q: err = %v, want an invalid job id refusal", id, err)
			continue
		}
		if _, err := s.Get(ctx, id); !errors.Is(err, jobstore.ErrNotFound) {
			t.Errorf("get %q after a refused submit: %v, want not found", id, err)
		}
	}
}

func testSubmitGet(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	j := submit(t, s, "job-1")
	if j.ID != "job-1" || j.Status != jobstore.StatusQueued || j.Generation != 0 || j.WorkerID != "" ||
		!j.LeaseExpiresAt.IsZero() || j.Result != nil || j.CompletedBy != "" || j.FailReason != "" {
		t.Fatalf("submitted job: %+v", j)
	}
	if !reflect.DeepEqual(j.Task, testTask()) {
		t.Fatalf("task: got %+v, want %+v", j.Task, testTask())
	}
	wantUTC(t, "created_at", j.CreatedAt)
	wantUTC(t, "updated_at", j.UpdatedAt)
	if d := time.Since(j.CreatedAt); d < -time.Minute || d > time.Minute {
		t.Fatalf("created_at %v is %v away from now", j.CreatedAt, d)
	}
	g := get(t, s, "job-1")
	if !reflect.DeepEqual(g, j) {
		t.Fatalf("get returned\n%+v\nsubmit returned\n%+v", g, j)
	}

	auto, err := s.Submit(ctx, jobstore.JobSpec{Task: testTask()})
	if err != nil {
		t.Fatal(err)
	}
	if auto.ID == "" || auto.ID == "job-1" {
		t.Fatalf("generated id %q", auto.ID)
	}
	get(t, s, auto.ID)

	_, err = s.Submit(ctx, jobstore.JobSpec{ID: "job-1", Task: testTask()})
	wantErr(t, "submit duplicate id", err, jobstore.ErrConflict)

	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "job-bad", Task: protocol.Task{}}); err == nil {
		t.Fatal("submit of a task without steps succeeded")
	}
	_, err = s.Get(ctx, "job-bad")
	wantErr(t, "get rejected job", err, jobstore.ErrNotFound)
	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "a/b", Task: testTask()}); err == nil {
		t.Fatal("submit with id a/b succeeded")
	}
	// Refused at submit, not when the job runs: text a phone cannot type
	// and interactive jobs outside a session, which nothing would send
	// steps to.
	unicode := testTask()
	unicode.Steps = append(unicode.Steps, protocol.Step{Op: protocol.OpText, Text: "grüße\tnext"})
	_, err = s.Submit(ctx, jobstore.JobSpec{ID: "job-unicode", Task: unicode})
	if err == nil || !strings.Contains(err.Error(), "steps[3]: text:") || !strings.Contains(err.Error(), "is not printable") {
		t.Fatalf("submit of text with a tab: err = %v, want a refusal naming steps[3]", err)
	}
	interactive := testTask()
	interactive.Interactive = true
	_, err = s.Submit(ctx, jobstore.JobSpec{ID: "job-interactive", Task: interactive})
	if err == nil || !strings.Contains(err.Error(), "interactive jobs cannot be submitted") {
		t.Fatalf("submit of an interactive job: err = %v, want a refusal", err)
	}
	for _, id := range []string{"job-unicode", "job-interactive"} {
		_, err = s.Get(ctx, id)
		wantErr(t, "get refused "+id, err, jobstore.ErrNotFound)
	}
	// The session manager, which sends an interactive job its steps, may
	// submit one (docs/sessions.md).
	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "job-session", Task: protocol.Task{Interactive: true}, AllowInteractive: true}); err != nil {
		t.Fatalf("submit of a session's interactive job: %v", err)
	}
	if j := get(t, s, "job-session"); !j.Task.Interactive || j.Status != jobstore.StatusQueued {
		t.Fatalf("session job stored as %+v", j)
	}
	_, err = s.Get(ctx, "nope")
	wantErr(t, "get unknown job", err, jobstore.ErrNotFound)
}

func testClaim(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "j")
	l := claim(t, s, "j", ownerA, long)
	if l.Token != tok("j", ownerA, 1) {
		t.Fatalf("lease token %v, want generation 1 for %s", l.Token, ownerA)
	}
	if !reflect.DeepEqual(l.Task, testTask()) {
		t.Fatalf("lease task %+v", l.Task)
	}
	wantUTC(t, "lease expiry", l.ExpiresAt)
	j := get(t, s, "j")
	if j.Status != jobstore.StatusInProgress || j.Generation != 1 || j.WorkerID != ownerA {
		t.Fatalf("claimed job: %+v", j)
	}
	if !j.LeaseExpiresAt.Equal(l.ExpiresAt) {
		t.Fatalf("stored expiry %v, lease says %v", j.LeaseExpiresAt, l.ExpiresAt)
	}
	// The expiry is the database clock at the claim plus the ttl: the same
	// statement stamped updated_at from that clock.
	if d := j.LeaseExpiresAt.Sub(j.UpdatedAt); d < long-time.Millisecond || d > long+time.Second {
		t.Fatalf("expiry - updated_at = %v, want the ttl %v", d, long)
	}
	if d := time.Until(l.ExpiresAt); d < long-time.Minute || d > long+time.Minute {
		t.Fatalf("expiry %v is not about now + %v", l.ExpiresAt, long)
	}

	_, err := s.Claim(ctx, "j", ownerB, long)
	wantErr(t, "claim of an in-progress job", err, jobstore.ErrConflict)
	wantUnchanged(t, "refused claim", j, get(t, s, "j"))
	_, err = s.Claim(ctx, "nope", ownerA, long)
	wantErr(t, "claim of an unknown job", err, jobstore.ErrNotFound)

	submit(t, s, "k")
	if _, err := s.Claim(ctx, "k", "", long); err == nil {
		t.Fatal("claim with an empty owner succeeded")
	}
	if _, err := s.Claim(ctx, "k", ownerA, 0); err == nil {
		t.Fatal("claim with a zero ttl succeeded")
	}
	if g := get(t, s, "k"); g.Status != jobstore.StatusQueued || g.Generation != 0 {
		t.Fatalf("invalid claims changed the job: %+v", g)
	}
}

func testClaimNext(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	_, err := s.ClaimNext(ctx, ownerA, long)
	wantErr(t, "claim next on an empty store", err, jobstore.ErrNoJob)
	ids := []string{"first", "second", "third", "fourth"}
	for _, id := range ids {
		submit(t, s, id)
	}
	// Claiming one out of order leaves the rest in submission order.
	claim(t, s, "second", ownerC, long)
	for _, want := range []string{"first", "third", "fourth"} {
		l, err := s.ClaimNext(ctx, ownerA, long)
		if err != nil {
			t.Fatalf("claim next: %v", err)
		}
		if l.Token != tok(want, ownerA, 1) {
			t.Fatalf("claim next got %v, want %s at generation 1", l.Token, want)
		}
		if !reflect.DeepEqual(l.Task, testTask()) {
			t.Fatalf("lease task %+v", l.Task)
		}
		j := get(t, s, want)
		if j.Status != jobstore.StatusInProgress || j.WorkerID != ownerA || !j.LeaseExpiresAt.Equal(l.ExpiresAt) {
			t.Fatalf("claimed job: %+v", j)
		}
	}
	_, err = s.ClaimNext(ctx, ownerA, long)
	wantErr(t, "claim next with nothing queued", err, jobstore.ErrNoJob)
}

func testRenew(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()

	t.Run("current token", func(t *testing.T) {
		submit(t, s, "renew-ok")
		l := claim(t, s, "renew-ok", ownerA, long)
		exp, err := s.Renew(ctx, l.Token, 2*long)
		if err != nil {
			t.Fatalf("renew: %v", err)
		}
		wantUTC(t, "renewed expiry", exp)
		if !exp.After(l.ExpiresAt) {
			t.Fatalf("renewed expiry %v not after %v", exp, l.ExpiresAt)
		}
		j := get(t, s, "renew-ok")
		if j.Generation != 1 || j.WorkerID != ownerA || !j.LeaseExpiresAt.Equal(exp) {
			t.Fatalf("renewed job: %+v", j)
		}
		if d := j.LeaseExpiresAt.Sub(j.UpdatedAt); d < 2*long-time.Millisecond || d > 2*long+time.Second {
			t.Fatalf("expiry - updated_at = %v, want %v", d, 2*long)
		}
	})

	// Each case prepares a job and returns the token to renew with.
	refused := []struct {
		name  string
		setup func(t *testing.T, id string) fencing.Token
	}{
		{"old generation", func(t *testing.T, id string) fencing.Token {
			l := claim(t, s, id, ownerA, long)
			reassign(t, s, id, ownerB)
			return l.Token
		}},
		{"old generation, current owner", func(t *testing.T, id string) fencing.Token {
			claim(t, s, id, ownerA, long)
			reassign(t, s, id, ownerB)
			return tok(id, ownerB, 1)
		}},
		{"wrong owner", func(t *testing.T, id string) fencing.Token {
			claim(t, s, id, ownerA, long)
			return tok(id, ownerB, 1)
		}},
		{"restarted owner", func(t *testing.T, id string) fencing.Token {
			claim(t, s, id, ownerA, long)
			return tok(id, ownerA2, 1)
		}},
		{"future generation", func(t *testing.T, id string) fencing.Token {
			claim(t, s, id, ownerA, long)
			return tok(id, ownerA, 2)
		}},
		{"expired lease", func(t *testing.T, id string) fencing.Token {
			l := claim(t, s, id, ownerA, short)
			time.Sleep(expiredWait)
			return l.Token
		}},
		{"committed job", func(t *testing.T, id string) fencing.Token {
			l := claim(t, s, id, ownerA, long)
			if err := s.Commit(ctx, l.Token, result("done")); err != nil {
				t.Fatal(err)
			}
			return l.Token
		}},
		{"failed job", func(t *testing.T, id string) fencing.Token {
			l := claim(t, s, id, ownerA, long)
			if err := s.Fail(ctx, l.Token, jobstore.Failure{Reason: "broken"}); err != nil {
				t.Fatal(err)
			}
			return l.Token
		}},
		{"requeued job", func(t *testing.T, id string) fencing.Token {
			l := claim(t, s, id, ownerA, long)
			if err := s.Fail(ctx, l.Token, jobstore.Failure{Reason: "released", Requeue: true}); err != nil {
				t.Fatal(err)
			}
			return l.Token
		}},
		{"queued job", func(t *testing.T, id string) fencing.Token {
			return tok(id, ownerA, 1)
		}},
	}
	for i, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("renew-%d", i)
			submit(t, s, id)
			tk := tc.setup(t, id)
			before := get(t, s, id)
			_, err := s.Renew(ctx, tk, long)
			wantErr(t, "renew", err, fencing.ErrStale)
			wantUnchanged(t, "refused renewal", before, get(t, s, id))
		})
	}

	t.Run("unknown job", func(t *testing.T) {
		_, err := s.Renew(ctx, tok("nope", ownerA, 1), long)
		wantErr(t, "renew", err, jobstore.ErrNotFound)
	})
}

func testCommit(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()

	t.Run("accepted once", func(t *testing.T) {
		submit(t, s, "c1")
		l := claim(t, s, "c1", ownerA, long)
		if err := s.Commit(ctx, l.Token, result("first")); err != nil {
			t.Fatalf("commit: %v", err)
		}
		j := get(t, s, "c1")
		if j.Status != jobstore.StatusSucceeded || j.CompletedBy != ownerA || j.Generation != 1 ||
			!jsonEqual(j.Result, result("first")) {
			t.Fatalf("committed job: %+v (result %s)", j, j.Result)
		}
		err := s.Commit(ctx, l.Token, result("second"))
		wantErr(t, "second commit", err, fencing.ErrStale)
		wantUnchanged(t, "second commit", j, get(t, s, "c1"))
	})

	t.Run("stale tokens", func(t *testing.T) {
		submit(t, s, "c2")
		la := claim(t, s, "c2", ownerA, long)
		lb := reassign(t, s, "c2", ownerB)
		before := get(t, s, "c2")
		for _, tk := range []fencing.Token{
			la.Token,              // old generation
			tok("c2", ownerB, 1),  // old generation, current owner
			tok("c2", ownerA, 2),  // current generation, old owner
			tok("c2", ownerA2, 2), // restarted agent
			tok("c2", ownerB, 3),  // future generation
			tok("c2", "", 2),      // no owner
			tok("c2", ownerB, 0),  // generation 0
			tok("c2", ownerB, -1), // negative generation
		} {
			err := s.Commit(ctx, tk, result("stale"))
			wantErr(t, "commit with "+tk.String(), err, fencing.ErrStale)
		}
		wantUnchanged(t, "stale commits", before, get(t, s, "c2"))
		if err := s.Commit(ctx, lb.Token, result("current")); err != nil {
			t.Fatalf("commit with the current token: %v", err)
		}
		j := get(t, s, "c2")
		if j.CompletedBy != ownerB || !jsonEqual(j.Result, result("current")) {
			t.Fatalf("committed job: %+v", j)
		}
		err := s.Commit(ctx, la.Token, result("late"))
		wantErr(t, "late stale commit", err, fencing.ErrStale)
		wantUnchanged(t, "late stale commit", j, get(t, s, "c2"))
	})

	t.Run("expired lease not yet reclaimed", func(t *testing.T) {
		// Only a grant to someone else makes a token stale; an expired lease
		// that nobody took over still commits.
		submit(t, s, "c3")
		l := claim(t, s, "c3", ownerA, short)
		time.Sleep(expiredWait)
		if err := s.Commit(ctx, l.Token, result("late but current")); err != nil {
			t.Fatalf("commit: %v", err)
		}
	})

	t.Run("empty result", func(t *testing.T) {
		submit(t, s, "c4")
		l := claim(t, s, "c4", ownerA, long)
		if err := s.Commit(ctx, l.Token, nil); err != nil {
			t.Fatalf("commit: %v", err)
		}
		if j := get(t, s, "c4"); j.Status != jobstore.StatusSucceeded || j.Result != nil {
			t.Fatalf("committed job: %+v", j)
		}
	})

	t.Run("invalid result", func(t *testing.T) {
		submit(t, s, "c5")
		l := claim(t, s, "c5", ownerA, long)
		before := get(t, s, "c5")
		err := s.Commit(ctx, l.Token, json.RawMessage(`{not json`))
		if err == nil || errors.Is(err, fencing.ErrStale) {
			t.Fatalf("commit of invalid json: %v", err)
		}
		wantUnchanged(t, "invalid commit", before, get(t, s, "c5"))
	})

	t.Run("unknown job", func(t *testing.T) {
		err := s.Commit(ctx, tok("nope", ownerA, 1), result("x"))
		wantErr(t, "commit", err, jobstore.ErrNotFound)
	})
}

func testReassign(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "r")
	la := claim(t, s, "r", ownerA, long)
	lb := reassign(t, s, "r", ownerB)
	if lb.Token != tok("r", ownerB, 2) {
		t.Fatalf("reassigned token %v", lb.Token)
	}
	wantUTC(t, "lease expiry", lb.ExpiresAt)
	j := get(t, s, "r")
	if j.Status != jobstore.StatusInProgress || j.Generation != 2 || j.WorkerID != ownerB ||
		!j.LeaseExpiresAt.Equal(lb.ExpiresAt) {
		t.Fatalf("reassigned job: %+v", j)
	}

	// The old token is stale for every fenced write.
	before := get(t, s, "r")
	old := la.Token
	_, err := s.Renew(ctx, old, long)
	wantErr(t, "renew with the old token", err, fencing.ErrStale)
	err = s.RegisterArtifact(ctx, old, artifact(old, "late.png", "aa"))
	wantErr(t, "artifact with the old token", err, fencing.ErrStale)
	err = s.Commit(ctx, old, result("old"))
	wantErr(t, "commit with the old token", err, fencing.ErrStale)
	err = s.Fail(ctx, old, jobstore.Failure{Reason: "old"})
	wantErr(t, "fail with the old token", err, fencing.ErrStale)
	err = s.Fail(ctx, old, jobstore.Failure{Reason: "old", Requeue: true})
	wantErr(t, "requeue with the old token", err, fencing.ErrStale)
	wantUnchanged(t, "old token writes", before, get(t, s, "r"))

	// The new one works.
	if _, err := s.Renew(ctx, lb.Token, long); err != nil {
		t.Fatalf("renew with the new token: %v", err)
	}
	if err := s.RegisterArtifact(ctx, lb.Token, artifact(lb.Token, "new.png", "bb")); err != nil {
		t.Fatalf("artifact with the new token: %v", err)
	}

	// Reassigning to the same owner still raises the generation and makes
	// that owner's previous token stale.
	lb2 := reassign(t, s, "r", ownerB)
	if lb2.Token != tok("r", ownerB, 3) {
		t.Fatalf("second reassignment token %v", lb2.Token)
	}
	err = s.Commit(ctx, lb.Token, result("b at g2"))
	wantErr(t, "commit with the same owner's previous token", err, fencing.ErrStale)
	if err := s.Commit(ctx, lb2.Token, result("b at g3")); err != nil {
		t.Fatalf("commit: %v", err)
	}
	_, err = s.Reassign(ctx, "r", ownerC, long)
	wantErr(t, "reassign a succeeded job", err, jobstore.ErrConflict)

	// A queued job can be reassigned (granted) too.
	submit(t, s, "q")
	lq := reassign(t, s, "q", ownerC)
	if lq.Token != tok("q", ownerC, 1) {
		t.Fatalf("reassigned queued job token %v", lq.Token)
	}

	submit(t, s, "f")
	lf := claim(t, s, "f", ownerA, long)
	if err := s.Fail(ctx, lf.Token, jobstore.Failure{Reason: "broken"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Reassign(ctx, "f", ownerC, long)
	wantErr(t, "reassign a failed job", err, jobstore.ErrConflict)
	_, err = s.Reassign(ctx, "nope", ownerC, long)
	wantErr(t, "reassign an unknown job", err, jobstore.ErrNotFound)
}

func testReclaimExpired(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "expiring")
	submit(t, s, "held")
	submit(t, s, "queued")
	lh := claim(t, s, "held", ownerB, long)
	toks, err := s.ReclaimExpired(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 0 {
		t.Fatalf("reclaimed %v while no lease had expired", toks)
	}

	le := claim(t, s, "expiring", ownerA, short)
	time.Sleep(expiredWait)
	heldBefore := get(t, s, "held")
	queuedBefore := get(t, s, "queued")
	toks, err = s.ReclaimExpired(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(toks, []fencing.Token{le.Token}) {
		t.Fatalf("reclaimed %v, want [%v]", toks, le.Token)
	}
	j := get(t, s, "expiring")
	if j.Status != jobstore.StatusQueued || j.Generation != 2 || j.WorkerID != "" || !j.LeaseExpiresAt.IsZero() {
		t.Fatalf("reclaimed job: %+v", j)
	}
	wantUnchanged(t, "reclaim", heldBefore, get(t, s, "held"))
	wantUnchanged(t, "reclaim", queuedBefore, get(t, s, "queued"))

	_, err = s.Renew(ctx, le.Token, long)
	wantErr(t, "renew of a reclaimed lease", err, fencing.ErrStale)
	err = s.Commit(ctx, le.Token, result("late"))
	wantErr(t, "commit of a reclaimed lease", err, fencing.ErrStale)
	if _, err := s.Renew(ctx, lh.Token, long); err != nil {
		t.Fatalf("renew of an unexpired lease: %v", err)
	}

	toks, err = s.ReclaimExpired(ctx, 10)
	if err != nil || len(toks) != 0 {
		t.Fatalf("second reclaim: %v, %v", toks, err)
	}
	// The next grant raises the generation again.
	l := claim(t, s, "expiring", ownerC, long)
	if l.Token.Generation != 3 {
		t.Fatalf("claim after reclaim: generation %d, want 3", l.Token.Generation)
	}
}

func testReclaimLimit(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	var want []fencing.Token
	for i := range 5 {
		id := fmt.Sprintf("l%d", i)
		submit(t, s, id)
		want = append(want, claim(t, s, id, ownerA, short).Token)
	}
	time.Sleep(expiredWait)
	var got []fencing.Token
	for _, lim := range []int{2, 2} {
		toks, err := s.ReclaimExpired(ctx, lim)
		if err != nil {
			t.Fatal(err)
		}
		if len(toks) != lim {
			t.Fatalf("reclaim with limit %d returned %d tokens", lim, len(toks))
		}
		got = append(got, toks...)
	}
	// Zero means no limit.
	toks, err := s.ReclaimExpired(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, toks...)
	if len(got) != len(want) {
		t.Fatalf("reclaimed %d tokens, want %d", len(got), len(want))
	}
	seen := map[fencing.Token]bool{}
	for _, tk := range got {
		seen[tk] = true
	}
	for _, tk := range want {
		if !seen[tk] {
			t.Fatalf("token %v not reclaimed (got %v)", tk, got)
		}
	}
}

func testFail(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()

	t.Run("failed", func(t *testing.T) {
		submit(t, s, "f1")
		l := claim(t, s, "f1", ownerA, long)
		if err := s.Fail(ctx, l.Token, jobstore.Failure{Reason: "phone unplugged"}); err != nil {
			t.Fatalf("fail: %v", err)
		}
		j := get(t, s, "f1")
		if j.Status != jobstore.StatusFailed || j.FailReason != "phone unplugged" || j.Generation != 1 {
			t.Fatalf("failed job: %+v", j)
		}
		err := s.Commit(ctx, l.Token, result("after fail"))
		wantErr(t, "commit after fail", err, fencing.ErrStale)
		err = s.Fail(ctx, l.Token, jobstore.Failure{Reason: "again"})
		wantErr(t, "second fail", err, fencing.ErrStale)
		_, err = s.Claim(ctx, "f1", ownerB, long)
		wantErr(t, "claim of a failed job", err, jobstore.ErrConflict)
		wantUnchanged(t, "writes after fail", j, get(t, s, "f1"))
		if got := get(t, s, "f1").FailReason; got != "phone unplugged" {
			t.Fatalf("fail reason %q", got)
		}
	})

	t.Run("requeued", func(t *testing.T) {
		submit(t, s, "f2")
		l := claim(t, s, "f2", ownerA, long)
		if err := s.Fail(ctx, l.Token, jobstore.Failure{Reason: "draining", Requeue: true}); err != nil {
			t.Fatalf("requeue: %v", err)
		}
		j := get(t, s, "f2")
		if j.Status != jobstore.StatusQueued || j.WorkerID != "" || j.Generation != 2 || !j.LeaseExpiresAt.IsZero() || j.NotBefore.IsZero() {
			t.Fatalf("requeued job: %+v", j)
		}
		err := s.Commit(ctx, l.Token, result("after requeue"))
		wantErr(t, "commit after requeue", err, fencing.ErrStale)
		_, err = s.Renew(ctx, l.Token, long)
		wantErr(t, "renew after requeue", err, fencing.ErrStale)
		next, err := s.ClaimNext(ctx, ownerB, long)
		if err != nil {
			t.Fatal(err)
		}
		if next.Token != tok("f2", ownerB, 3) {
			t.Fatalf("claim after requeue: %v", next.Token)
		}
	})

	t.Run("stale", func(t *testing.T) {
		submit(t, s, "f3")
		la := claim(t, s, "f3", ownerA, long)
		reassign(t, s, "f3", ownerB)
		before := get(t, s, "f3")
		for _, requeue := range []bool{false, true} {
			err := s.Fail(ctx, la.Token, jobstore.Failure{Reason: "stale", Requeue: requeue})
			wantErr(t, "fail with the old token", err, fencing.ErrStale)
		}
		wantUnchanged(t, "stale fail", before, get(t, s, "f3"))
	})

	t.Run("unknown job", func(t *testing.T) {
		err := s.Fail(ctx, tok("nope", ownerA, 1), jobstore.Failure{Reason: "x"})
		wantErr(t, "fail", err, jobstore.ErrNotFound)
	})
}

func artifact(tk fencing.Token, name, sha string) jobstore.ArtifactRecord {
	return jobstore.ArtifactRecord{
		Name:        name,
		Key:         tk.ObjectKey(name),
		Size:        int64(len(name)) * 1000,
		SHA256:      sha,
		ContentType: "image/png",
		ETag:        "etag-" + sha,
	}
}

func testArtifacts(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "a")
	la := claim(t, s, "a", ownerA, long)

	rec := artifact(la.Token, "screen.png", "sha-a")
	// Identity fields of the record are ignored: the token's are stored.
	in := rec
	in.JobID, in.Generation, in.Owner = "other", 99, ownerC
	if err := s.RegisterArtifact(ctx, la.Token, in); err != nil {
		t.Fatalf("register: %v", err)
	}
	list := func(gen int64) []jobstore.ArtifactRecord {
		t.Helper()
		as, err := s.Artifacts(ctx, "a", gen)
		if err != nil {
			t.Fatalf("list generation %d: %v", gen, err)
		}
		return as
	}
	got := list(1)
	if len(got) != 1 {
		t.Fatalf("generation 1 has %d artifacts", len(got))
	}
	wantUTC(t, "artifact created_at", got[0].CreatedAt)
	want := rec
	want.JobID, want.Generation, want.Owner, want.CreatedAt = "a", 1, ownerA, got[0].CreatedAt
	if got[0] != want {
		t.Fatalf("artifact\n got %+v\nwant %+v", got[0], want)
	}

	// The same name again: idempotent with the same content, else a conflict.
	if err := s.RegisterArtifact(ctx, la.Token, rec); err != nil {
		t.Fatalf("re-register identical: %v", err)
	}
	err := s.RegisterArtifact(ctx, la.Token, artifact(la.Token, "screen.png", "sha-other"))
	wantErr(t, "register another sha256 under the same name", err, jobstore.ErrConflict)
	if got := list(1); len(got) != 1 || got[0].SHA256 != "sha-a" {
		t.Fatalf("generation 1 after duplicates: %+v", got)
	}
	if err := s.RegisterArtifact(ctx, la.Token, artifact(la.Token, "ui.xml", "sha-ui")); err != nil {
		t.Fatal(err)
	}
	if got := list(1); len(got) != 2 {
		t.Fatalf("generation 1 has %d artifacts, want 2", len(got))
	}
	if err := s.RegisterArtifact(ctx, la.Token, artifact(la.Token, "../escape", "x")); err == nil {
		t.Fatal("register with an unsafe name succeeded")
	}

	// After reassignment only the new token registers, under its generation.
	lb := reassign(t, s, "a", ownerB)
	err = s.RegisterArtifact(ctx, la.Token, artifact(la.Token, "late.png", "sha-late"))
	wantErr(t, "register with the old token", err, fencing.ErrStale)
	if got := list(1); len(got) != 2 {
		t.Fatalf("generation 1 changed after a stale registration: %+v", got)
	}
	if got := list(2); len(got) != 0 {
		t.Fatalf("generation 2 starts with %+v", got)
	}
	if err := s.RegisterArtifact(ctx, lb.Token, artifact(lb.Token, "screen.png", "sha-b")); err != nil {
		t.Fatalf("register the same name in generation 2: %v", err)
	}
	got = list(2)
	if len(got) != 1 || got[0].Owner != ownerB || got[0].Generation != 2 || got[0].SHA256 != "sha-b" ||
		got[0].Key != lb.Token.ObjectKey("screen.png") {
		t.Fatalf("generation 2: %+v", got)
	}

	if err := s.Commit(ctx, lb.Token, result("done")); err != nil {
		t.Fatal(err)
	}
	err = s.RegisterArtifact(ctx, lb.Token, artifact(lb.Token, "after.png", "sha-after"))
	wantErr(t, "register after commit", err, fencing.ErrStale)
	if got := list(2); len(got) != 1 {
		t.Fatalf("generation 2 changed after commit: %+v", got)
	}

	err = s.RegisterArtifact(ctx, tok("nope", ownerA, 1), artifact(tok("nope", ownerA, 1), "x.png", "x"))
	wantErr(t, "register on an unknown job", err, jobstore.ErrNotFound)
	_, err = s.Artifacts(ctx, "nope", 1)
	wantErr(t, "list an unknown job", err, jobstore.ErrNotFound)
}

type event struct {
	verb     string
	owner    string
	gen      int64
	accepted bool
}

func events(t *testing.T, s sqlstore.Lab, id string) []event {
	t.Helper()
	evs, err := s.WriteEvents(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []event
	var last jobstore.WriteEvent
	for i, e := range evs {
		if e.JobID != id {
			t.Fatalf("event of job %s listed for %s", e.JobID, id)
		}
		wantUTC(t, "event time", e.At)
		// IDs give the listing order. Times follow it only for attempts
		// that do not overlap, so concurrent ones are not checked here.
		if i > 0 && e.ID <= last.ID {
			t.Fatalf("events out of order: %+v then %+v", last, e)
		}
		last = e
		out = append(out, event{e.Verb, e.Owner, e.Generation, e.Accepted})
	}
	return out
}

func testWriteEvents(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "w")
	ignore := func(error) {}
	la := claim(t, s, "w", ownerA, long)
	_, err := s.Claim(ctx, "w", ownerB, long)
	ignore(err)
	_, err = s.Renew(ctx, la.Token, long)
	ignore(err)
	lb := reassign(t, s, "w", ownerB)
	_, err = s.Renew(ctx, la.Token, long)
	ignore(err)
	ignore(s.RegisterArtifact(ctx, la.Token, artifact(la.Token, "a.png", "1")))
	ignore(s.RegisterArtifact(ctx, lb.Token, artifact(lb.Token, "b.png", "2")))
	ignore(s.RegisterArtifact(ctx, lb.Token, artifact(lb.Token, "b.png", "3"))) // conflict
	ignore(s.Commit(ctx, la.Token, result("a")))
	ignore(s.Fail(ctx, la.Token, jobstore.Failure{Reason: "a", Requeue: true}))
	ignore(s.Commit(ctx, lb.Token, result("b")))
	ignore(s.Commit(ctx, lb.Token, result("b again")))
	_, err = s.Reassign(ctx, "w", ownerC, long)
	ignore(err)

	want := []event{
		{jobstore.VerbClaim, ownerA, 1, true},
		{jobstore.VerbClaim, ownerB, 1, false},
		{jobstore.VerbRenew, ownerA, 1, true},
		{jobstore.VerbReassign, ownerB, 2, true},
		{jobstore.VerbRenew, ownerA, 1, false},
		{jobstore.VerbArtifact, ownerA, 1, false},
		{jobstore.VerbArtifact, ownerB, 2, true},
		{jobstore.VerbArtifact, ownerB, 2, false},
		{jobstore.VerbResult, ownerA, 1, false},
		{jobstore.VerbFail, ownerA, 1, false},
		{jobstore.VerbResult, ownerB, 2, true},
		{jobstore.VerbResult, ownerB, 2, false},
		{jobstore.VerbReassign, ownerC, 2, false},
	}
	if got := events(t, s, "w"); !reflect.DeepEqual(got, want) {
		t.Fatalf("write events of w:\n got %v\nwant %v", got, want)
	}
	evs, err := s.WriteEvents(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].At.Before(evs[i-1].At) {
			t.Fatalf("sequential attempts recorded back in time: %+v then %+v", evs[i-1], evs[i])
		}
	}

	// Reclaim records the token taken away; requeue and the next grant too.
	submit(t, s, "x")
	lx := claim(t, s, "x", ownerA, short)
	time.Sleep(expiredWait)
	if _, err := s.ReclaimExpired(ctx, 0); err != nil {
		t.Fatal(err)
	}
	ly := claim(t, s, "x", ownerB, long)
	if err := s.Fail(ctx, ly.Token, jobstore.Failure{Reason: "release", Requeue: true}); err != nil {
		t.Fatal(err)
	}
	want = []event{
		{jobstore.VerbClaim, ownerA, 1, true},
		{jobstore.VerbReclaim, ownerA, 1, true},
		{jobstore.VerbClaim, ownerB, 3, true},
		{jobstore.VerbFail, ownerB, 3, true},
	}
	if lx.Token.Generation != 1 || ly.Token.Generation != 3 {
		t.Fatalf("generations %d, %d", lx.Token.Generation, ly.Token.Generation)
	}
	if got := events(t, s, "x"); !reflect.DeepEqual(got, want) {
		t.Fatalf("write events of x:\n got %v\nwant %v", got, want)
	}

	// Attempts on unknown jobs are recorded too.
	ignore(s.Commit(ctx, tok("ghost", ownerA, 1), result("boo")))
	want = []event{{jobstore.VerbResult, ownerA, 1, false}}
	if got := events(t, s, "ghost"); !reflect.DeepEqual(got, want) {
		t.Fatalf("write events of ghost:\n got %v\nwant %v", got, want)
	}
}

// testCommitRace: every job has been claimed by an old owner and reassigned
// to a new one; then many writers commit at once per job, some with the
// current token, most with stale ones. Exactly one result per job is
// accepted, always the current owner's, and every attempt is recorded.
func testCommitRace(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	const (
		jobs    = 20
		writers = 16 // per job
	)
	type attempt struct {
		tok     fencing.Token
		current bool
	}
	var (
		all   [][]attempt
		newOf = map[string]fencing.Token{}
	)
	for i := range jobs {
		id := fmt.Sprintf("race-%02d", i)
		submit(t, s, id)
		old := claim(t, s, id, ownerA, long).Token
		cur := reassign(t, s, id, ownerB).Token
		newOf[id] = cur
		var as []attempt
		for w := range writers {
			switch w % 4 {
			case 0:
				as = append(as, attempt{cur, true})
			case 1:
				as = append(as, attempt{old, false}) // old generation, old owner
			case 2:
				as = append(as, attempt{tok(id, ownerA, 2), false}) // old owner, current generation
			case 3:
				as = append(as, attempt{tok(id, ownerB, 1), false}) // current owner, old generation
			}
		}
		all = append(all, as)
	}

	type outcome struct {
		a   attempt
		w   int
		err error
	}
	results := make(chan outcome, jobs*writers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, as := range all {
		for w, a := range as {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				body := json.RawMessage(fmt.Sprintf(`{"owner": %q, "generation": %d, "writer": %d}`,
					a.tok.Owner, a.tok.Generation, w))
				results <- outcome{a, w, s.Commit(ctx, a.tok, body)}
			}()
		}
	}
	close(start)
	wg.Wait()
	close(results)

	accepted := map[string]int{}
	for o := range results {
		switch {
		case o.err == nil:
			if !o.a.current {
				t.Errorf("stale token %v accepted", o.a.tok)
			}
			accepted[o.a.tok.JobID]++
		case errors.Is(o.err, fencing.ErrStale):
		default:
			t.Errorf("commit %v: unexpected error %v", o.a.tok, o.err)
		}
	}
	for id, cur := range newOf {
		if accepted[id] != 1 {
			t.Errorf("job %s: %d results accepted, want 1", id, accepted[id])
		}
		j := get(t, s, id)
		var stored struct {
			Owner      string
			Generation int64
		}
		if err := json.Unmarshal(j.Result, &stored); err != nil {
			t.Fatalf("job %s result %s: %v", id, j.Result, err)
		}
		if j.Status != jobstore.StatusSucceeded || j.CompletedBy != cur.Owner || j.Generation != cur.Generation ||
			stored.Owner != cur.Owner || stored.Generation != cur.Generation {
			t.Errorf("job %s: %+v, result %s; want the result of %v", id, j, j.Result, cur)
		}
		var results, acc int
		for _, e := range events(t, s, id) {
			if e.verb != jobstore.VerbResult {
				continue
			}
			results++
			if e.accepted {
				acc++
				if e.owner != cur.Owner || e.gen != cur.Generation {
					t.Errorf("job %s: accepted result event %+v, want %v", id, e, cur)
				}
			}
		}
		if results != writers || acc != 1 {
			t.Errorf("job %s: %d result events (%d accepted), want %d (1)", id, results, acc, writers)
		}
	}
}

// testReassignRace: the old owner registers an artifact and commits while
// the job is being reassigned. Whichever lands first decides, and the store
// agrees with what each caller was told: the commit is accepted exactly when
// the reassignment is refused, and an artifact is listed exactly when its
// registration was accepted.
func testReassignRace(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	const jobs = 20
	type outcome struct {
		artifact, commit, reassign error
	}
	out := make([]outcome, jobs)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range jobs {
		id := fmt.Sprintf("rr-%02d", i)
		submit(t, s, id)
		la := claim(t, s, id, ownerA, long)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			out[i].artifact = s.RegisterArtifact(ctx, la.Token, artifact(la.Token, "x.png", "sha-x"))
			out[i].commit = s.Commit(ctx, la.Token, result("a"))
		}()
		go func() {
			defer wg.Done()
			<-start
			_, out[i].reassign = s.Reassign(ctx, id, ownerB, long)
		}()
	}
	close(start)
	wg.Wait()
	for i, o := range out {
		id := fmt.Sprintf("rr-%02d", i)
		j := get(t, s, id)
		as, err := s.Artifacts(ctx, id, 1)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case o.commit == nil && errors.Is(o.reassign, jobstore.ErrConflict):
			if j.Status != jobstore.StatusSucceeded || j.CompletedBy != ownerA || j.Generation != 1 {
				t.Errorf("%s: commit won but job is %+v", id, j)
			}
		case o.reassign == nil && errors.Is(o.commit, fencing.ErrStale):
			if j.Status != jobstore.StatusInProgress || j.WorkerID != ownerB || j.Generation != 2 || j.Result != nil {
				t.Errorf("%s: reassignment won but job is %+v", id, j)
			}
		default:
			t.Errorf("%s: commit %v, reassign %v", id, o.commit, o.reassign)
		}
		switch {
		case o.artifact == nil && len(as) != 1:
			t.Errorf("%s: registration accepted but generation 1 lists %+v", id, as)
		case o.artifact != nil && !errors.Is(o.artifact, fencing.ErrStale):
			t.Errorf("%s: registration: %v", id, o.artifact)
		case o.artifact != nil && len(as) != 0:
			t.Errorf("%s: registration refused but generation 1 lists %+v", id, as)
		case o.artifact != nil && o.commit == nil:
			t.Errorf("%s: registration refused before an accepted commit", id)
		}
	}
}

// testStaleWriterExperiment reproduces the table of docs/design.md ("Why fencing"): without a
// token every late write of the old owner overwrites the new result; with
// one none does.
func testStaleWriterExperiment(t *testing.T, s sqlstore.Lab) {
	lab, ok := s.(sqlstore.Lab)
	if !ok {
		t.Skip("store has no lab surface (UnfencedCommit)")
	}
	const jobs = 20
	ctx := t.Context()
	unfenced, err := sqlstore.StaleWriterExperiment(ctx, lab, jobs, false)
	if err != nil {
		t.Fatal(err)
	}
	fenced, err := sqlstore.StaleWriterExperiment(ctx, lab, jobs, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v", unfenced)
	t.Logf("%v", fenced)
	if unfenced.StaleAccepted != jobs || unfenced.Overwritten != jobs || unfenced.Survived != 0 {
		t.Errorf("unfenced: %v; want every new result overwritten", unfenced)
	}
	if fenced.StaleAccepted != 0 || fenced.Overwritten != 0 || fenced.Survived != jobs {
		t.Errorf("fenced: %v; want every new result surviving", fenced)
	}

	// The same from the store's own counters.
	counts, err := lab.WriteCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byVerb := map[string]sqlstore.WriteCount{}
	for _, c := range counts {
		byVerb[c.Verb] = c
	}
	want := map[string]sqlstore.WriteCount{
		jobstore.VerbClaim:          {Verb: jobstore.VerbClaim, Accepted: 2 * jobs},
		jobstore.VerbReassign:       {Verb: jobstore.VerbReassign, Accepted: 2 * jobs},
		jobstore.VerbResult:         {Verb: jobstore.VerbResult, Accepted: 2 * jobs, Rejected: jobs},
		jobstore.VerbResultUnfenced: {Verb: jobstore.VerbResultUnfenced, Accepted: jobs},
	}
	if !reflect.DeepEqual(byVerb, want) {
		t.Errorf("write counts %+v, want %+v", byVerb, want)
	}
	// An unfenced write reports whether the job exists.
	if ok, err := lab.UnfencedCommit(ctx, "nope", ownerA, result("x")); err != nil || ok {
		t.Errorf("unfenced commit of an unknown job: %v, %v", ok, err)
	}
}

// BenchmarkCommit measures Commit (fenced) or UnfencedCommit on jobs that
// are in progress, one job per operation, prepared outside the timer.
func BenchmarkCommit(b *testing.B, s sqlstore.Lab, fenced bool) {
	ctx := context.Background()
	run := sqlstore.NewJobID()[:8]
	toks := make([]fencing.Token, b.N)
	for i := range toks {
		id := fmt.Sprintf("bench-%s-%d", run, i)
		if _, err := s.Submit(ctx, jobstore.JobSpec{ID: id, Task: testTask()}); err != nil {
			b.Fatal(err)
		}
		l, err := s.Claim(ctx, id, ownerA, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		toks[i] = l.Token
	}
	body := result("bench")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tk := toks[i]
		if fenced {
			if err := s.Commit(ctx, tk, body); err != nil {
				b.Fatal(err)
			}
		} else if ok, err := s.UnfencedCommit(ctx, tk.JobID, tk.Owner, body); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}
