package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// The effects part of the suite: intents of effect steps (at most one
// reservation per key, receipts reused, nothing re-run on doubt, a person's
// decision) and the transactional outbox.
var effectTests = []struct {
	name string
	fn   func(t *testing.T, s sqlstore.Lab)
}{
	{"EffectReserveAndReceipt", testEffectReserveAndReceipt},
	{"EffectInDoubtAndRetry", testEffectInDoubtAndRetry},
	{"EffectResolveDone", testEffectResolveDone},
	{"EffectReceiptError", testEffectReceiptError},
	{"EffectSameTokenTwice", testEffectSameTokenTwice},
	{"EffectFenced", testEffectFenced},
	{"EffectMarkInDoubt", testEffectMarkInDoubt},
	{"EffectReserveRace", testEffectReserveRace},
	{"EffectReassignRace", testEffectReassignRace},
	{"EffectList", testEffectList},
	{"OutboxCommit", testOutboxCommit},
	{"OutboxFail", testOutboxFail},
	{"OutboxDelivery", testOutboxDelivery},
}

func intent(key string) jobstore.EffectIntent {
	return jobstore.EffectIntent{Key: key, Step: 2, Op: protocol.OpTap}
}

func reserve(t *testing.T, s sqlstore.Lab, tk fencing.Token, key string) jobstore.EffectRecord {
	t.Helper()
	r, err := s.ReserveEffect(t.Context(), tk, intent(key))
	if err != nil {
		t.Fatalf("reserve %s by %s: %v", key, tk, err)
	}
	if r.Key != key || r.Kind != jobstore.EffectKindStep {
		t.Fatalf("reserve %s: got %+v", key, r)
	}
	return r
}

func getEffect(t *testing.T, s sqlstore.Lab, key string) jobstore.EffectRecord {
	t.Helper()
	r, err := s.GetEffect(t.Context(), key)
	if err != nil {
		t.Fatalf("get effect %s: %v", key, err)
	}
	return r
}

func wantState(t *testing.T, what string, r jobstore.EffectRecord, state string, holder fencing.Token) {
	t.Helper()
	if r.State != state || r.JobID != holder.JobID || r.Owner != holder.Owner || r.Generation != holder.Generation {
		t.Fatalf("%s: got %s held by %s@%s#g%d, want %s held by %s", what, r.State, r.JobID, r.Owner, r.Generation, state, holder)
	}
}

func okReceipt(tk fencing.Token) protocol.EffectReceipt {
	return protocol.EffectReceipt{
		Outcome: protocol.ReceiptOK, At: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		Artifacts: []string{tk.ObjectKey("effect-002-after.png"), tk.ObjectKey("effect-002-after.xml")},
	}
}

func receiptOf(t *testing.T, r jobstore.EffectRecord) *protocol.EffectReceipt {
	t.Helper()
	rc, err := r.StepReceipt()
	if err != nil {
		t.Fatalf("decode receipt of %s: %v", r.Key, err)
	}
	return rc
}

// effectEvents returns the details of the effect attempts of a job.
func effectEvents(t *testing.T, s sqlstore.Lab, id string) []string {
	t.Helper()
	evs, err := s.WriteEvents(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Verb == jobstore.VerbEffect || e.Verb == jobstore.VerbResolve {
			acc := "refused"
			if e.Accepted {
				acc = "accepted"
			}
			out = append(out, fmt.Sprintf("%s g%d %s %s", e.Verb, e.Generation, acc, e.Detail))
		}
	}
	return out
}

