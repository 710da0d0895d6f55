package chaos

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uploader"
)

const (
	ownerA = "pc-a/aaaa"
	ownerB = "pc-b/bbbb"
)

func tokOf(owner string, gen int64) fencing.Token {
	return fencing.Token{JobID: "j", Owner: owner, Generation: gen}
}

// op builds a register operation over [call, ret] milliseconds; ret < 0
// means the outcome is unknown (returns at infinity).
func op(client int, call, ret int64, in regInput, out regOutput) porcupine.Operation {
	if ret < 0 {
		ret = 1 << 40
		out.Outcome = outUnknown
	}
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func TestRegisterModel(t *testing.T) {
	submit := op(0, 0, 1, regInput{Op: opSubmit}, regOutput{Outcome: outOK})
	claimA := op(1, 2, 3, regInput{Op: opClaim, Owner: ownerA}, regOutput{Outcome: outOK, Gen: 1})
	reclaimA := op(1, 10, 11, regInput{Op: opReclaim, Tok: tokOf(ownerA, 1)}, regOutput{Outcome: outOK})
	claimB := op(1, 12, 13, regInput{Op: opClaim, Owner: ownerB}, regOutput{Outcome: outOK, Gen: 3})
	commit := func(client int, call, ret int64, tok fencing.Token, outcome string) porcupine.Operation {
		return op(client, call, ret, regInput{Op: opCommit, Tok: tok}, regOutput{Outcome: outcome})
	}
	for _, tc := range []struct {
		name  string
		ops   []porcupine.Operation
		legal bool
	}{
		{"commit by the current owner", []porcupine.Operation{submit, claimA, commit(2, 4, 5, tokOf(ownerA, 1), outOK)}, true},
		{"stale commit refused after a reclaim and a new grant", []porcupine.Operation{submit, claimA, reclaimA, claimB,
			commit(2, 14, 15, tokOf(ownerA, 1), outStale), commit(3, 16, 17, tokOf(ownerB, 3), outOK)}, true},
		{"stale commit accepted after a new grant", []porcupine.Operation{submit, claimA, reclaimA, claimB,
			commit(2, 14, 15, tokOf(ownerA, 1), outOK)}, false},
		{"second commit accepted after success", []porcupine.Operation{submit, claimA,
			commit(2, 4, 5, tokOf(ownerA, 1), outOK), commit(2, 6, 7, tokOf(ownerA, 1), outOK)}, false},
		{"current commit refused", []porcupine.Operation{submit, claimA, commit(2, 4, 5, tokOf(ownerA, 1), outStale)}, false},
		{"commit and reclaim of one lease both accepted", []porcupine.Operation{submit, claimA,
			commit(2, 9, 12, tokOf(ownerA, 1), outOK), reclaimA}, false},
		{"commit overlapping the reclaim, accepted first", []porcupine.Operation{submit, claimA,
			commit(2, 9, 12, tokOf(ownerA, 1), outOK), op(1, 10, 11, regInput{Op: opMaybeReclaim}, regOutput{Outcome: outUnknown})}, true},
		{"unknown commit then another owner's commit", []porcupine.Operation{submit, claimA,
			commit(2, 4, -1, tokOf(ownerA, 1), ""), reclaimA, claimB, commit(3, 14, 15, tokOf(ownerB, 3), outOK)}, true},
		{"unknown commit that must have landed", []porcupine.Operation{submit, claimA,
			commit(2, 4, -1, tokOf(ownerA, 1), ""),
			op(1, 10, 11, regInput{Op: opReclaim, Tok: tokOf(ownerA, 1)}, regOutput{Outcome: outStale}),
			commit(3, 12, 13, tokOf(ownerA, 1), outStale)}, true},
		{"grant that skips a generation", []porcupine.Operation{submit,
			op(1, 2, 3, regInput{Op: opClaim, Owner: ownerA}, regOutput{Outcome: outOK, Gen: 2})}, false},
		{"two grants of one queued job", []porcupine.Operation{submit, claimA,
			op(2, 4, 5, regInput{Op: opClaim, Owner: ownerB}, regOutput{Outcome: outOK, Gen: 2})}, false},
		{"takeover of the current lease", []porcupine.Operation{submit, claimA,
			op(1, 4, 5, regInput{Op: opTakeover, Owner: ownerB, Old: tokOf(ownerA, 1)}, regOutput{Outcome: outOK, Gen: 2}),
			commit(2, 6, 7, tokOf(ownerA, 1), outStale), commit(3, 8, 9, tokOf(ownerB, 2), outOK)}, true},
		{"renewal refused for an expired lease", []porcupine.Operation{submit, claimA,
			op(2, 4, 5, regInput{Op: opRenew, Tok: tokOf(ownerA, 1)}, regOutput{Outcome: outStale})}, true},
		{"renewal accepted for a stale token", []porcupine.Operation{submit, claimA, reclaimA,
			op(2, 12, 13, regInput{Op: opRenew, Tok: tokOf(ownerA, 1)}, regOutput{Outcome: outOK})}, false},
		{"requeue then a new grant", []porcupine.Operation{submit, claimA,
			op(2, 4, 5, regInput{Op: opFail, Tok: tokOf(ownerA, 1), Requeue: true}, regOutput{Outcome: outOK}),
			op(1, 6, 7, regInput{Op: opClaim, Owner: ownerB}, regOutput{Outcome: outOK, Gen: 3}),
			commit(3, 8, 9, tokOf(ownerB, 3), outOK)}, true},
		{"grant after the last attempt was retried", []porcupine.Operation{
			op(0, 0, 1, regInput{Op: opSubmit, Max: 1}, regOutput{Outcome: outOK}), claimA,
			op(2, 4, 5, regInput{Op: opFail, Tok: tokOf(ownerA, 1), Requeue: true}, regOutput{Outcome: outOK}),
			op(1, 6, 7, regInput{Op: opClaim, Owner: ownerB}, regOutput{Outcome: outOK, Gen: 3})}, false},
		{"grant after a refused assign of the last attempt", []porcupine.Operation{
			op(0, 0, 1, regInput{Op: opSubmit, Max: 1}, regOutput{Outcome: outOK}), claimA,
			op(2, 4, 5, regInput{Op: opFail, Tok: tokOf(ownerA, 1), NotRun: true}, regOutput{Outcome: outOK}),
			op(1, 6, 7, regInput{Op: opClaim, Owner: ownerB}, regOutput{Outcome: outOK, Gen: 3}),
			commit(3, 8, 9, tokOf(ownerB, 3), outOK)}, true},
		{"refused assign of a stale grant", []porcupine.Operation{submit, claimA, reclaimA,
			op(2, 12, 13, regInput{Op: opFail, Tok: tokOf(ownerA, 1), NotRun: true}, regOutput{Outcome: outOK})}, false},
		{"takeover of a lease with no attempt left", []porcupine.Operation{
			op(0, 0, 1, regInput{Op: opSubmit, Max: 1}, regOutput{Outcome: outOK}), claimA,
			op(1, 4, 5, regInput{Op: opTakeover, Owner: ownerB, Old: tokOf(ownerA, 1)}, regOutput{Outcome: outOK, Gen: 2})}, false},
		{"claim that failed may have granted", []porcupine.Operation{submit,
			op(1, 2, 3, regInput{Op: opMaybeClaim, Owner: ownerA}, regOutput{Outcome: outUnknown}),
			commit(2, 4, 5, tokOf(ownerA, 1), outOK)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := porcupine.CheckOperations(registerModel, tc.ops)
			if got != tc.legal {
				t.Fatalf("linearizable = %v, want %v", got, tc.legal)
			}
		})
	}
}

// history builds a small history by hand for the direct audits.
type history struct {
	h     *History
	start time.Time
}

func newHistory() *history {
	start := time.Now()
	return &history{start: start, h: &History{
		Seed: 7, Start: start, Settled: start.Add(5 * time.Second), End: start.Add(5 * time.Second),
		Plan: Plan{Seed: 7, Shape: Shape{}.withDefaults(), Jobs: []JobPlan{{ID: "j"}}},
		Final: Final{
			Jobs: map[string]jobstore.Job{}, Events: map[string][]jobstore.WriteEvent{},
			Manifests: map[string][]jobstore.ArtifactRecord{}, Running: map[string]string{}, Live: map[string]bool{},
		},
	}}
}

func (b *history) at(ms int) time.Time { return b.start.Add(time.Duration(ms) * time.Millisecond) }

func (b *history) event(verb string, tok fencing.Token, accepted bool) {
	evs := b.h.Final.Events["j"]
	b.h.Final.Events["j"] = append(evs, jobstore.WriteEvent{ID: int64(len(evs) + 1), JobID: "j", Verb: verb, Owner: tok.Owner, Generation: tok.Generation, Accepted: accepted})
}

// endEvent records the accepted end of tok's attempt with its class and
// cause.
func (b *history) endEvent(verb string, tok fencing.Token, class, cause string) {
	b.event(verb, tok, true)
	evs := b.h.Final.Events["j"]
	evs[len(evs)-1].Class, evs[len(evs)-1].Cause = class, cause
}

// succeeded records a job that tok completed with one artifact, stored with
// the right stamps.
func (b *history) succeeded(tok fencing.Token) {
	key := tok.ObjectKey("shot.png")
	res, _ := json.Marshal(agentResult{Artifacts: []string{key}, Steps: 1})
	b.h.Final.Jobs["j"] = jobstore.Job{ID: "j", Status: jobstore.StatusSucceeded, Generation: tok.Generation,
		WorkerID: tok.Owner, CompletedBy: tok.Owner, Result: res, UpdatedAt: b.at(100), MaxAttempts: jobstore.DefaultMaxAttempts}
	b.h.Final.Manifests["j"] = []jobstore.ArtifactRecord{{JobID: "j", Generation: tok.Generation, Owner: tok.Owner, Name: "shot.png", Key: key, SHA256: "ab", Size: 3}}
	b.h.Final.Objects = append(b.h.Final.Objects, uploader.Object{Key: key, Token: tok, SHA256: "ab", Size: 3})
}

func rules(rep *Report) string {
	var out []string
	for _, v := range rep.Violations {
		out = append(out, v.Rule)
	}
	return strings.Join(out, ",")
}

func TestCheckAudits(t *testing.T) {
	a1, b2 := tokOf(ownerA, 1), tokOf(ownerB, 2)
	clean := func() *history {
		b := newHistory()
		b.event(jobstore.VerbClaim, a1, true)
		b.endEvent(jobstore.VerbReclaim, a1, protocol.FailClassInfrastructure, protocol.CauseLeaseExpired)
		b.event(jobstore.VerbReassign, b2, true)
		b.event(jobstore.VerbResult, a1, false)
		b.event(jobstore.VerbResult, b2, true)
		b.succeeded(b2)
		return b
	}
	for _, tc := range []struct {
		name string
		edit func(b *history)
		want string // a rule that must be reported; "" for none
	}{
		{"clean", func(*history) {}, ""},
		{"stale result accepted", func(b *history) {
			b.event(jobstore.VerbResult, a1, true)
		}, RuleOneAcceptance},
		{"stale observation accepted", func(b *history) {
			b.event(jobstore.VerbObserve, a1, true)
		}, RuleStaleAccepted},
		{"unfenced result overwrote", func(b *history) {
			b.event(jobstore.VerbResultUnfenced, fencing.Token{Owner: ownerA}, true)
		}, RuleStaleAccepted},
		{"result of an older generation kept", func(b *history) {
			j := b.h.Final.Jobs["j"]
			j.CompletedBy = ownerA
			b.h.Final.Jobs["j"] = j
		}, RuleFinalGeneration},
		{"object with other stamps", func(b *history) {
			b.h.Final.Objects[0].Token = a1
		}, RuleManifest},
		{"object missing", func(b *history) {
			b.h.Final.Objects = nil
		}, RuleManifest},
		{"queued job passed over by a younger one", func(b *history) {
			b.h.Final.Jobs["j"] = jobstore.Job{ID: "j", Status: jobstore.StatusQueued, UpdatedAt: b.at(100)}
			b.h.Ops = append(b.h.Ops,
				&StoreOp{Client: "operator", Method: opSubmit, JobID: "j", Outcome: outOK, Call: b.at(1), Return: b.at(2)},
				&StoreOp{Client: "operator", Method: opSubmit, JobID: "k", Outcome: outOK, Call: b.at(3), Return: b.at(4)},
				&StoreOp{Client: "coord-0.1", Method: opClaim, JobID: "k", Owner: ownerB, Outcome: outOK, Call: b.at(2000), Return: b.at(2001)})
		}, RuleNoJobLost},
		{"queued job, nothing granted", func(b *history) {
			b.h.Final.Jobs["j"] = jobstore.Job{ID: "j", Status: jobstore.StatusQueued, UpdatedAt: b.at(100), MaxAttempts: 3}
			b.h.Ops = append(b.h.Ops, &StoreOp{Client: "operator", Method: opSubmit, JobID: "j", Outcome: outOK, Call: b.at(1), Return: b.at(2)})
		}, ""},
		{"expired lease left by the reaper", func(b *history) {
			b.h.Final.Jobs["j"] = jobstore.Job{ID: "j", Status: jobstore.StatusInProgress, Generation: 1, WorkerID: ownerA, LeaseExpiresAt: b.at(500), UpdatedAt: b.at(100)}
			b.h.Ops = append(b.h.Ops, &StoreOp{Client: "coord-0.1", Method: opReclaim, Outcome: outOK, Call: b.at(2000), Return: b.at(2001)})
		}, RuleNoJobLost},
		{"expired lease, reaper not yet run", func(b *history) {
			b.h.Final.Jobs["j"] = jobstore.Job{ID: "j", Status: jobstore.StatusInProgress, Generation: 1, WorkerID: ownerA, LeaseExpiresAt: b.at(4900), UpdatedAt: b.at(100), MaxAttempts: 3}
			b.h.Ops = append(b.h.Ops, &StoreOp{Client: "coord-0.1", Method: opReclaim, Outcome: outOK, Call: b.at(2000), Return: b.at(2001)})
		}, ""},
		{"job missing", func(b *history) {
			delete(b.h.Final.Jobs, "j")
		}, RuleNoJobLost},
		{"message after the stop", func(b *history) {
			b.h.Stops = append(b.h.Stops, StopRec{Process: ownerA, Token: a1, At: b.at(1000)})
			b.h.Frames = append(b.h.Frames, &FrameRecord{Link: ownerA, Dir: ToServer, Verb: "artifact", Token: a1, Read: b.at(2000)})
		}, RuleNoEffectAfterEnd},
		{"message late after the stop while the process was starved", func(b *history) {
			b.h.Stops = append(b.h.Stops, StopRec{Process: ownerA, Token: a1, At: b.at(1000)})
			b.h.Stalls = append(b.h.Stalls, Stall{At: b.at(1000), Late: 400 * time.Millisecond})
			b.h.Frames = append(b.h.Frames, &FrameRecord{Link: ownerA, Dir: ToServer, Verb: "artifact", Token: a1, Read: b.at(2000)})
		}, ""},
		{"storage write after the stop", func(b *history) {
			b.h.Stops = append(b.h.Stops, StopRec{Process: ownerA, Token: a1, At: b.at(1000)})
			b.h.S3 = append(b.h.S3, &S3Record{Link: ownerA, Kind: s3Put, Key: a1.ObjectKey("x.png"), Token: a1, Read: b.at(2000)})
		}, RuleNoEffectAfterEnd},
		{"token stopped twice", func(b *history) {
			b.h.Stops = append(b.h.Stops, StopRec{Process: ownerA, Token: a1, At: b.at(1000)}, StopRec{Process: ownerA, Token: a1, At: b.at(3000)})
		}, RuleNoEffectAfterEnd},
		{"message in flight at the stop", func(b *history) {
			b.h.Stops = append(b.h.Stops, StopRec{Process: ownerA, Token: a1, At: b.at(1000)})
			b.h.Frames = append(b.h.Frames, &FrameRecord{Link: ownerA, Dir: ToServer, Verb: "renew", Token: a1, Read: b.at(1010)})
		}, ""},
		{"accepted reply for a result that was lost", func(b *history) {
			b.h.Frames = append(b.h.Frames,
				&FrameRecord{Link: ownerA, Dir: ToServer, Verb: "result", Token: a1, Reply: "_INBOX.pc-a.x.1", Read: b.at(10)},
				&FrameRecord{Link: ownerA, Dir: ToClient, Verb: "reply", Subject: "_INBOX.pc-a.x.1", Accepted: true, Read: b.at(20), Sent: b.at(21)})
		}, RuleNoResultLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := clean()
			tc.edit(b)
			rep := Check(b.h, CheckOptions{Grace: 100 * time.Millisecond})
			got := rules(rep)
			if tc.want == "" {
				if !rep.OK() {
					t.Fatalf("violations %v, want none", rep.Violations)
				}
				return
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("rules broken %q, want %s among them (%v)", got, tc.want, rep.Violations)
			}
		})
	}
}

