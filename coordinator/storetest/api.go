package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// apiTests check what the HTTP API keeps (jobstore.APIStore).
var apiTests = []struct {
	name string
	fn   func(t *testing.T, s sqlstore.Lab)
}{
	{"APITokens", testAPITokens},
	{"APIIdempotency", testAPIIdempotency},
	{"APIIdempotencyRace", testAPIIdempotencyRace},
	{"APIDenials", testAPIDenials},
	{"APIDenialsBounded", testAPIDenialsBounded},
	{"APIJobPage", testAPIJobPage},
}

func apiStore(t *testing.T, s sqlstore.Lab) jobstore.APIStore {
	t.Helper()
	a, ok := s.(jobstore.APIStore)
	if !ok {
		t.Fatalf("%T does not implement jobstore.APIStore", s)
	}
	return a
}

func testAPITokens(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	a := apiStore(t, s)
	h1 := sha256.Sum256([]byte("secret-1"))
	tok, err := a.CreateAPIToken(ctx, jobstore.APIToken{Name: "alice", Hash: h1, Projects: []string{"p1", "p2"}, Scopes: []string{"read", "submit"}})
	if err != nil {
		t.Fatal(err)
	}
	if tok.ID == 0 || tok.Name != "alice" || !slices.Equal(tok.Projects, []string{"p1", "p2"}) || !slices.Equal(tok.Scopes, []string{"read", "submit"}) || tok.CreatedAt.IsZero() || tok.Revoked() {
		t.Fatalf("created %+v", tok)
	}
	if _, err := a.CreateAPIToken(ctx, jobstore.APIToken{Name: "alice", Hash: sha256.Sum256([]byte("other"))}); !errors.Is(err, jobstore.ErrTokenExists) {
		t.Fatalf("same name again: %v, want ErrTokenExists", err)
	}
	got, err := a.APITokenByHash(ctx, h1)
	if err != nil || got.ID != tok.ID || got.Hash != h1 {
		t.Fatalf("by hash: %+v, %v", got, err)
	}
	if _, err := a.APITokenByHash(ctx, sha256.Sum256([]byte("unknown"))); !errors.Is(err, jobstore.ErrTokenNotFound) {
		t.Fatalf("unknown hash: %v", err)
	}
	list, err := a.APITokens(ctx)
	if err != nil || len(list) != 1 || list[0].LastUsedAt.IsZero() {
		t.Fatalf("list after use: %+v, %v (want last_used_at set)", list, err)
	}
	bob, err := a.CreateAPIToken(ctx, jobstore.APIToken{Name: "bob", Hash: sha256.Sum256([]byte("secret-2")), Projects: []string{"p3"}, Scopes: []string{"read"}})
	if err != nil {
		t.Fatal(err)
	}
	// By id, then by name; revoking twice keeps the first time.
	r, err := a.RevokeAPIToken(ctx, fmt.Sprint(bob.ID))
	if err != nil || r.Name != "bob" || !r.Revoked() {
		t.Fatalf("revoke by id: %+v, %v", r, err)
	}
	r2, err := a.RevokeAPIToken(ctx, "bob")
	if err != nil || !r2.RevokedAt.Equal(r.RevokedAt) {
		t.Fatalf("revoke again: %+v, %v (first at %v)", r2, err, r.RevokedAt)
	}
	if _, err := a.RevokeAPIToken(ctx, "nobody"); !errors.Is(err, jobstore.ErrTokenNotFound) {
		t.Fatalf("revoke unknown: %v", err)
	}
	got, err = a.APITokenByHash(ctx, bob.Hash)
	if err != nil || !got.Revoked() {
		t.Fatalf("revoked token by hash: %+v, %v", got, err)
	}
}

func apiSpecs(n int, project string) []jobstore.JobSpec {
	var specs []jobstore.JobSpec
	for i := range n {
		task := testTask()
		task.Device = protocol.DeviceSelector{Serial: fmt.Sprintf("phone-%d", i)}
		specs = append(specs, jobstore.JobSpec{Task: task, Project: project, SubmittedBy: "alice"})
	}
	return specs
}

func replyOf(jobs []jobstore.Job) (json.RawMessage, error) {
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	return json.Marshal(map[string]any{"ids": ids})
}

func idsOf(t *testing.T, reply json.RawMessage) []string {
	t.Helper()
	var doc struct{ IDs []string }
	if err := json.Unmarshal(reply, &doc); err != nil {
		t.Fatalf("reply %s: %v", reply, err)
	}
	return doc.IDs
}

