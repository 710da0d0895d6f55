package coordinator

import (
	"fmt"
	"testing"
	"time"
)

// TestBudget: each agent has its own bucket of burst requests refilled at
// rate per second; the first refusal of a run is the one answered; past
// maxBuckets, full buckets are forgotten and, when none is, new agents
// share one bucket, so the buckets held stay bounded.
func TestBudget(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	b := newBudget(10, 2)
	b.now = func() time.Time { return now }
	for i := range 2 {
		if ok, _ := b.allow("pc-a"); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	if ok, first := b.allow("pc-a"); ok || !first {
		t.Fatalf("past the burst: allowed %v, first refusal %v", ok, first)
	}
	if ok, first := b.allow("pc-a"); ok || first {
		t.Fatalf("second refusal: allowed %v, first %v", ok, first)
	}
	if ok, _ := b.allow("pc-b"); !ok {
		t.Fatal("another agent refused for pc-a's spending")
	}
	now = now.Add(100 * time.Millisecond) // one token back
	if ok, _ := b.allow("pc-a"); !ok {
		t.Fatal("refilled token refused")
	}
	if ok, first := b.allow("pc-a"); ok || !first {
		t.Fatalf("a new run of refusals: allowed %v, first %v", ok, first)
	}

	// Every bucket spent: new agents share the overflow bucket.
	b = newBudget(1, 1)
	b.now = func() time.Time { return now }
	for i := range maxBuckets {
		b.allow(fmt.Sprintf("pc-%d", i))
	}
	if ok, _ := b.allow("pc-new-1"); !ok {
		t.Fatal("the overflow bucket's first request refused")
	}
	if ok, _ := b.allow("pc-new-2"); ok {
		t.Fatal("a second new agent past maxBuckets did not share the overflow bucket")
	}
	if len(b.buckets) != maxBuckets {
		t.Fatalf("%d buckets held, want %d", len(b.buckets), maxBuckets)
	}
	// Once they refill, they are forgotten for new agents.
	now = now.Add(time.Second)
	if ok, _ := b.allow("pc-new-3"); !ok || len(b.buckets) != 1 {
		t.Fatalf("after a refill: allowed %v, %d buckets", ok, len(b.buckets))
	}

	var none *budget
	if ok, _ := none.allow("pc-a"); !ok {
		t.Fatal("no budget refused a request")
	}
}

func TestOwnInbox(t *testing.T) {
	t.Parallel()
	for reply, want := range map[string]bool{
		"_INBOX.pc-a.abc.1":       true,
		"_INBOX.pc-a.x":           true,
		"_INBOX.pc-a":             false,
		"_INBOX.pc-a.":            false,
		"_INBOX.pc-ab.x":          false,
		"_INBOX.pc-b.x":           false,
		"edge.v1.agent.pc-a.x":    false,
		"_INBOX_edgecoord.pc-a.x": false,
	} {
		if got := ownInbox("pc-a", reply); got != want {
			t.Errorf("ownInbox(pc-a, %q) = %v, want %v", reply, got, want)
		}
	}
}

// TestKnownAgentsLabel: refusals of an agent the store does not know are
// labelled "unknown", so agent ids chosen by senders make no new series.
func TestKnownAgentsLabel(t *testing.T) {
	t.Parallel()
	var k knownAgents
	if got := k.label("pc-a"); got != unknownAgent {
		t.Fatalf("label before any list: %q", got)
	}
	k.set([]string{"pc-a"})
	k.add("pc-b")
	for id, want := range map[string]string{"pc-a": "pc-a", "pc-b": "pc-b", "pc-c": unknownAgent} {
		if got := k.label(id); got != want {
			t.Errorf("label(%s) = %q, want %q", id, got, want)
		}
	}
}
