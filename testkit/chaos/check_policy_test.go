package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// eventAt records an event at ms from the start (database clock).
func (b *history) eventAt(verb string, tok fencing.Token, ms int) {
	b.event(verb, tok, true)
	evs := b.h.Final.Events["j"]
	evs[len(evs)-1].At = b.at(ms)
}

// TestCheckPolicyRules breaks each rule on deadlines and attempts in a
// history built to break it, next to its correct twin. The lease TTL is
// the default 500ms: the reap interval is 125ms, the stop latency one TTL,
// so a job with its deadline at 1000ms may show signs of running until
// 1625ms.
func TestCheckPolicyRules(t *testing.T) {
	a1, a3, b2, b4 := tokOf(ownerA, 1), tokOf(ownerA, 3), tokOf(ownerB, 2), tokOf(ownerB, 4)
	infra := protocol.FailClassInfrastructure
	// A job with a 1s timeout, claimed at 0 by A, whose lease expired and
	// was taken over by B, which finished it at 900.
	clean := func() *history {
		b := newHistory()
		b.h.Plan.Jobs[0].Task.TimeoutMS = 1000
		b.eventAt(jobstore.VerbClaim, a1, 0)
		b.eventAt(jobstore.VerbReclaim, a1, 400)
		b.h.Final.Events["j"][1].Class, b.h.Final.Events["j"][1].Cause = infra, protocol.CauseLeaseExpired
		b.eventAt(jobstore.VerbReassign, b2, 400)
		b.eventAt(jobstore.VerbResult, b2, 900)
		b.succeeded(b2)
		j := b.h.Final.Jobs["j"]
		j.DeadlineAt = b.at(1000)
		b.h.Final.Jobs["j"] = j
		return b
	}
	for _, tc := range []struct {
		name string
		edit func(b *history)
		want string // a rule that must be reported; "" for none
	}{
		{"clean", func(*history) {}, ""},

		// deadline
		{"write accepted past the bound", func(b *history) {
			b.h.Final.Events["j"][3].At = b.at(1800) // the result
		}, RuleDeadline},
		{"write accepted within the bound", func(b *history) {
			b.h.Final.Events["j"][3].At = b.at(1600)
		}, ""},
		{"write accepted late while the store answered slowly", func(b *history) {
			b.h.Final.Events["j"][3].At = b.at(1800)
			b.h.Ops = append(b.h.Ops, &StoreOp{Client: "coord-0", Method: opReclaim, Call: b.at(1100), Return: b.at(1400), Outcome: outOK})
		}, ""},
		{"write accepted later than the store's slowness explains", func(b *history) {
			b.h.Final.Events["j"][3].At = b.at(2000)
			b.h.Ops = append(b.h.Ops, &StoreOp{Client: "coord-0", Method: opReclaim, Call: b.at(1100), Return: b.at(1300), Outcome: outOK})
		}, RuleDeadline},
		{"write accepted late while the reaper's own deadline pass was slow", func(b *history) {
			b.h.Final.Events["j"][3].At = b.at(1800)
			b.h.Spans = append(b.h.Spans, StoreSpan{Client: "coord-0", Method: "expire-deadlines", Call: b.at(950), Return: b.at(1300)})
		}, ""},
		{"write accepted later than the reaper's slow pass explains", func(b *history) {
			b.h.Final.Events["j"][3].At = b.at(2000)
			b.h.Spans = append(b.h.Spans, StoreSpan{Client: "coord-0", Method: "expire-deadlines", Call: b.at(1100), Return: b.at(1300)})
		}, RuleDeadline},
		{"a slow store call before the deadline explains nothing", func(b *history) {
			b.h.Final.Events["j"][3].At = b.at(1800)
			b.h.Ops = append(b.h.Ops, &StoreOp{Client: "coord-0", Method: opReclaim, Call: b.at(100), Return: b.at(900), Outcome: outOK})
		}, RuleDeadline},
		{"agent stopped the job late", func(b *history) {
			b.h.Stops = append(b.h.Stops, StopRec{Process: ownerB, Token: b2, At: b.at(2000), Cause: "deadline"})
		}, RuleDeadline},
		{"agent renewed past the bound", func(b *history) {
			b.h.Frames = append(b.h.Frames, &FrameRecord{Link: ownerB, Dir: ToServer, Verb: "renew", Token: b2, Read: b.at(1900)})
		}, RuleDeadline},
		{"agent wrote storage past the bound", func(b *history) {
			b.h.S3 = append(b.h.S3, &S3Record{Link: ownerB, Kind: s3Put, Key: b2.ObjectKey("late.png"), Token: b2, Read: b.at(1900)})
		}, RuleDeadline},
		{"failure report past the bound", func(b *history) {
			// The end report of a stopped job is not a sign of running;
			// the store refused it.
			b.h.Frames = append(b.h.Frames, &FrameRecord{Link: ownerB, Dir: ToServer, Verb: "fail", Token: b2, Read: b.at(1900)})
		}, ""},
		{"still in progress long after the deadline", func(b *history) {
			b.h.Final.Jobs["j"] = jobstore.Job{ID: "j", Status: jobstore.StatusInProgress, Generation: 2, WorkerID: ownerB,
				LeaseExpiresAt: b.at(4900), DeadlineAt: b.at(1000), MaxAttempts: 3}
			b.h.Final.Events["j"] = b.h.Final.Events["j"][:3]
			b.h.Final.Running["j"], b.h.Final.Live[ownerB] = ownerB, true
		}, RuleDeadline},
		{"still queued long after the deadline", func(b *history) {
			b.h.Final.Jobs["j"] = jobstore.Job{ID: "j", Status: jobstore.StatusQueued, Generation: 2,
				DeadlineAt: b.at(1000), MaxAttempts: 3}
			b.h.Final.Events["j"] = b.h.Final.Events["j"][:2]
		}, RuleDeadline},
		{"timed out by the reaper in time", func(b *history) {
			b.h.Final.Jobs["j"] = jobstore.Job{ID: "j", Status: jobstore.StatusTimedOut, Generation: 2, DeadlineAt: b.at(1000), MaxAttempts: 3}
			b.h.Final.Events["j"] = b.h.Final.Events["j"][:3]
			b.eventAt(jobstore.VerbTimeout, b2, 1100)
			b.h.Final.Events["j"][3].Class, b.h.Final.Events["j"][3].Cause = protocol.FailClassJob, protocol.CauseDeadline
		}, ""},
		{"timed out by the reaper late", func(b *history) {
			b.h.Final.Jobs["j"] = jobstore.Job{ID: "j", Status: jobstore.StatusTimedOut, Generation: 2, DeadlineAt: b.at(1000), MaxAttempts: 3}
			b.h.Final.Events["j"] = b.h.Final.Events["j"][:3]
			b.eventAt(jobstore.VerbTimeout, b2, 2500)
		}, RuleDeadline},
		{"timeout of a token that was not current", func(b *history) {
			b.eventAt(jobstore.VerbTimeout, a1, 1100)
		}, RuleStaleAccepted},
		{"late write while the store was down", func(b *history) {
			// No reaper could run from 900 to 1700: the bound moves by
			// that much.
			b.h.Faults = append(b.h.Faults, &FaultRecord{Fault: Fault{Kind: KindStoreOutage}, Applied: b.at(900), Healed: b.at(1575)})
			b.h.Final.Events["j"][3].At = b.at(1800)
		}, ""},
		{"late write while the process was starved", func(b *history) {
			b.h.Stalls = append(b.h.Stalls, Stall{At: b.at(1500), Late: 400 * time.Millisecond})
			b.h.Final.Events["j"][3].At = b.at(1800)
		}, ""},
		{"timeout given, no deadline recorded", func(b *history) {
			j := b.h.Final.Jobs["j"]
			j.DeadlineAt = time.Time{}
			b.h.Final.Jobs["j"] = j
		}, RuleDeadline},
		{"deadline not counted from the first grant", func(b *history) {
			j := b.h.Final.Jobs["j"]
			j.DeadlineAt = b.at(1400) // the takeover's time + 1s
			b.h.Final.Jobs["j"] = j
		}, RuleDeadline},

		// max-attempts
		{"more grants than max_attempts", func(b *history) {
			b.h.Final.Events["j"] = b.h.Final.Events["j"][:3]
			b.eventAt(jobstore.VerbFail, b2, 500)
			b.h.Final.Events["j"][3].Class = infra
			b.eventAt(jobstore.VerbClaim, a3, 510)
			b.eventAt(jobstore.VerbReclaim, a3, 600)
			b.h.Final.Events["j"][5].Class = infra
			b.eventAt(jobstore.VerbClaim, b4, 700)
			b.eventAt(jobstore.VerbResult, b4, 900)
			b.succeeded(b4)
			j := b.h.Final.Jobs["j"]
			j.DeadlineAt = b.at(1000)
			b.h.Final.Jobs["j"] = j
		}, RuleMaxAttempts},
		{"operator reassignment not counted", func(b *history) {
			// Three grants with a limit of three, one of them the
			// operator's: A, taken over by B, moved by the operator back
			// to A (no end recorded for B's attempt, and none needed).
			b.h.Final.Events["j"] = b.h.Final.Events["j"][:3]
			b.eventAt(jobstore.VerbReassign, a3, 600) // asked by the operator, below
			b.eventAt(jobstore.VerbResult, a3, 900)
			b.succeeded(a3)
			j := b.h.Final.Jobs["j"]
			j.DeadlineAt, j.MaxAttempts = b.at(1000), 2
			b.h.Final.Jobs["j"] = j
			b.h.Plan.Jobs[0].MaxAttempts = 2
			// The register needs the whole story once one call is there.
			op := func(ms int, o StoreOp) {
				o.JobID, o.Call, o.Return = "j", b.at(ms), b.at(ms+1)
				if o.Outcome == "" {
					o.Outcome = outOK
				}
				b.h.Ops = append(b.h.Ops, &o)
			}
			op(-10, StoreOp{Client: "operator", Method: opSubmit})
			op(0, StoreOp{Client: "coord-0.1", Method: opClaim, Owner: ownerA, Lease: a1})
			op(400, StoreOp{Client: "coord-0.1", Method: opTakeover, Owner: ownerB, Lease: b2, Old: a1})
			op(599, StoreOp{Client: "coord-0.1", Method: opReassign, Owner: ownerA, Lease: a3})
			op(900, StoreOp{Client: "coord-0.1", Method: opCommit, Token: a3})
		}, ""},
		{"max_attempts not the one submitted", func(b *history) {
			b.h.Plan.Jobs[0].MaxAttempts = 1
		}, RuleMaxAttempts},

		// retry-cause
		{"retried after a job error", func(b *history) {
			b.h.Final.Events["j"][1].Class, b.h.Final.Events["j"][1].Cause = protocol.FailClassJob, protocol.CauseAppNotInstalled
		}, RuleRetryCause},
		{"retried with no class", func(b *history) {
			b.h.Final.Events["j"][1].Class = ""
		}, RuleRetryCause},
		{"retried with no end of the attempt", func(b *history) {
			b.h.Final.Events["j"] = append(b.h.Final.Events["j"][:1], b.h.Final.Events["j"][2:]...)
		}, RuleRetryCause},
		{"end of another attempt does not count", func(b *history) {
			b.h.Final.Events["j"][1].Generation = 7
		}, RuleRetryCause},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := clean()
			tc.edit(b)
			rep := Check(b.h, CheckOptions{Grace: 200 * time.Millisecond})
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
			t.Logf("caught: %v", rep.Violations)
		})
	}
}