func testAPIIdempotency(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	a := apiStore(t, s)
	tok, err := a.CreateAPIToken(ctx, jobstore.APIToken{Name: "alice", Hash: sha256.Sum256([]byte("x")), Projects: []string{"p"}, Scopes: []string{"submit"}})
	if err != nil {
		t.Fatal(err)
	}
	rec := jobstore.Idempotent{TokenID: tok.ID, Key: "k1", RequestHash: "h1"}
	first, err := a.SubmitIdempotent(ctx, rec, apiSpecs(3, "p"), replyOf)
	if err != nil {
		t.Fatal(err)
	}
	ids := idsOf(t, first.Reply)
	if len(ids) != 3 {
		t.Fatalf("first submit: %s", first.Reply)
	}
	if first.Replayed {
		t.Errorf("the first submit with a key answered as a replay")
	}
	again, err := a.SubmitIdempotent(ctx, rec, apiSpecs(3, "p"), replyOf)
	if err != nil || !slices.Equal(idsOf(t, again.Reply), ids) {
		t.Fatalf("retry: %s, %v; want the ids %v", again.Reply, err, ids)
	}
	if !again.Replayed {
		t.Errorf("a retried submit answered as a create, want a replay")
	}
	page, err := a.ListJobPage(ctx, jobstore.JobPageFilter{})
	if err != nil || len(page.Jobs) != 3 {
		t.Fatalf("after a retried submit: %d jobs, %v; want 3", len(page.Jobs), err)
	}
	if _, err := a.SubmitIdempotent(ctx, jobstore.Idempotent{TokenID: tok.ID, Key: "k1", RequestHash: "h2"}, apiSpecs(1, "p"), replyOf); !errors.Is(err, jobstore.ErrIdempotencyMismatch) {
		t.Fatalf("same key, other body: %v", err)
	}
	got, err := a.Idempotent(ctx, tok.ID, "k1")
	if err != nil || got.RequestHash != "h1" {
		t.Fatalf("stored: %+v, %v", got, err)
	}
	if _, err := a.Idempotent(ctx, tok.ID, "k2"); !errors.Is(err, jobstore.ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
	// A failed submit stores nothing: the key can be used again.
	bad := apiSpecs(2, "p")
	bad[1].ID = ids[0] // in use
	if _, err := a.SubmitIdempotent(ctx, jobstore.Idempotent{TokenID: tok.ID, Key: "k3", RequestHash: "h"}, bad, replyOf); !errors.Is(err, jobstore.ErrConflict) {
		t.Fatalf("submit with an id in use: %v", err)
	}
	if _, err := a.Idempotent(ctx, tok.ID, "k3"); !errors.Is(err, jobstore.ErrNotFound) {
		t.Fatalf("key of a failed submit: %v", err)
	}
	if page, _ := a.ListJobPage(ctx, jobstore.JobPageFilter{}); len(page.Jobs) != 3 {
		t.Fatalf("a failed batch left %d jobs, want 3", len(page.Jobs))
	}
	jobs, err := a.SubmitAll(ctx, apiSpecs(2, "q"))
	if err != nil || len(jobs) != 2 || jobs[0].Project != "q" || jobs[0].SubmittedBy != "alice" {
		t.Fatalf("submit all: %+v, %v", jobs, err)
	}
	// Jobs submitted through the API have their queued event, as those of
	// Submit do (docs/api.md, "Events"); the failed batch none.
	for _, id := range append(ids, jobs[0].ID, jobs[1].ID) {
		evs := listEvents(t, s, jobstore.EventQuery{JobID: id})
		if len(evs) != 1 || evs[0].Type != jobstore.EventQueued || evs[0].Project == "" {
			t.Errorf("events of %s submitted through the API: %+v, want one queued", id, evs)
		}
	}
	if evs := listEvents(t, s, jobstore.EventQuery{}); len(evs) != 5 {
		t.Errorf("%d events after 5 jobs submitted and a failed batch, want 5: %+v", len(evs), evs)
	}
}

func testAPIIdempotencyRace(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	a := apiStore(t, s)
	tok, err := a.CreateAPIToken(ctx, jobstore.APIToken{Name: "alice", Hash: sha256.Sum256([]byte("x")), Projects: []string{"p"}, Scopes: []string{"submit"}})
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		replies []string
		creates int
	)
	for range 8 {
		wg.Go(func() {
			rec, err := a.SubmitIdempotent(ctx, jobstore.Idempotent{TokenID: tok.ID, Key: "same", RequestHash: "h"}, apiSpecs(3, "p"), replyOf)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			replies = append(replies, string(rec.Reply))
			if !rec.Replayed {
				creates++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	page, err := a.ListJobPage(ctx, jobstore.JobPageFilter{})
	if err != nil || len(page.Jobs) != 3 {
		t.Fatalf("8 concurrent submits with one key: %d jobs, %v; want 3", len(page.Jobs), err)
	}
	// Exactly one answer is the create; the others are replays of it.
	if creates != 1 {
		t.Errorf("8 concurrent submits with one key: %d answered as creates, want 1 (the others replays)", creates)
	}
	for _, r := range replies {
		var x, y any
		_ = json.Unmarshal([]byte(r), &x)
		_ = json.Unmarshal([]byte(replies[0]), &y)
		if fmt.Sprint(x) != fmt.Sprint(y) {
			t.Fatalf("replies differ: %s and %s", r, replies[0])
		}
	}
}

func testAPIDenials(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	a := apiStore(t, s)
	if err := a.RecordAPIDenial(ctx, jobstore.APIDenial{TokenName: "alice", Method: "GET", Route: "/api/v1/jobs/j1", JobID: "j1", Project: "b"}); err != nil {
		t.Fatal(err)
	}
	ds, err := a.APIDenials(ctx)
	if err != nil || len(ds) != 1 {
		t.Fatalf("denials: %+v, %v", ds, err)
	}
	d := ds[0]
	if d.TokenName != "alice" || d.Method != "GET" || d.Route != "/api/v1/jobs/j1" || d.JobID != "j1" || d.Project != "b" ||
		d.Kind != jobstore.DenialJob || d.Count != 1 || d.At.IsZero() || d.Window.After(d.At) || d.At.Sub(d.Window) >= jobstore.DenialWindow ||
		!d.Window.Equal(d.Window.Truncate(jobstore.DenialWindow)) {
		t.Fatalf("denial %+v", d)
	}
}

// testAPIDenialsBounded: 10,000 refusals, each naming another job or
// project, as an attacker would send them, are counted in one row per
// token, kind and minute, not one row each.
func testAPIDenialsBounded(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	a := apiStore(t, s)
	const n = 1_000 // a hundred times the rows the bound allows
	tokens := []string{"mallory", "eve"}
	first := time.Now()
	for i := range n {
		d := jobstore.APIDenial{TokenName: tokens[i%2], Method: "GET", Project: fmt.Sprintf("no-such-project-%d", i)}
		if i%3 == 0 {
			d.JobID = fmt.Sprintf("job-%d", i)
			d.Route = "/api/v1/jobs/" + d.JobID
		} else {
			d.Route = "/api/v1/jobs"
		}
		if err := a.RecordAPIDenial(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	minutes := int(time.Since(first)/jobstore.DenialWindow) + 2 // the windows the loop can have touched
	ds, err := a.APIDenials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, d := range ds {
		total += d.Count
		if !slices.Contains(tokens, d.TokenName) || (d.Kind != jobstore.DenialJob && d.Kind != jobstore.DenialProject) {
			t.Fatalf("denial %+v", d)
		}
	}
	if max := len(tokens) * 2 * minutes; len(ds) > max || total != n {
		t.Fatalf("%d refusals made %d rows counting %d, want at most %d rows counting %d", n, len(ds), total, max, n)
	}
	t.Logf("%d refusals: %d rows", n, len(ds))
}

func testAPIJobPage(t *testing.T, s sqlstore.Lab) {
	ctx := context.Background()
	a := apiStore(t, s)
	var want []string // newest first
	for i := range 5 {
		task := testTask()
		task.Device = protocol.DeviceSelector{Serial: fmt.Sprintf("phone-%d", i%2)}
		project := "a"
		if i == 2 {
			project = "b"
		}
		j, err := s.Submit(ctx, jobstore.JobSpec{Task: task, Project: project})
		if err != nil {
			t.Fatal(err)
		}
		if project == "a" {
			want = append([]string{j.ID}, want...)
		}
	}
	var got []string
	f := jobstore.JobPageFilter{Projects: []string{"a"}, Limit: 2}
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		page, err := a.ListJobPage(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			got = append(got, j.ID)
		}
		if pages == 0 {
			// A job submitted between two pages does not shift the pages.
			if _, err := s.Submit(ctx, jobstore.JobSpec{Task: testTask(), Project: "a"}); err != nil {
				t.Fatal(err)
			}
		}
		if page.Next == 0 {
			break
		}
		f.After = page.Next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages of project a: %v, want %v", got, want)
	}
	if page, err := a.ListJobPage(ctx, jobstore.JobPageFilter{Projects: []string{}}); err != nil || len(page.Jobs) != 0 {
		t.Fatalf("no project: %d jobs, %v", len(page.Jobs), err)
	}
	page, err := a.ListJobPage(ctx, jobstore.JobPageFilter{Phone: "phone-1"})
	if err != nil || len(page.Jobs) != 2 {
		t.Fatalf("phone-1: %d jobs, %v; want 2", len(page.Jobs), err)
	}
	page, err = a.ListJobPage(ctx, jobstore.JobPageFilter{Statuses: []string{jobstore.StatusSucceeded}})
	if err != nil || len(page.Jobs) != 0 {
		t.Fatalf("succeeded: %d jobs, %v; want 0", len(page.Jobs), err)
	}
	lease, err := s.ClaimNext(ctx, ownerA, long)
	if err != nil {
		t.Fatal(err)
	}
	page, err = a.ListJobPage(ctx, jobstore.JobPageFilter{AgentID: "agent-a"})
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].ID != lease.Token.JobID {
		t.Fatalf("agent-a: %+v, %v", page.Jobs, err)
	}
}
