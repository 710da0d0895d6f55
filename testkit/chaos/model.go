package chaos

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
)

// Job statuses in the register model.
const (
	stQueued     = "Q"
	stInProgress = "P"
	stSucceeded  = "S"
	stFailed     = "F"
)

// regState is the fenced job register of one job: its status, the
// generation and owner of its current grant, and whose result it accepted.
type regState struct {
	Exists   bool
	Status   string
	Gen      int64
	Owner    string
	By       fencing.Token // the token whose commit was accepted
	Attempts int           // grants so far
	Max      int           // the job's max_attempts
}

// attemptsLeft reports whether the scheduler and the reaper may grant the
// job again.
func (s regState) attemptsLeft() bool { return s.Attempts < s.Max }

func (s regState) current(t fencing.Token) bool {
	return s.Exists && s.Status == stInProgress && s.Gen == t.Generation && s.Owner == t.Owner
}

func (s regState) String() string {
	if !s.Exists {
		return "absent"
	}
	out := fmt.Sprintf("%s g%d", s.Status, s.Gen)
	if s.Owner != "" {
		out += " " + s.Owner
	}
	if s.By.JobID != "" {
		out += " result by " + s.By.Owner + fmt.Sprintf("#g%d", s.By.Generation)
	}
	return out
}

// Register operations beyond the store's: what a call with an unknown
// outcome that did not name its job may have done to any job.
const (
	opMaybeClaim    = "maybe-claim"    // ClaimFor failed: it may have granted this job
	opMaybeTakeover = "maybe-takeover" // TakeOverExpired failed: it may have taken this job over
	opMaybeReclaim  = "maybe-reclaim"  // ReclaimExpired failed: it may have reclaimed this job
	opMaybeRelease  = "maybe-release"  // AgentHello failed: it may have released this job
	// opTimeout is the reaper ending a job whose deadline passed. Its call
	// is not among the recorded store calls: it is read from the job's
	// write_events (verb timeout), around the database's time of it.
	opTimeout = "timeout"
)

// regInput is one register operation.
type regInput struct {
	Op      string
	Tok     fencing.Token // fenced writes: the token presented; reclaim: the token taken
	Owner   string        // grants: the new owner; maybe-release: the new session
	Old     fencing.Token // takeover: the token taken away
	Requeue bool          // fail: a retried (infrastructure) failure
	NotRun  bool          // fail: an assign refused before the job ran: requeued, the grant not counted
	Max     int           // submit: the job's max_attempts
}

// regOutput is what the store answered.
type regOutput struct {
	Outcome string
	Gen     int64 // grants: the generation granted
}

func agentOf(owner string) string {
	a, _, _ := strings.Cut(owner, "/")
	return a
}