func testEffectReserveAndReceipt(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "e")
	la := claim(t, s, "e", ownerA, long)

	r := reserve(t, s, la.Token, "order-1/submit")
	if !r.HeldBy(la.Token) || r.Reservations != 1 || r.Receipt != nil || r.Step != 2 || r.Op != protocol.OpTap {
		t.Fatalf("first reservation: %+v", r)
	}
	wantUTC(t, "created_at", r.CreatedAt)
	// The same token asking again (its reply was lost) still holds it.
	if r := reserve(t, s, la.Token, "order-1/submit"); !r.HeldBy(la.Token) || r.Reservations != 1 {
		t.Fatalf("repeated reservation: %+v", r)
	}

	rc := okReceipt(la.Token)
	done, err := s.RecordEffectReceipt(ctx, la.Token, "order-1/submit", rc)
	if err != nil {
		t.Fatalf("receipt: %v", err)
	}
	wantState(t, "after the receipt", done, protocol.EffectDone, la.Token)
	wantUTC(t, "done_at", done.DoneAt)
	got := receiptOf(t, done)
	if got.Outcome != protocol.ReceiptOK || got.Owner != ownerA || got.Generation != la.Token.Generation ||
		!slices.Equal(got.Artifacts, rc.Artifacts) || !got.At.Equal(rc.At) {
		t.Fatalf("stored receipt %+v, want %+v with the token", got, rc)
	}
	// A repeated receipt (its reply was lost) is answered the same.
	again, err := s.RecordEffectReceipt(ctx, la.Token, "order-1/submit", rc)
	if err != nil || again.State != protocol.EffectDone {
		t.Fatalf("repeated receipt: %+v, %v", again, err)
	}

	// The next generation finds it done, with the receipt: it skips the step.
	lb := reassign(t, s, "e", ownerB)
	rb := reserve(t, s, lb.Token, "order-1/submit")
	wantState(t, "reserved by the next generation", rb, protocol.EffectDone, la.Token)
	if rb.HeldBy(lb.Token) || receiptOf(t, rb).Generation != la.Token.Generation {
		t.Fatalf("next generation got %+v", rb)
	}
	rep, err := rb.Reply()
	if err != nil || rep.Holds(lb.Token) || rep.Receipt == nil || rep.Receipt.Owner != ownerA {
		t.Fatalf("reply %+v, %v", rep, err)
	}
	// The new generation cannot write a receipt over it.
	_, err = s.RecordEffectReceipt(ctx, lb.Token, "order-1/submit", okReceipt(lb.Token))
	wantErr(t, "receipt of an intent the token does not hold", err, jobstore.ErrConflict)
	if r := getEffect(t, s, "order-1/submit"); receiptOf(t, r).Generation != la.Token.Generation {
		t.Fatalf("receipt replaced: %+v", r)
	}

	want := []string{
		"effect g1 accepted reserve order-1/submit: reserved",
		"effect g1 accepted reserve order-1/submit: reserved",
		"effect g1 accepted receipt order-1/submit: done",
		"effect g1 refused receipt order-1/submit: unchanged",
		"effect g2 accepted reserve order-1/submit: done",
		"effect g2 refused receipt order-1/submit: unchanged",
	}
	if got := effectEvents(t, s, "e"); !slices.Equal(got, want) {
		t.Fatalf("write events:\n%s\nwant\n%s", got, want)
	}
}