func TestWriteVisualization(t *testing.T) {
	submit := op(0, 0, 1, regInput{Op: opSubmit}, regOutput{Outcome: outOK})
	claim := op(1, 2, 3, regInput{Op: opClaim, Owner: ownerA}, regOutput{Outcome: outOK, Gen: 1})
	twice := op(2, 4, 5, regInput{Op: opCommit, Tok: tokOf(ownerA, 1)}, regOutput{Outcome: outOK})
	again := op(2, 6, 7, regInput{Op: opCommit, Tok: tokOf(ownerA, 1)}, regOutput{Outcome: outOK})
	res, info := porcupine.CheckOperationsVerbose(registerModel, []porcupine.Operation{submit, claim, twice, again}, time.Second)
	if res != porcupine.Illegal {
		t.Fatalf("check: %s, want Illegal", res)
	}
	rep := &Report{Seed: 3, Illegal: map[string]porcupine.LinearizationInfo{"j": info}}
	files, err := rep.WriteVisualization(t.TempDir())
	if err != nil || len(files) != 1 {
		t.Fatalf("visualization: %v %v", files, err)
	}
	b, err := os.ReadFile(files[0])
	if err != nil || !strings.Contains(string(b), "<html") || !strings.Contains(string(b), "commit(") {
		t.Fatalf("visualization %s: %v, %.200s", files[0], err, b)
	}
}