// regStep is the sequential specification of the fenced job register. An
// operation with an unknown outcome is always legal and takes effect if it
// could have at that point; the checker lets it return at infinity, so it
// may also be placed after everything else, where it changes nothing that
// was observed.
func regStep(s regState, in regInput, out regOutput) (bool, regState) {
	unknown := out.Outcome == outUnknown
	grant := func(owner string) regState {
		return regState{Exists: true, Status: stInProgress, Gen: s.Gen + 1, Owner: owner, Attempts: s.Attempts + 1, Max: s.Max}
	}
	// requeued is the end of an attempt by an infrastructure failure:
	// retried at generation + 1 while attempts are left, FAILED otherwise.
	requeued := func() regState {
		if !s.attemptsLeft() {
			return regState{Exists: true, Status: stFailed, Gen: s.Gen, Owner: s.Owner, Attempts: s.Attempts, Max: s.Max}
		}
		return regState{Exists: true, Status: stQueued, Gen: s.Gen + 1, Attempts: s.Attempts, Max: s.Max}
	}
	submitted := regState{Exists: true, Status: stQueued, Max: in.Max}
	if submitted.Max == 0 {
		submitted.Max = jobstore.DefaultMaxAttempts
	}
	switch in.Op {
	case opSubmit:
		switch out.Outcome {
		case outOK:
			return !s.Exists, submitted
		case outConflict:
			return s.Exists, s
		default:
			if !s.Exists {
				return true, submitted
			}
			return true, s
		}
	case opClaim:
		switch out.Outcome {
		case outOK:
			return s.Exists && s.Status == stQueued && s.attemptsLeft() && out.Gen == s.Gen+1, grant(in.Owner)
		case outConflict:
			return s.Exists && s.Status != stQueued, s
		case outNotFound:
			return !s.Exists, s
		case outNoJob:
			return true, s
		}
		fallthrough
	case opMaybeClaim:
		if s.Exists && s.Status == stQueued && s.attemptsLeft() {
			return true, grant(in.Owner)
		}
		return true, s
	case opTakeover:
		if out.Outcome == outOK {
			return s.current(in.Old) && s.attemptsLeft() && out.Gen == s.Gen+1, grant(in.Owner)
		}
		if !unknown {
			return true, s
		}
		fallthrough
	case opMaybeTakeover:
		if s.Exists && s.Status == stInProgress && s.attemptsLeft() && agentOf(s.Owner) != agentOf(in.Owner) {
			return true, grant(in.Owner)
		}
		return true, s
	case opReassign:
		active := s.Exists && (s.Status == stQueued || s.Status == stInProgress)
		switch out.Outcome {
		case outOK:
			return active && out.Gen == s.Gen+1, grant(in.Owner)
		case outConflict:
			return s.Exists && !active, s
		case outNotFound:
			return !s.Exists, s
		}
		if active {
			return true, grant(in.Owner)
		}
		return true, s
	case opReclaim:
		if out.Outcome == outOK {
			return s.current(in.Tok), requeued()
		}
		fallthrough
	case opMaybeReclaim:
		if s.Exists && s.Status == stInProgress {
			return true, requeued()
		}
		return true, s
	case opTimeout:
		// Accepted by the store (only accepted events become operations):
		// the grant it ends must be current, or the job queued again
		// after one (the event may name its last owner).
		ok := s.current(in.Tok) || (s.Exists && s.Status == stQueued)
		ended := s // every end state but SUCCEEDED is F in the register
		ended.Status = stFailed
		return ok, ended
	case opMaybeRelease:
		if s.Exists && s.Status == stInProgress && agentOf(s.Owner) == agentOf(in.Owner) && s.Owner != in.Owner {
			return true, requeued()
		}
		return true, s
	case opRenew, opArtifact, opUpload:
		switch out.Outcome {
		case outOK:
			return s.current(in.Tok), s
		case outStale:
			// A renewal is refused for an expired lease too, which the
			// register does not model.
			return in.Op == opRenew || !s.current(in.Tok), s
		case outConflict:
			return s.current(in.Tok), s
		case outNotFound:
			return !s.Exists, s
		}
		return true, s
	case opCommit:
		done := regState{Exists: true, Status: stSucceeded, Gen: s.Gen, Owner: s.Owner, By: in.Tok, Attempts: s.Attempts, Max: s.Max}
		switch out.Outcome {
		case outOK:
			return s.current(in.Tok), done
		case outStale, outConflict:
			return s.Exists && !s.current(in.Tok), s
		case outNotFound:
			return !s.Exists, s
		}
		if s.current(in.Tok) {
			return true, done
		}
		return true, s
	case opFail:
		// Every end state but SUCCEEDED is F in the register.
		ended := regState{Exists: true, Status: stFailed, Gen: s.Gen, Owner: s.Owner, Attempts: s.Attempts, Max: s.Max}
		switch {
		case in.NotRun:
			// Back to the queue at once, the grant it ends not counted;
			// FAILED when the earlier grants used up the attempts.
			ended = regState{Exists: true, Status: stQueued, Gen: s.Gen + 1, Attempts: max(s.Attempts-1, 0), Max: s.Max}
			if ended.Attempts >= s.Max {
				ended = regState{Exists: true, Status: stFailed, Gen: s.Gen, Owner: s.Owner, Attempts: ended.Attempts, Max: s.Max}
			}
		case in.Requeue:
			ended = requeued()
		}
		switch out.Outcome {
		case outOK:
			return s.current(in.Tok), ended
		case outStale, outConflict:
			return s.Exists && !s.current(in.Tok), s
		case outNotFound:
			return !s.Exists, s
		}
		if s.current(in.Tok) {
			return true, ended
		}
		return true, s
	case opCancel:
		active := s.Exists && (s.Status == stQueued || s.Status == stInProgress)
		ended := regState{Exists: true, Status: stFailed, Gen: s.Gen, Owner: s.Owner, Attempts: s.Attempts, Max: s.Max}
		switch out.Outcome {
		case outOK:
			return active, ended
		case outConflict:
			return s.Exists && !active, s
		case outNotFound:
			return !s.Exists, s
		}
		if active {
			return true, ended
		}
		return true, s
	}
	return false, s
}

// registerModel is the porcupine model of one job's register.
var registerModel = porcupine.Model{
	Init: func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		ok, next := regStep(state.(regState), input.(regInput), output.(regOutput))
		return ok, next
	},
	Equal: func(a, b any) bool { return a.(regState) == b.(regState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		return describeRegOp(in, out)
	},
	DescribeState: func(state any) string { return state.(regState).String() },
}

func describeRegOp(in regInput, out regOutput) string {
	var arg string
	switch in.Op {
	case opClaim, opReassign, opMaybeClaim, opMaybeRelease:
		arg = in.Owner
	case opTakeover, opMaybeTakeover:
		arg = fmt.Sprintf("%s from %s#g%d", in.Owner, in.Old.Owner, in.Old.Generation)
	case opSubmit, opCancel, opMaybeReclaim:
	default:
		arg = fmt.Sprintf("%s#g%d", in.Tok.Owner, in.Tok.Generation)
	}
	res := out.Outcome
	if out.Outcome == outOK && out.Gen > 0 {
		res = fmt.Sprintf("ok g%d", out.Gen)
	}
	if in.Requeue {
		arg += " requeue"
	}
	return fmt.Sprintf("%s(%s) → %s", in.Op, arg, res)
}