func testEffectInDoubtAndRetry(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "d")
	la := claim(t, s, "d", ownerA, long)
	reserve(t, s, la.Token, "msg-7")
	// The step ran; the lease is taken away before the receipt.
	lb := reassign(t, s, "d", ownerB)

	// Read before anyone wrote it down: already in doubt.
	wantState(t, "read after the reassignment", getEffect(t, s, "msg-7"), protocol.EffectInDoubt, la.Token)
	_, err := s.RecordEffectReceipt(ctx, la.Token, "msg-7", okReceipt(la.Token))
	wantErr(t, "receipt of the stale token", err, fencing.ErrStale)

	// The new generation does not get it: in doubt, held by the old token.
	rb := reserve(t, s, lb.Token, "msg-7")
	wantState(t, "reservation of the new generation", rb, protocol.EffectInDoubt, la.Token)
	if rb.Reservations != 1 {
		t.Fatalf("reservations = %d, want 1", rb.Reservations)
	}
	_, err = s.ReserveEffect(ctx, la.Token, intent("msg-7"))
	wantErr(t, "reservation of the stale token", err, fencing.ErrStale)

	// Evidence of the new generation, no key twice.
	ev := []string{lb.Token.ObjectKey("effect-002-doubt.png"), lb.Token.ObjectKey("effect-002-doubt.xml")}
	if _, err := s.AddEffectEvidence(ctx, lb.Token, "msg-7", ev[:1]); err != nil {
		t.Fatalf("evidence: %v", err)
	}
	r, err := s.AddEffectEvidence(ctx, lb.Token, "msg-7", ev)
	if err != nil || !slices.Equal(r.Evidence, ev) || r.State != protocol.EffectInDoubt {
		t.Fatalf("evidence: %+v, %v; want %v", r, err, ev)
	}
	_, err = s.AddEffectEvidence(ctx, la.Token, "msg-7", []string{"x"})
	wantErr(t, "evidence of the stale token", err, fencing.ErrStale)
	_, err = s.AddEffectEvidence(ctx, lb.Token, "no-such-key", ev)
	wantErr(t, "evidence of an unknown intent", err, jobstore.ErrEffectNotFound)

	// The job stops needing a decision.
	if err := s.Fail(ctx, lb.Token, jobstore.Failure{Reason: jobstore.ReasonNeedsDecision + ": effect msg-7 is in doubt"}); err != nil {
		t.Fatal(err)
	}
	if j := get(t, s, "d"); !jobstore.NeedsDecision(j) {
		t.Fatalf("job %+v does not need a decision", j)
	}

	// A person says it did not happen: the job is queued again and the
	// next generation runs it.
	res, requeued, err := s.ResolveEffect(ctx, "msg-7", jobstore.ResolveRetry, "checked the outbox: not sent")
	if err != nil || !requeued || res.State != protocol.EffectRetry || res.Resolution != jobstore.ResolveRetry ||
		res.Note != "checked the outbox: not sent" {
		t.Fatalf("resolve retry: %+v requeued=%v, %v", res, requeued, err)
	}
	j := get(t, s, "d")
	if j.Status != jobstore.StatusQueued || j.WorkerID != "" || j.Generation != lb.Token.Generation {
		t.Fatalf("job after resolve: %+v", j)
	}
	_, _, err = s.ResolveEffect(ctx, "msg-7", jobstore.ResolveDone, "")
	wantErr(t, "resolve an intent not in doubt", err, jobstore.ErrConflict)

	lc := claim(t, s, "d", ownerC, long)
	rc := reserve(t, s, lc.Token, "msg-7")
	if !rc.HeldBy(lc.Token) || rc.Reservations != 2 || rc.Receipt != nil || !slices.Equal(rc.Evidence, ev) {
		t.Fatalf("reservation after retry: %+v", rc)
	}
	_, _, err = s.ResolveEffect(ctx, "msg-7", jobstore.ResolveRetry, "")
	wantErr(t, "resolve an intent its current token holds", err, jobstore.ErrConflict)
	_, _, err = s.ResolveEffect(ctx, "nope", jobstore.ResolveRetry, "")
	wantErr(t, "resolve an unknown key", err, jobstore.ErrEffectNotFound)

	evs := effectEvents(t, s, "d")
	if !slices.Contains(evs, "resolve g2 accepted msg-7: retry; job queued again") {
		t.Fatalf("no resolve event in %q", evs)
	}
}

func testEffectResolveDone(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "r")
	la := claim(t, s, "r", ownerA, long)
	reserve(t, s, la.Token, "pay-1")
	lb := reassign(t, s, "r", ownerB)
	if err := s.Fail(ctx, lb.Token, jobstore.Failure{Reason: "something else"}); err != nil {
		t.Fatal(err)
	}
	res, requeued, err := s.ResolveEffect(ctx, "pay-1", jobstore.ResolveDone, "bank statement shows it")
	if err != nil || requeued || res.State != protocol.EffectDone {
		t.Fatalf("resolve done: %+v requeued=%v, %v", res, requeued, err)
	}
	rc := receiptOf(t, res)
	if rc == nil || rc.Outcome != protocol.ReceiptOK || rc.Note != "bank statement shows it" {
		t.Fatalf("receipt of a person's done: %+v", rc)
	}
	// A job that failed for another reason stays failed.
	if j := get(t, s, "r"); j.Status != jobstore.StatusFailed {
		t.Fatalf("job %+v", j)
	}
	_, _, err = s.ResolveEffect(ctx, "pay-1", "maybe", "")
	if err == nil {
		t.Fatal("resolve with an unknown decision accepted")
	}
}