// TestRegisterTimeout: the reaper's timeout, read from write_events, ends
// the current grant in the register like any other fenced transition.
func TestRegisterTimeout(t *testing.T) {
	submit := op(0, 0, 1, regInput{Op: opSubmit}, regOutput{Outcome: outOK})
	claimA := op(1, 2, 3, regInput{Op: opClaim, Owner: ownerA}, regOutput{Outcome: outOK, Gen: 1})
	timeout := op(9, 10, 20, regInput{Op: opTimeout, Tok: tokOf(ownerA, 1)}, regOutput{Outcome: outOK})
	commit := func(call, ret int64, outcome string) porcupine.Operation {
		return op(2, call, ret, regInput{Op: opCommit, Tok: tokOf(ownerA, 1)}, regOutput{Outcome: outcome})
	}
	for _, tc := range []struct {
		name  string
		ops   []porcupine.Operation
		legal bool
	}{
		{"commit refused after the timeout", []porcupine.Operation{submit, claimA, timeout, commit(30, 31, outStale)}, true},
		{"commit accepted after the timeout", []porcupine.Operation{submit, claimA, timeout, commit(30, 31, outOK)}, false},
		{"commit accepted just before the timeout", []porcupine.Operation{submit, claimA, commit(5, 12, outOK), timeout}, false},
		{"timeout of a stale token", []porcupine.Operation{submit, claimA,
			op(9, 10, 20, regInput{Op: opTimeout, Tok: tokOf(ownerB, 1)}, regOutput{Outcome: outOK})}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(registerModel, tc.ops); got != tc.legal {
				t.Fatalf("linearizable = %v, want %v", got, tc.legal)
			}
		})
	}
}
