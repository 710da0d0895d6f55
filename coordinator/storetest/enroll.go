package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/protocol"
)

var enrollTests = []struct {
	name string
	fn   func(t *testing.T, s sqlstore.Lab)
}{
	{"EnrollOnce", testEnrollOnce},
	{"EnrollOnceUnderConcurrency", testEnrollOnceUnderConcurrency},
	{"EnrollExpiresOnTheDatabaseClock", testEnrollExpiresOnTheDatabaseClock},
	{"EnrollRevoke", testEnrollRevoke},
}

func enrollStore(t *testing.T, s sqlstore.Lab) jobstore.EnrollStore {
	t.Helper()
	e, ok := s.(jobstore.EnrollStore)
	if !ok {
		t.Fatalf("%T does not implement jobstore.EnrollStore", s)
	}
	return e
}

// testEnrollOnce: a code is redeemed once, binding the public key; a
// second redeem and an unknown code are refused by name.
func testEnrollOnce(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	es := enrollStore(t, s)
	e, err := es.CreateEnrollment(ctx, "pc-1", "hash-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if e.AgentID != "pc-1" || e.CodeHash != "hash-1" || !e.UsedAt.IsZero() || e.PublicKey != "" || e.ExpiresAt.Sub(e.CreatedAt).Round(time.Second) != time.Hour {
		t.Fatalf("created %+v", e)
	}
	got, err := es.RedeemEnrollment(ctx, "hash-1", "UKEY1")
	if err != nil || got.AgentID != "pc-1" || got.PublicKey != "UKEY1" || got.UsedAt.IsZero() {
		t.Fatalf("redeem: %+v, %v", got, err)
	}
	if _, err := es.RedeemEnrollment(ctx, "hash-1", "UKEY2"); !errors.Is(err, jobstore.ErrEnrollmentUsed) {
		t.Fatalf("second redeem: %v, want ErrEnrollmentUsed", err)
	}
	if _, err := es.RedeemEnrollment(ctx, "no-such-hash", "UKEY2"); !errors.Is(err, jobstore.ErrEnrollmentUnknown) {
		t.Fatalf("unknown code: %v, want ErrEnrollmentUnknown", err)
	}
	if _, err := es.CreateEnrollment(ctx, "pc 1", "hash-2", time.Hour); err == nil {
		t.Fatal("an invalid agent id was enrolled")
	}
	for _, ttl := range []time.Duration{0, -time.Second, jobstore.MaxEnrollmentTTL + time.Second} {
		if _, err := es.CreateEnrollment(ctx, "pc-1", "hash-3", ttl); err == nil {
			t.Fatalf("expiry %s accepted", ttl)
		}
	}
}

