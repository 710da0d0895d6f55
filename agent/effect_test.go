package agent_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

const effectKey = "order-4711/submit"

// effectTask taps "submit" as an effect, then presses a key.
func effectTask() protocol.Task {
	return protocol.Task{Steps: []protocol.Step{
		{Op: protocol.OpLaunch, Package: "com.example.shop"},
		{Op: protocol.OpTap, X: 80, Y: 200, Effect: &protocol.EffectSpec{Key: effectKey}},
		{Op: protocol.OpKey, Key: "KEYCODE_BACK"},
	}}
}

// effectCount sums how many operations of the effect step every phone
// received.
func effectCount(phones ...*capture.Simulated) int {
	n := 0
	for _, p := range phones {
		n += p.EffectCounts()[effectKey]
	}
	return n
}

func (s *system) effect(key string) jobstore.EffectRecord {
	s.t.Helper()
	r, err := s.store.GetEffect(s.ctx, key)
	if err != nil {
		s.t.Fatalf("get effect %s: %v", key, err)
	}
	return r
}

// wantObject checks that key is stored with the stamps of tok.
func (s *system) wantObject(key string, tok fencing.Token) {
	s.t.Helper()
	obj, err := s.s3.Stat(s.ctx, key)
	if err != nil {
		s.t.Fatalf("stat %s: %v", key, err)
	}
	if obj.Token != tok {
		s.t.Fatalf("%s stamps = %+v, want %+v", key, obj.Token, tok)
	}
}

// TestEffectReassignedBeforeReceipt: the job's
// effect step has run on agent A's phone, and the job is reassigned to B
// before A recorded the receipt. B does not run the step again: the intent
// is in doubt, B attaches what its phone shows and the job ends needing a
// decision, with the evidence on the intent. A person's "done" then lets
// the job finish without the step.
func TestEffectReassignedBeforeReceipt(t *testing.T) {
	leakCheck(t)
	sys := newSystem(t, 3*time.Second)
	_, phoneA := sys.startAgentWith("pc-a", agentSetup{})
	// The screenshot A takes after the step, for its receipt, hangs.
	phoneA.SetLatency(protocol.OpScreenshot, time.Minute)
	job, err := sys.store.Submit(sys.ctx, jobstore.JobSpec{Task: effectTask()})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the effect step to run on A", func() bool { return effectCount(phoneA) == 1 })
	held := sys.effect(effectKey)
	tokA := fencing.Token{JobID: job.ID, Owner: held.Owner, Generation: held.Generation}
	if held.State != protocol.EffectReserved || held.JobID != job.ID || !strings.HasPrefix(held.Owner, "pc-a/") || held.Generation != 1 {
		t.Fatalf("before the reassignment: %+v", held)
	}

	_, phoneB := sys.startAgentWith("pc-b", agentSetup{})
	var lb jobstore.Lease
	testenv.Eventually(t, 10*time.Second, "reassignment to B", func() bool {
		lb, err = sys.coord.Reassign(sys.ctx, job.ID, "pc-b", true)
		return err == nil
	})
	done := sys.waitJob(job.ID, func(j jobstore.Job) bool { return jobstore.Finished(j.Status) }, "the job to stop")
	if !jobstore.NeedsDecision(done) || !strings.Contains(done.FailReason, effectKey) || done.Generation != lb.Token.Generation {
		t.Fatalf("job %s (%s) at g%d, want NEEDS_DECISION at g%d", done.Status, done.FailReason, done.Generation, lb.Token.Generation)
	}
	if n := effectCount(phoneA, phoneB); n != 1 {
		t.Fatalf("the effect step reached the phones %d times, want 1 (A %v, B %v)", n, phoneA.EffectCounts(), phoneB.EffectCounts())
	}
	r := sys.effect(effectKey)
	if r.State != protocol.EffectInDoubt || r.Owner != tokA.Owner || r.Generation != tokA.Generation || r.Receipt != nil {
		t.Fatalf("intent %+v, want in doubt, held by A, no receipt", r)
	}
	// The evidence: what B's phone showed, stored under B's generation.
	if len(r.Evidence) != 2 {
		t.Fatalf("evidence %v, want a screenshot and a UI dump", r.Evidence)
	}
	for i, ext := range []string{".png", ".xml"} {
		k := r.Evidence[i]
		if !strings.HasPrefix(k, lb.Token.ObjectKey("effect-")) || !strings.HasSuffix(k, "-doubt"+ext) {
			t.Fatalf("evidence key %q", k)
		}
		sys.wantObject(k, lb.Token)
	}
	// B's operation log is registered too; it shows the step was not run.
	arts, err := sys.store.Artifacts(sys.ctx, job.ID, lb.Token.Generation)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, a := range arts {
		names = append(names, a.Name)
	}
	if !slices.Contains(names, capture.OpLogName) {
		t.Fatalf("B registered %v, want its operation log", names)
	}

	// A person decides it happened: the job runs again and skips the step.
	if _, requeued, err := sys.store.ResolveEffect(sys.ctx, effectKey, jobstore.ResolveDone, "the order is in the shop"); err != nil || !requeued {
		t.Fatalf("resolve: requeued=%v, %v", requeued, err)
	}
	sys.coord.Kick()
	final := sys.waitJob(job.ID, func(j jobstore.Job) bool { return j.Status == jobstore.StatusSucceeded }, "the job to finish")
	if n := effectCount(phoneA, phoneB); n != 1 {
		t.Fatalf("after the decision the effect step reached the phones %d times, want 1", n)
	}
	var res struct {
		Effects map[string]protocol.EffectReceipt `json:"effects"`
	}
	if err := json.Unmarshal(final.Result, &res); err != nil || res.Effects[effectKey].Note != "the order is in the shop" {
		t.Fatalf("result %s: %v; want the person's receipt", final.Result, err)
	}
}