func testEffectReceiptError(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "x")
	la := claim(t, s, "x", ownerA, long)
	reserve(t, s, la.Token, "k")
	r, err := s.RecordEffectReceipt(ctx, la.Token, "k", protocol.EffectReceipt{Outcome: protocol.ReceiptError, Error: "device unplugged"})
	if err != nil {
		t.Fatal(err)
	}
	// A step that failed on the phone may or may not have happened.
	wantState(t, "after an error receipt", r, protocol.EffectInDoubt, la.Token)
	if rc := receiptOf(t, r); rc.Error != "device unplugged" || !r.DoneAt.IsZero() {
		t.Fatalf("error receipt: %+v", r)
	}
	if r := reserve(t, s, la.Token, "k"); r.HeldBy(la.Token) || r.State != protocol.EffectInDoubt {
		t.Fatalf("reservation after an error receipt: %+v", r)
	}
}

func testEffectFenced(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "f")
	la := claim(t, s, "f", ownerA, long)
	lb := reassign(t, s, "f", ownerB)
	before := get(t, s, "f")
	_, err := s.ReserveEffect(ctx, la.Token, intent("f-key"))
	wantErr(t, "reservation of a stale token", err, fencing.ErrStale)
	_, err = s.GetEffect(ctx, "f-key")
	wantErr(t, "the intent after a stale reservation", err, jobstore.ErrEffectNotFound)
	wantUnchanged(t, "stale reservation", before, get(t, s, "f"))
	_, err = s.ReserveEffect(ctx, tok("ghost", ownerA, 1), intent("f-key"))
	wantErr(t, "reservation for an unknown job", err, jobstore.ErrNotFound)
	_, err = s.RecordEffectReceipt(ctx, lb.Token, "f-key", okReceipt(lb.Token))
	wantErr(t, "receipt without a reservation", err, jobstore.ErrConflict)
	if _, err := s.ReserveEffect(ctx, lb.Token, intent("")); err == nil {
		t.Fatal("empty key accepted")
	}
	if _, err := s.ReserveEffect(ctx, lb.Token, intent(protocol.ReservedKeyPrefix+"x")); err == nil {
		t.Fatal("reserved key prefix accepted")
	}
	// A finished job's token reserves nothing either.
	if err := s.Commit(ctx, lb.Token, result("b")); err != nil {
		t.Fatal(err)
	}
	_, err = s.ReserveEffect(ctx, lb.Token, intent("f-key"))
	wantErr(t, "reservation after the result", err, fencing.ErrStale)
	want := []string{
		"effect g1 refused reserve f-key: refused",
		"effect g2 refused receipt f-key: unchanged",
		"effect g2 refused reserve f-key: refused",
	}
	if got := effectEvents(t, s, "f"); !slices.Equal(got, want) {
		t.Fatalf("write events:\n%q\nwant\n%q", got, want)
	}
}

func testEffectMarkInDoubt(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "m1")
	submit(t, s, "m2")
	l1 := claim(t, s, "m1", ownerA, short)
	l2 := claim(t, s, "m2", ownerB, long)
	reserve(t, s, l1.Token, "m1-key")
	reserve(t, s, l2.Token, "m2-key")
	time.Sleep(expiredWait)
	if _, err := s.ReclaimExpired(ctx, 0); err != nil {
		t.Fatal(err)
	}
	n, err := s.MarkEffectsInDoubt(ctx)
	if err != nil || n != 1 {
		t.Fatalf("mark in doubt: %d, %v; want 1", n, err)
	}
	if n, err := s.MarkEffectsInDoubt(ctx); err != nil || n != 0 {
		t.Fatalf("second sweep: %d, %v; want 0", n, err)
	}
	wantState(t, "expired holder", getEffect(t, s, "m1-key"), protocol.EffectInDoubt, l1.Token)
	wantState(t, "current holder", getEffect(t, s, "m2-key"), protocol.EffectReserved, l2.Token)
	stored, err := s.ListEffects(ctx, jobstore.EffectFilter{States: []string{protocol.EffectInDoubt}})
	if err != nil || len(stored) != 1 || stored[0].Key != "m1-key" {
		t.Fatalf("in doubt: %+v, %v", stored, err)
	}
}