// registerOps turns the store calls of a history into register operations,
// per job. A call whose outcome is unknown returns at infinity; a call with
// an unknown outcome that named no job becomes a "maybe" operation on every
// job. Calls that can neither change a register nor be illegal (a renewal
// refused, a renewal or registration whose outcome is unknown, a claim that
// found nothing) are left out.
func registerOps(h *History, jobs []string) map[string][]porcupine.Operation {
	var last int64
	ts := func(t time.Time) int64 { return int64(t.Sub(h.Start)) }
	for _, op := range h.Ops {
		last = max(last, ts(op.Return))
	}
	inf := int64(math.MaxInt64 / 4)
	if last >= inf {
		inf = last + 1
	}
	out := map[string][]porcupine.Operation{}
	client := map[string]int{}
	add := func(job string, op *StoreOp, in regInput, o regOutput) {
		id, ok := client[op.Client]
		if !ok {
			id = len(client)
			client[op.Client] = id
		}
		ret := ts(op.Return)
		if o.Outcome == outUnknown {
			ret = inf
		}
		out[job] = append(out[job], porcupine.Operation{ClientId: id, Input: in, Call: ts(op.Call), Output: o, Return: ret, Metadata: op.Client})
	}
	everyJob := func(op *StoreOp, in regInput) {
		for _, j := range jobs {
			add(j, op, in, regOutput{Outcome: outUnknown})
		}
	}
	for _, op := range h.Ops {
		o := regOutput{Outcome: op.Outcome}
		switch op.Method {
		case opSubmit:
			add(op.JobID, op, regInput{Op: opSubmit, Max: op.MaxAttempts}, o)
		case opClaim, opReassign:
			switch {
			case op.Outcome == outNoJob:
			case op.JobID != "":
				o.Gen = op.Lease.Generation
				add(op.JobID, op, regInput{Op: op.Method, Owner: op.Owner}, o)
			case op.Outcome == outUnknown:
				everyJob(op, regInput{Op: opMaybeClaim, Owner: op.Owner})
			}
		case opTakeover:
			switch {
			case op.Outcome == outOK:
				o.Gen = op.Lease.Generation
				add(op.JobID, op, regInput{Op: opTakeover, Owner: op.Owner, Old: op.Old}, o)
			case op.Outcome == outUnknown:
				everyJob(op, regInput{Op: opMaybeTakeover, Owner: op.Owner})
			}
		case opReclaim, opHello:
			for _, t := range op.Taken {
				add(t.JobID, op, regInput{Op: opReclaim, Tok: t}, regOutput{Outcome: outOK})
			}
			if op.Outcome == outUnknown {
				if op.Method == opReclaim {
					everyJob(op, regInput{Op: opMaybeReclaim})
				} else {
					everyJob(op, regInput{Op: opMaybeRelease, Owner: op.Owner})
				}
			}
		case opRenew, opArtifact, opUpload:
			if op.Outcome == outUnknown || (op.Method == opRenew && op.Outcome == outStale) {
				continue
			}
			add(op.JobID, op, regInput{Op: op.Method, Tok: op.Token}, o)
		case opCommit:
			add(op.JobID, op, regInput{Op: opCommit, Tok: op.Token}, o)
		case opFail:
			add(op.JobID, op, regInput{Op: opFail, Tok: op.Token, Requeue: op.Requeue, NotRun: op.NotRun}, o)
		case opCancel:
			add(op.JobID, op, regInput{Op: opCancel}, o)
		}
	}
	// The reaper's timeouts, from write_events: the database's time of
	// the write, widened by a reap interval either way (the clocks of the
	// database and the harness are the same machine's; the window only
	// lets porcupine place the write anywhere near it).
	reaper := len(client)
	w := timingFor(h.Plan.Shape.withDefaults().LeaseTTL).reap
	for _, j := range jobs {
		if len(out[j]) == 0 {
			continue // no call of the coordinators named it
		}
		for _, e := range h.Final.Events[j] {
			if e.Verb != jobstore.VerbTimeout || !e.Accepted || e.At.IsZero() {
				continue
			}
			tok := fencing.Token{JobID: j, Owner: e.Owner, Generation: e.Generation}
			out[j] = append(out[j], porcupine.Operation{ClientId: reaper, Input: regInput{Op: opTimeout, Tok: tok},
				Call: ts(e.At.Add(-w)), Output: regOutput{Outcome: outOK}, Return: ts(e.At.Add(w)), Metadata: "reaper (write_events)"})
		}
	}
	for _, ops := range out {
		sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	}
	return out
}