// TestEffectReassignedAfterReceipt: the job is
// reassigned after A ran the effect step and recorded its receipt. B skips
// the step, reuses A's receipt, and finishes the job.
func TestEffectReassignedAfterReceipt(t *testing.T) {
	leakCheck(t)
	sys := newSystem(t, 3*time.Second)
	_, phoneA := sys.startAgentWith("pc-a", agentSetup{})
	// The step after the effect hangs on A.
	phoneA.SetLatency(protocol.OpKey, time.Minute)
	job, err := sys.store.Submit(sys.ctx, jobstore.JobSpec{Task: effectTask()})
	if err != nil {
		t.Fatal(err)
	}
	var r jobstore.EffectRecord
	testenv.Eventually(t, 20*time.Second, "A's receipt", func() bool {
		rec, err := sys.store.GetEffect(sys.ctx, effectKey)
		r = rec
		return err == nil && rec.State == protocol.EffectDone
	})
	tokA := fencing.Token{JobID: job.ID, Owner: r.Owner, Generation: r.Generation}
	rcA, err := r.StepReceipt()
	if err != nil || rcA == nil || rcA.Outcome != protocol.ReceiptOK || rcA.Owner != tokA.Owner || rcA.Generation != 1 || len(rcA.Artifacts) != 2 {
		t.Fatalf("A's receipt %+v, %v", rcA, err)
	}
	for _, k := range rcA.Artifacts {
		if !strings.HasPrefix(k, tokA.ObjectKey("effect-")) || !strings.Contains(k, "-after.") {
			t.Fatalf("receipt artifact %q", k)
		}
		sys.wantObject(k, tokA)
	}

	_, phoneB := sys.startAgentWith("pc-b", agentSetup{})
	var lb jobstore.Lease
	testenv.Eventually(t, 10*time.Second, "reassignment to B", func() bool {
		lb, err = sys.coord.Reassign(sys.ctx, job.ID, "pc-b", true)
		return err == nil
	})
	done := sys.waitJob(job.ID, func(j jobstore.Job) bool {
		return jobstore.Finished(j.Status)
	}, "the job to end")
	if done.Status != jobstore.StatusSucceeded || done.CompletedBy != lb.Token.Owner || done.Generation != lb.Token.Generation {
		t.Fatalf("job %s (%s) by %s at g%d, want SUCCEEDED by B at g%d", done.Status, done.FailReason, done.CompletedBy, done.Generation, lb.Token.Generation)
	}
	if a, b := phoneA.EffectCounts()[effectKey], phoneB.EffectCounts()[effectKey]; a != 1 || b != 0 {
		t.Fatalf("effect step on A %d times, on B %d times; want 1 and 0", a, b)
	}
	// B ran the other steps.
	if ops := phoneOps(phoneB); !slices.Contains(ops, protocol.OpLaunch) || !slices.Contains(ops, protocol.OpKey) || slices.Contains(ops, protocol.OpTap) {
		t.Fatalf("B's phone did %v, want launch and key and no tap", ops)
	}
	var res struct {
		Effects map[string]protocol.EffectReceipt `json:"effects"`
	}
	if err := json.Unmarshal(done.Result, &res); err != nil {
		t.Fatalf("result %s: %v", done.Result, err)
	}
	got, ok := res.Effects[effectKey]
	if !ok || len(res.Effects) != 1 || got.Owner != rcA.Owner || got.Generation != rcA.Generation || !slices.Equal(got.Artifacts, rcA.Artifacts) || !got.At.Equal(rcA.At) {
		t.Fatalf("result effects %v, want A's receipt %+v", slices.Collect(maps.Keys(res.Effects)), rcA)
	}
	if r := sys.effect(effectKey); r.State != protocol.EffectDone || r.Generation != tokA.Generation || r.Reservations != 1 {
		t.Fatalf("intent after B: %+v", r)
	}
}

func phoneOps(p *capture.Simulated) []string {
	var ops []string
	for _, c := range p.History() {
		ops = append(ops, c.Op)
	}
	return ops
}