// testEnrollOnceUnderConcurrency: of 16 redeems of one code at once,
// exactly one succeeds and the key it bound is the one stored.
func testEnrollOnceUnderConcurrency(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	es := enrollStore(t, s)
	if _, err := es.CreateEnrollment(ctx, "pc-1", "hash-c", time.Hour); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		wins  []string
		start = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			key := fmt.Sprintf("UKEY%d", i)
			_, err := es.RedeemEnrollment(ctx, "hash-c", key)
			switch {
			case err == nil:
				mu.Lock()
				wins = append(wins, key)
				mu.Unlock()
			case !errors.Is(err, jobstore.ErrEnrollmentUsed):
				t.Errorf("redeem %d: %v, want success or ErrEnrollmentUsed", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(wins) != 1 {
		t.Fatalf("%d redeems succeeded (%v), want 1", len(wins), wins)
	}
	keys, err := es.RevokedKeys(ctx)
	if err != nil || len(keys) != 0 {
		t.Fatalf("revoked keys before any revoke: %v, %v", keys, err)
	}
	if _, err := es.RevokeAgent(ctx, "pc-1"); err != nil {
		t.Fatal(err)
	}
	keys, err = es.RevokedKeys(ctx)
	if _, ok := keys[wins[0]]; err != nil || len(keys) != 1 || !ok {
		t.Fatalf("revoked keys %v, %v; want the winner's %s alone", keys, err, wins[0])
	}
}

// testEnrollExpiresOnTheDatabaseClock: a code's expiry is set and judged
// by the database clock: a code past its expiry is refused as expired,
// while a longer one stays good.
func testEnrollExpiresOnTheDatabaseClock(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	es := enrollStore(t, s)
	e, err := es.CreateEnrollment(ctx, "pc-1", "hash-short", short)
	if err != nil {
		t.Fatal(err)
	}
	if d := e.ExpiresAt.Sub(e.CreatedAt); d < short-time.Millisecond || d > short+time.Millisecond {
		t.Fatalf("expires %s after creation on the database clock, want %s", d, short)
	}
	if _, err := es.CreateEnrollment(ctx, "pc-2", "hash-long", time.Hour); err != nil {
		t.Fatal(err)
	}
	time.Sleep(expiredWait) // as the suite's leases: past short on the database clock
	if _, err := es.RedeemEnrollment(ctx, "hash-short", "UKEY-late"); !errors.Is(err, jobstore.ErrEnrollmentExpired) {
		t.Fatalf("redeem after the expiry: %v, want ErrEnrollmentExpired", err)
	}
	if _, err := es.RedeemEnrollment(ctx, "hash-long", "UKEY-2"); err != nil {
		t.Fatalf("the code that has an hour left: %v", err)
	}
}

// testEnrollRevoke: revoking an agent ends the attempt of its in-progress
// jobs as an infrastructure failure with cause agent_revoked (retried),
// drains it, refuses its unused codes and new codes for it, lists it and
// its redeemed key as revoked, and keeps the first revocation time.
func testEnrollRevoke(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	es := enrollStore(t, s)
	if _, err := es.CreateEnrollment(ctx, "agent-a", "hash-a1", time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := es.CreateEnrollment(ctx, "agent-a", "hash-a2", time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := es.CreateEnrollment(ctx, "agent-b", "hash-b1", time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ hash, key string }{{"hash-a1", "UKEYA"}, {"hash-b1", "UKEYB"}} {
		if _, err := es.RedeemEnrollment(ctx, c.hash, c.key); err != nil {
			t.Fatal(err)
		}
	}
	devs := []protocol.Device{phone("A1", "Pixel 7")}
	hello(t, s, ownerA, devs...)
	submitPolicy(t, s, "revoked-job", 3, 0)
	la, err := claimFor(t, s, ownerA, 2, devs...)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := es.RevokeAgent(ctx, "agent-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 1 || toks[0] != la.Token {
		t.Fatalf("revoke took %v, want %v", toks, la.Token)
	}
	if j := get(t, s, la.Token.JobID); j.Status != jobstore.StatusQueued || j.Generation != la.Token.Generation+1 || j.WorkerID != "" {
		t.Fatalf("the revoked agent's job: %+v", j)
	}
	want := []classified{{jobstore.VerbReclaim, ownerA, 1, protocol.FailClassInfrastructure, jobstore.CauseAgentRevoked}}
	if got := attemptEnds(t, s, la.Token.JobID); !reflect.DeepEqual(got, want) {
		t.Fatalf("classified events %+v, want %+v", got, want)
	}
	if a, err := s.GetAgent(ctx, "agent-a"); err != nil || !a.Draining {
		t.Fatalf("revoked agent %+v, %v: want draining", a, err)
	}
	if _, err := es.RedeemEnrollment(ctx, "hash-a2", "UKEYA2"); !errors.Is(err, jobstore.ErrAgentRevoked) {
		t.Fatalf("the revoked agent's unused code: %v, want ErrAgentRevoked", err)
	}
	if _, err := es.CreateEnrollment(ctx, "agent-a", "hash-a3", time.Hour); !errors.Is(err, jobstore.ErrAgentRevoked) {
		t.Fatalf("a new code for the revoked agent: %v, want ErrAgentRevoked", err)
	}
	agents, err := es.RevokedAgents(ctx)
	first := agents["agent-a"]
	if err != nil || len(agents) != 1 || first.IsZero() {
		t.Fatalf("revoked agents %v, %v", agents, err)
	}
	keys, err := es.RevokedKeys(ctx)
	if err != nil || !reflect.DeepEqual(keys, map[string]time.Time{"UKEYA": first}) {
		t.Fatalf("revoked keys %v, %v; want UKEYA at %v", keys, err, first)
	}
	if toks, err := es.RevokeAgent(ctx, "agent-a"); err != nil || len(toks) != 0 {
		t.Fatalf("second revoke: %v, %v", toks, err)
	}
	if again, _ := es.RevokedAgents(ctx); !again["agent-a"].Equal(first) {
		t.Fatalf("second revoke moved the time from %v to %v", first, again["agent-a"])
	}
}