// testEffectReserveRace has jobs that share one key reserve it at once,
// each with its current token: exactly one holds it.
func testEffectReserveRace(t *testing.T, s sqlstore.Lab) {
	const n = 8
	var toks []fencing.Token
	for i := range n {
		id := fmt.Sprintf("race-%d", i)
		submit(t, s, id)
		toks = append(toks, claim(t, s, id, fmt.Sprintf("agent-%d/boot", i), long).Token)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		holds []fencing.Token
	)
	start := make(chan struct{})
	for _, tk := range toks {
		wg.Go(func() {
			<-start
			r, err := s.ReserveEffect(t.Context(), tk, intent("shared"))
			if err != nil {
				t.Errorf("reserve by %s: %v", tk, err)
				return
			}
			if r.HeldBy(tk) {
				mu.Lock()
				holds = append(holds, tk)
				mu.Unlock()
			} else if r.State != protocol.EffectReserved {
				t.Errorf("reserve by %s: %s, want reserved by the winner", tk, r.State)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(holds) != 1 {
		t.Fatalf("%d tokens hold the key, want 1: %v", len(holds), holds)
	}
	if r := getEffect(t, s, "shared"); !r.HeldBy(holds[0]) || r.Reservations != 1 {
		t.Fatalf("stored %+v, winner %s", r, holds[0])
	}
}

// testEffectReassignRace races a reservation of the current owner against a
// reassignment, then lets the new owner reserve: never do both hold the key.
func testEffectReassignRace(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	for i := range 20 {
		id := fmt.Sprintf("rr-%d", i)
		key := "rr-key-" + id
		submit(t, s, id)
		la := claim(t, s, id, ownerA, long)
		var (
			wg   sync.WaitGroup
			ra   jobstore.EffectRecord
			aerr error
			lb   jobstore.Lease
		)
		wg.Go(func() { ra, aerr = s.ReserveEffect(ctx, la.Token, intent(key)) })
		var berr error
		wg.Go(func() { lb, berr = s.Reassign(ctx, id, ownerB, long) })
		wg.Wait()
		if berr != nil {
			t.Fatalf("%s: reassign: %v", id, berr)
		}
		rb := reserve(t, s, lb.Token, key)
		aHolds := aerr == nil && ra.HeldBy(la.Token)
		switch {
		case aerr != nil && !errors.Is(aerr, fencing.ErrStale):
			t.Fatalf("%s: reserve by A: %v", id, aerr)
		case aHolds && rb.HeldBy(lb.Token):
			t.Fatalf("%s: both generations hold the key", id)
		case aHolds && rb.State != protocol.EffectInDoubt:
			t.Fatalf("%s: A held it, B got %s, want in_doubt", id, rb.State)
		case !aHolds && !rb.HeldBy(lb.Token):
			t.Fatalf("%s: A was refused, B got %+v, want it held", id, rb)
		}
	}
}

func testEffectList(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "l1")
	submit(t, s, "l2")
	l1 := claim(t, s, "l1", ownerA, long)
	l2 := claim(t, s, "l2", ownerB, long)
	reserve(t, s, l1.Token, "l-a")
	reserve(t, s, l1.Token, "l-b")
	reserve(t, s, l2.Token, "l-c")
	if _, err := s.RecordEffectReceipt(ctx, l1.Token, "l-b", okReceipt(l1.Token)); err != nil {
		t.Fatal(err)
	}
	keys := func(f jobstore.EffectFilter) []string {
		t.Helper()
		rs, err := s.ListEffects(ctx, f)
		if err != nil {
			t.Fatalf("list %+v: %v", f, err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.Key)
		}
		return out
	}
	for _, c := range []struct {
		f    jobstore.EffectFilter
		want []string
	}{
		{jobstore.EffectFilter{}, []string{"l-a", "l-b", "l-c"}},
		{jobstore.EffectFilter{JobID: "l1"}, []string{"l-a", "l-b"}},
		{jobstore.EffectFilter{States: []string{protocol.EffectReserved}}, []string{"l-a", "l-c"}},
		{jobstore.EffectFilter{States: []string{protocol.EffectDone, protocol.EffectInDoubt}}, []string{"l-b"}},
		{jobstore.EffectFilter{Kind: jobstore.EffectKindOutbox}, nil},
		{jobstore.EffectFilter{Limit: 2}, []string{"l-a", "l-b"}},
	} {
		if got := keys(c.f); !slices.Equal(got, c.want) {
			t.Errorf("list %+v: %v, want %v", c.f, got, c.want)
		}
	}
	_, err := s.GetEffect(ctx, "nope")
	wantErr(t, "get unknown effect", err, jobstore.ErrEffectNotFound)
}

type outboxPayload struct {
	Key        string          `json:"key"`
	Event      string          `json:"event"`
	JobID      string          `json:"job_id"`
	Generation int64           `json:"generation"`
	Owner      string          `json:"owner"`
	Status     string          `json:"status"`
	Result     json.RawMessage `json:"result"`
	Reason     string          `json:"reason"`
	Manifest   []string        `json:"manifest"`
}

// testOutboxFail: a failure that ends a job is published like an accepted
// result, in the transaction that accepts it, under a key of its
// generation; a refused failure and a release (requeue) publish nothing.
func testOutboxFail(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "f")
	la := claim(t, s, "f", ownerA, long)
	// A release for reassignment is not a failure of the job.
	if err := s.FailOutbox(ctx, la.Token, jobstore.Failure{Reason: "assign not accepted", Requeue: true}, jobstore.OutboxFailureKey("f", la.Token.Generation)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetEffect(ctx, jobstore.OutboxFailureKey("f", la.Token.Generation)); !errors.Is(err, jobstore.ErrEffectNotFound) {
		t.Fatalf("outbox of a release: %v", err)
	}
	lb := claim(t, s, "f", ownerB, long)
	key := jobstore.OutboxFailureKey("f", lb.Token.Generation)
	err := s.FailOutbox(ctx, la.Token, jobstore.Failure{Reason: "late"}, key)
	wantErr(t, "stale failure", err, fencing.ErrStale)
	_, err = s.GetEffect(ctx, key)
	wantErr(t, "outbox of a refused failure", err, jobstore.ErrEffectNotFound)

	if err := s.RegisterArtifact(ctx, lb.Token, artifact(lb.Token, "last.png", "sha-last")); err != nil {
		t.Fatal(err)
	}
	if err := s.FailOutbox(ctx, lb.Token, jobstore.Failure{Reason: "step 2 (tap): phone unplugged"}, key); err != nil {
		t.Fatalf("fail: %v", err)
	}
	if j := get(t, s, "f"); j.Status != jobstore.StatusFailed || j.FailReason != "step 2 (tap): phone unplugged" {
		t.Fatalf("job after fail: %+v", j)
	}
	r := getEffect(t, s, key)
	if r.Kind != jobstore.EffectKindOutbox || r.State != protocol.EffectPending || r.JobID != "f" ||
		r.Owner != ownerB || r.Generation != lb.Token.Generation {
		t.Fatalf("outbox row %+v", r)
	}
	var p outboxPayload
	if err := json.Unmarshal(r.Payload, &p); err != nil {
		t.Fatalf("payload %s: %v", r.Payload, err)
	}
	if p.Key != key || p.Event != jobstore.OutboxEventFailed || p.JobID != "f" || p.Generation != lb.Token.Generation ||
		p.Owner != ownerB || p.Status != jobstore.StatusFailed || p.Reason != "step 2 (tap): phone unplugged" || !slices.Equal(p.Manifest, []string{lb.Token.ObjectKey("last.png")}) {
		t.Fatalf("payload %+v", p)
	}
	evs := events(t, s, "f")
	if last := evs[len(evs)-1]; last.verb != jobstore.VerbFail || !last.accepted {
		t.Fatalf("last event %+v", last)
	}

	// An infrastructure failure with attempts left is retried, not
	// published; the one that uses the last attempt is, with every cause.
	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "g", Task: testTask(), MaxAttempts: 2}); err != nil {
		t.Fatal(err)
	}
	infraFail := jobstore.Failure{Reason: "adb gone", Class: protocol.FailClassInfrastructure, Cause: protocol.CauseAdbServerGone}
	for i := range 2 {
		l := claim(t, s, "g", ownerA, long)
		key := jobstore.OutboxFailureKey("g", l.Token.Generation)
		if err := s.FailOutbox(ctx, l.Token, infraFail, key); err != nil {
			t.Fatal(err)
		}
		_, err := s.GetEffect(ctx, key)
		if i == 0 {
			wantErr(t, "outbox of a retried attempt", err, jobstore.ErrEffectNotFound)
			continue
		}
		var p outboxPayload
		if err != nil || json.Unmarshal(getEffect(t, s, key).Payload, &p) != nil ||
			p.Status != jobstore.StatusFailed || p.Reason != "attempts exhausted (2 of 2): g1 adb_server_gone: adb gone; g3 adb_server_gone: adb gone" {
			t.Fatalf("outbox of the last attempt: %+v, %v", p, err)
		}
	}
}

func testOutboxCommit(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "o")
	la := claim(t, s, "o", ownerA, long)
	lb := reassign(t, s, "o", ownerB)
	key := jobstore.OutboxKey("o")
	err := s.CommitOutbox(ctx, la.Token, result("stale"), key)
	wantErr(t, "stale commit", err, fencing.ErrStale)
	_, err = s.GetEffect(ctx, key)
	wantErr(t, "outbox of a refused commit", err, jobstore.ErrEffectNotFound)

	for _, n := range []string{"b.png", "a.png"} {
		if err := s.RegisterArtifact(ctx, lb.Token, artifact(lb.Token, n, "sha-"+n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CommitOutbox(ctx, lb.Token, result("b"), key); err != nil {
		t.Fatalf("commit: %v", err)
	}
	j := get(t, s, "o")
	if j.Status != jobstore.StatusSucceeded || j.CompletedBy != ownerB || !jsonEqual(j.Result, result("b")) {
		t.Fatalf("job after commit: %+v", j)
	}
	r := getEffect(t, s, key)
	if r.Kind != jobstore.EffectKindOutbox || r.State != protocol.EffectPending || r.JobID != "o" ||
		r.Owner != ownerB || r.Generation != lb.Token.Generation || r.Attempts != 0 {
		t.Fatalf("outbox row %+v", r)
	}
	var p outboxPayload
	if err := json.Unmarshal(r.Payload, &p); err != nil {
		t.Fatalf("payload %s: %v", r.Payload, err)
	}
	arts, err := s.Artifacts(ctx, "o", lb.Token.Generation)
	if err != nil {
		t.Fatal(err)
	}
	var manifest []string
	for _, a := range arts {
		manifest = append(manifest, a.Key)
	}
	if p.Key != key || p.Event != "result" || p.JobID != "o" || p.Generation != lb.Token.Generation || p.Owner != ownerB ||
		!jsonEqual(p.Result, result("b")) || !slices.Equal(p.Manifest, manifest) {
		t.Fatalf("payload %+v, want manifest %v", p, manifest)
	}
	// The result write is recorded as always.
	evs := events(t, s, "o")
	if last := evs[len(evs)-1]; last.verb != jobstore.VerbResult || !last.accepted {
		t.Fatalf("last event %+v", last)
	}
	// A job with no artifacts and a null result.
	submit(t, s, "o2")
	l2 := claim(t, s, "o2", ownerA, long)
	if err := s.CommitOutbox(ctx, l2.Token, nil, jobstore.OutboxKey("o2")); err != nil {
		t.Fatal(err)
	}
	var p2 outboxPayload
	if err := json.Unmarshal(getEffect(t, s, jobstore.OutboxKey("o2")).Payload, &p2); err != nil {
		t.Fatal(err)
	}
	if p2.Manifest == nil || len(p2.Manifest) != 0 || string(p2.Result) != "null" {
		t.Fatalf("payload without artifacts: %+v", p2)
	}
}

func testOutboxDelivery(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "od")
	la := claim(t, s, "od", ownerA, long)
	key := jobstore.OutboxKey("od")
	if err := s.CommitOutbox(ctx, la.Token, result("x"), key); err != nil {
		t.Fatal(err)
	}
	claimOut := func(lease time.Duration) []jobstore.EffectRecord {
		t.Helper()
		rs, err := s.ClaimOutbox(ctx, 10, lease)
		if err != nil {
			t.Fatalf("claim outbox: %v", err)
		}
		return rs
	}
	rs := claimOut(long)
	if len(rs) != 1 || rs[0].Key != key || rs[0].Attempts != 1 || len(rs[0].Payload) == 0 {
		t.Fatalf("first claim: %+v", rs)
	}
	if rs := claimOut(long); len(rs) != 0 {
		t.Fatalf("claimed again while leased: %+v", rs)
	}
	// The reply was lost: due again at once, with the same key.
	if err := s.OutboxFailed(ctx, key, "request timed out", 0); err != nil {
		t.Fatal(err)
	}
	rs = claimOut(short)
	if len(rs) != 1 || rs[0].Key != key || rs[0].Attempts != 2 || rs[0].LastError != "request timed out" {
		t.Fatalf("claim after a failure: %+v", rs)
	}
	// The dispatcher died during the delivery: due again after the lease.
	time.Sleep(expiredWait)
	rs = claimOut(long)
	if len(rs) != 1 || rs[0].Attempts != 3 {
		t.Fatalf("claim after the lease: %+v", rs)
	}
	receipt := json.RawMessage(`{"seq": 42, "duplicate": false}`)
	if err := s.OutboxDelivered(ctx, key, receipt); err != nil {
		t.Fatal(err)
	}
	r := getEffect(t, s, key)
	if r.State != protocol.EffectDone || !jsonEqual(r.Receipt, receipt) || r.DoneAt.IsZero() || r.Attempts != 3 {
		t.Fatalf("delivered: %+v", r)
	}
	if err := s.OutboxDelivered(ctx, key, json.RawMessage(`{"other": 1}`)); err != nil {
		t.Fatalf("second delivery: %v", err)
	}
	if r := getEffect(t, s, key); !jsonEqual(r.Receipt, receipt) {
		t.Fatalf("receipt replaced: %s", r.Receipt)
	}
	if err := s.OutboxFailed(ctx, key, "late failure", 0); err != nil {
		t.Fatal(err)
	}
	if rs := claimOut(0); len(rs) != 0 {
		t.Fatalf("claimed a delivered message: %+v", rs)
	}
	err := s.OutboxDelivered(ctx, "edgecoord/result/none", receipt)
	wantErr(t, "receipt of an unknown message", err, jobstore.ErrEffectNotFound)
	// Step intents are never claimed.
	submit(t, s, "od2")
	l2 := claim(t, s, "od2", ownerA, long)
	reserve(t, s, l2.Token, "not-outbox")
	if rs := claimOut(0); len(rs) != 0 {
		t.Fatalf("claimed: %+v", rs)
	}
}

// testEffectSameTokenTwice: the same token reserving again in another run
// (its job was started twice on the agent) finds the intent in doubt; the
// same run asking again (a lost reply) still holds it.
func testEffectSameTokenTwice(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "t")
	la := claim(t, s, "t", ownerA, long)
	run := func(attempt string) jobstore.EffectIntent {
		in := intent("twice")
		in.Attempt = attempt
		return in
	}
	for range 2 {
		r, err := s.ReserveEffect(ctx, la.Token, run("run-1"))
		if err != nil || !r.HeldBy(la.Token) || r.Attempt != "run-1" {
			t.Fatalf("reservation of run 1: %+v, %v", r, err)
		}
	}
	r, err := s.ReserveEffect(ctx, la.Token, run("run-2"))
	if err != nil || r.HeldBy(la.Token) || r.State != protocol.EffectInDoubt || r.Attempt != "run-1" {
		t.Fatalf("reservation of run 2: %+v, %v; want in doubt, reserved by run 1", r, err)
	}
	_, err = s.RecordEffectReceipt(ctx, la.Token, "twice", okReceipt(la.Token))
	wantErr(t, "receipt of run 1 after run 2 met it", err, jobstore.ErrConflict)
	// Without attempts (an agent that sends none) a repeat is a retry.
	if r := reserve(t, s, la.Token, "no-attempt"); !r.HeldBy(la.Token) {
		t.Fatalf("first: %+v", r)
	}
	if r := reserve(t, s, la.Token, "no-attempt"); !r.HeldBy(la.Token) {
		t.Fatalf("repeat: %+v", r)
	}
}
