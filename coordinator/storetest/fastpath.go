package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// The part of the suite for the optional fast paths of a store
// (jobstore.ManifestCommitter, jobstore.WorkCounter). A store that
// does not implement one skips its tests.
var fastpathTests = []struct {
	name string
	fn   func(t *testing.T, s sqlstore.Lab)
}{
	{"CommitManifest", testCommitManifest},
	{"CommitManifestRace", testCommitManifestRace},
	{"WorkCounter", testWorkCounter},
}

func manifestCommitter(t *testing.T, s sqlstore.Lab) jobstore.ManifestCommitter {
	t.Helper()
	mc, ok := s.(jobstore.ManifestCommitter)
	if !ok {
		t.Skip("the store is not a jobstore.ManifestCommitter")
	}
	return mc
}

func testCommitManifest(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	mc := manifestCommitter(t, s)

	submit(t, s, "m1")
	la := claim(t, s, "m1", ownerA, long)
	if err := s.RegisterArtifact(ctx, la.Token, artifact(la.Token, "screen.png", "sha-1")); err != nil {
		t.Fatal(err)
	}
	lb := reassign(t, s, "m1", ownerB)
	for _, name := range []string{"b-screen.png", "b-ui.xml"} {
		if err := s.RegisterArtifact(ctx, lb.Token, artifact(lb.Token, name, "sha-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	before := get(t, s, "m1")
	for _, tk := range []fencing.Token{la.Token, tok("m1", ownerA, 2), tok("m1", ownerB, 1), tok("m1", ownerB, 3)} {
		keys, err := mc.CommitManifest(ctx, tk, result("stale"))
		wantErr(t, "commit with "+tk.String(), err, fencing.ErrStale)
		if keys != nil {
			t.Fatalf("stale commit returned a manifest %v", keys)
		}
	}
	wantUnchanged(t, "stale commits", before, get(t, s, "m1"))

	keys, err := mc.CommitManifest(ctx, lb.Token, result("current"))
	if err != nil {
		t.Fatalf("commit with the current token: %v", err)
	}
	want := []string{lb.Token.ObjectKey("b-screen.png"), lb.Token.ObjectKey("b-ui.xml")}
	arts, err := s.Artifacts(ctx, "m1", 2)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, a := range arts {
		listed = append(listed, a.Key)
	}
	if !reflect.DeepEqual(keys, want) || !reflect.DeepEqual(keys, listed) {
		t.Fatalf("manifest %v, want %v (Artifacts lists %v)", keys, want, listed)
	}
	j := get(t, s, "m1")
	if j.Status != jobstore.StatusSucceeded || j.CompletedBy != ownerB || !jsonEqual(j.Result, result("current")) {
		t.Fatalf("committed job: %+v", j)
	}
	_, err = mc.CommitManifest(ctx, lb.Token, result("again"))
	wantErr(t, "second commit", err, fencing.ErrStale)
	wantUnchanged(t, "second commit", j, get(t, s, "m1"))

	// Every attempt is recorded, as Commit records it.
	var got []event
	for _, e := range events(t, s, "m1") {
		if e.verb == "result" {
			got = append(got, e)
		}
	}
	wantEv := []event{
		{"result", ownerA, 1, false}, {"result", ownerA, 2, false}, {"result", ownerB, 1, false}, {"result", ownerB, 3, false},
		{"result", ownerB, 2, true}, {"result", ownerB, 2, false},
	}
	if !reflect.DeepEqual(got, wantEv) {
		t.Fatalf("result events\n got %+v\nwant %+v", got, wantEv)
	}

	// A job without artifacts has an empty manifest, not an error.
	submit(t, s, "m2")
	l2 := claim(t, s, "m2", ownerA, long)
	keys, err = mc.CommitManifest(ctx, l2.Token, result("bare"))
	if err != nil || keys == nil || len(keys) != 0 {
		t.Fatalf("commit without artifacts: %v, %v", keys, err)
	}

	_, err = mc.CommitManifest(ctx, tok("nope", ownerA, 1), result("x"))
	wantErr(t, "commit an unknown job", err, jobstore.ErrNotFound)
	if _, err := mc.CommitManifest(ctx, l2.Token, json.RawMessage(`{"broken"`)); err == nil {
		t.Fatal("commit of invalid JSON succeeded")
	}
}

// testCommitManifestRace is testCommitRace through CommitManifest: of many
// concurrent commits with current and stale tokens, exactly one current one
// is accepted per job, with the new owner's manifest.
func testCommitManifestRace(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	mc := manifestCommitter(t, s)
	const (
		jobs    = 10
		writers = 8
	)
	var wg sync.WaitGroup
	type outcome struct {
		cur  bool
		keys []string
		err  error
	}
	results := make(chan outcome, jobs*writers)
	start := make(chan struct{})
	want := map[string]bool{}
	for i := range jobs {
		id := fmt.Sprintf("mrace-%02d", i)
		submit(t, s, id)
		old := claim(t, s, id, ownerA, long).Token
		cur := reassign(t, s, id, ownerB).Token
		if err := s.RegisterArtifact(ctx, cur, artifact(cur, "shot.png", "sha")); err != nil {
			t.Fatal(err)
		}
		want[id] = true
		for w := range writers {
			tk, isCur := old, false
			if w%2 == 0 {
				tk, isCur = cur, true
			}
			wg.Go(func() {
				<-start
				keys, err := mc.CommitManifest(ctx, tk, result(fmt.Sprintf("w%d", w)))
				results <- outcome{isCur, keys, err}
			})
		}
	}
	close(start)
	wg.Wait()
	close(results)
	accepted := 0
	for o := range results {
		switch {
		case o.err == nil:
			if !o.cur {
				t.Fatalf("a stale token was accepted")
			}
			if len(o.keys) != 1 || o.keys[0] == "" {
				t.Fatalf("accepted commit with manifest %v", o.keys)
			}
			accepted++
		default:
			wantErr(t, "losing commit", o.err, fencing.ErrStale)
		}
	}
	if accepted != jobs {
		t.Fatalf("%d commits accepted, want one per job (%d)", accepted, jobs)
	}
	for id := range want {
		j := get(t, s, id)
		if j.Status != jobstore.StatusSucceeded || j.CompletedBy != ownerB {
			t.Fatalf("job %s: %+v", id, j)
		}
	}
}

func testWorkCounter(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	wc, ok := s.(jobstore.WorkCounter)
	if !ok {
		t.Skip("the store is not a jobstore.WorkCounter")
	}
	check := func(what string, queued, expired int64, load map[string]int) {
		t.Helper()
		q, err := wc.QueuedJobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		e, err := wc.ExpiredLeases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l, err := wc.InProgressByOwner(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if q != queued || e != expired || !reflect.DeepEqual(l, load) {
			t.Fatalf("%s: queued %d expired %d load %v, want %d %d %v", what, q, e, l, queued, expired, load)
		}
	}
	check("empty", 0, 0, map[string]int{})
	for i := range 4 {
		submit(t, s, fmt.Sprintf("wc-%d", i))
	}
	check("four queued", 4, 0, map[string]int{})
	// A job not to be granted before an hour from now (a retry's backoff,
	// a schedule's jitter) is not counted: a scheduling round would find
	// nothing to grant for it.
	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "wc-later", Task: testTask(), NotBefore: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	check("four due, one not yet", 4, 0, map[string]int{})
	claim(t, s, "wc-0", ownerA, long)
	// Leases long enough to be counted unexpired on a busy machine, then
	// waited out.
	const brief = 2 * time.Second
	claim(t, s, "wc-1", ownerA, brief)
	claim(t, s, "wc-2", ownerB, brief)
	check("three claimed", 1, 0, map[string]int{ownerA: 2, ownerB: 1})
	testenv.Eventually(t, 30*time.Second, "the two brief leases to expire", func() bool {
		n, err := wc.ExpiredLeases(ctx)
		return err == nil && n == 2
	})
	check("two expired", 1, 2, map[string]int{ownerA: 2, ownerB: 1})
	if _, err := s.ReclaimExpired(ctx, 0); err != nil {
		t.Fatal(err)
	}
	// The two reclaimed jobs wait out their retry backoff before they are
	// counted again.
	testenv.Eventually(t, 30*time.Second, "the reclaimed jobs to be due", func() bool {
		n, err := wc.QueuedJobs(ctx)
		return err == nil && n == 3
	})
	check("reclaimed", 3, 0, map[string]int{ownerA: 1})
	l := reassign(t, s, "wc-0", ownerC)
	if err := s.Commit(ctx, l.Token, result("done")); err != nil {
		t.Fatal(err)
	}
	check("committed", 3, 0, map[string]int{})
}
