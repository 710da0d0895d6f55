package chaos

import (
	"fmt"
	"sort"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// Rules on a job's deadline and attempts (docs/reliability.md, section 1).
const (
	// RuleDeadline: no job runs past its deadline by more than one reap
	// interval plus the agent's stop latency.
	RuleDeadline = "deadline"
	// RuleMaxAttempts: no job has more accepted grants than its
	// max_attempts.
	RuleMaxAttempts = "max-attempts"
	// RuleRetryCause: every attempt followed by another grant ended with
	// an infrastructure cause.
	RuleRetryCause = "retry-cause"
)

// endVerbs are the write_events verbs that end an attempt and carry its
// class and cause.
var endVerbs = map[string]bool{jobstore.VerbFail: true, jobstore.VerbReclaim: true, jobstore.VerbTimeout: true}

// grantEvent is one accepted grant of a job, as the store recorded it.
type grantEvent struct {
	jobstore.WriteEvent
	idx      int  // position in the job's write_events
	operator bool // an operator reassignment (a fault of the schedule)
	notRun   bool // its assign was refused before the job ran (Failure.NotRun): no attempt
}

// grantsOf returns the accepted grants among a job's write_events, in the
// order applied: claims, and reassignments, both the takeovers of an
// expired lease and the operator's (marked: a reassignment that a
// coordinator's Reassign call, recorded in the history, asked for).
func grantsOf(h *History, id string) []grantEvent {
	type key struct {
		gen   int64
		owner string
	}
	operator := map[key]bool{}
	for _, op := range h.Ops {
		if op.Method != opReassign || op.JobID != id {
			continue
		}
		switch op.Outcome {
		case outOK:
			operator[key{op.Lease.Generation, op.Lease.Owner}] = true
		case outUnknown:
			operator[key{-1, op.Owner}] = true // took effect, or not: any generation
		}
	}
	// A grant whose assign the agent refused before the job ran, handed
	// back with Failure.NotRun, is not an attempt.
	notRun := map[key]bool{}
	for _, op := range h.Ops {
		if op.Method == opFail && op.JobID == id && op.NotRun && op.Outcome != outStale && op.Outcome != outNotFound && op.Outcome != outConflict {
			notRun[key{op.Token.Generation, op.Token.Owner}] = true
		}
	}
	var out []grantEvent
	for i, e := range h.Final.Events[id] {
		if !e.Accepted || (e.Verb != jobstore.VerbClaim && e.Verb != jobstore.VerbReassign) {
			continue
		}
		g := grantEvent{WriteEvent: e, idx: i}
		g.operator = e.Verb == jobstore.VerbReassign && (operator[key{e.Generation, e.Owner}] || operator[key{-1, e.Owner}])
		g.notRun = notRun[key{e.Generation, e.Owner}]
		out = append(out, g)
	}
	return out
}

// checkAttempts audits a job's grants against its attempt limit (rule
// max-attempts) and the end of every attempt that was retried (rule
// retry-cause). Operator reassignments are the operator-reassign fault of
// the schedule, not retries: they are not counted, and the attempt they
// took the job from is not judged.
func checkAttempts(h *History, id string, jp JobPlan, rep *Report) {
	j, ok := h.Final.Jobs[id]
	if !ok {
		return
	}
	grants := grantsOf(h, id)
	want := jp.MaxAttempts
	if want == 0 {
		want = jobstore.DefaultMaxAttempts
	}
	if j.MaxAttempts != want {
		rep.add(RuleMaxAttempts, id, "the store holds max_attempts %d; the job was submitted with %d", j.MaxAttempts, want)
	}
	limit := j.MaxAttempts
	if limit <= 0 || limit > want {
		limit = want
	}
	n := 0
	for _, g := range grants {
		if !g.operator && !g.notRun {
			n++
		}
	}
	if n > 0 {
		rep.Retries += n - 1
	}
	if n > limit {
		var gens []string
		for _, g := range grants {
			if !g.operator && !g.notRun {
				gens = append(gens, fmt.Sprintf("g%d %s (event %d)", g.Generation, g.Verb, g.ID))
			}
		}
		rep.add(RuleMaxAttempts, id, "%d grants accepted, max_attempts %d: %v", n, limit, gens)
	}
	evs := h.Final.Events[id]
	for k := 0; k+1 < len(grants); k++ {
		cur, next := grants[k], grants[k+1]
		if next.operator {
			continue // the operator moved the job: not a retry
		}
		var end *jobstore.WriteEvent
		for i := cur.idx + 1; i < next.idx; i++ {
			e := evs[i]
			if e.Accepted && endVerbs[e.Verb] && e.Generation == cur.Generation && e.Owner == cur.Owner {
				end = &evs[i]
				break
			}
		}
		if end == nil {
			rep.add(RuleRetryCause, id, "attempt g%d by %s was followed by grant g%d (event %d) with no fail, reclaim or timeout ending it", cur.Generation, cur.Owner, next.Generation, next.ID)
			continue
		}
		if end.Class != protocol.FailClassInfrastructure {
			rep.add(RuleRetryCause, id, "attempt g%d by %s ended by %s (event %d) with class %q, cause %q, and was retried as g%d (event %d)",
				cur.Generation, cur.Owner, end.Verb, end.ID, end.Class, end.Cause, next.Generation, next.ID)
		}
	}
}

// interval is a span of time in a history.
type interval struct{ from, to time.Time }

// reaperDown returns the spans in which no coordinator could have run its
// reaper: a store outage, or every coordinator down at once (stopped by a
// coordinator-restart fault), each lengthened by one reap interval, the
// wait for the first sweep once the store or a coordinator is back.
func reaperDown(h *History, reap time.Duration) []interval {
	var out []interval
	down := map[int][]interval{}
	for _, f := range h.Faults {
		if f.Applied.IsZero() {
			continue
		}
		to := f.Healed
		if to.IsZero() {
			to = h.End
		}
		switch f.Fault.Kind {
		case KindStoreOutage:
			out = append(out, interval{f.Applied, to.Add(reap)})
		case KindCoordinatorRestart:
			down[f.Fault.Target] = append(down[f.Fault.Target], interval{f.Applied, to.Add(reap)})
		}
	}
	coords := h.Plan.Shape.withDefaults().Coordinators
	if len(down) == coords {
		// Spans where every coordinator was down: intersect the first
		// coordinator's spans with each other's.
		all := down[0]
		for c := 1; c < coords; c++ {
			var next []interval
			for _, a := range all {
				for _, b := range down[c] {
					from, to := later(a.from, b.from), earlier(a.to, b.to)
					if from.Before(to) {
						next = append(next, interval{from, to})
					}
				}
			}
			all = next
		}
		out = append(out, all...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].from.Before(out[j].from) })
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// overlap is how much of [from, to] the spans cover (spans may overlap
// each other; they are merged).
func overlap(spans []interval, from, to time.Time) time.Duration {
	var total time.Duration
	cursor := from
	for _, s := range spans {
		a, b := later(s.from, cursor), earlier(s.to, to)
		if a.Before(b) {
			total += b.Sub(a)
			cursor = b
		}
	}
	return total
}

// checkDeadline audits a job with a deadline (rule deadline). The job ran
// past its deadline by more than the bound when, later than deadline_at +
// the reap interval + the stop latency (+ the time no reaper could run):
//   - the store accepted a write of the job (write_events, database clock);
//   - an agent process stopped a grant of the job, sent a fenced message
//     of it other than its failure report (renew, upload, artifact,
//     result), or wrote to storage under it (the agents' records, the
//     harness's clock: the database runs on the same machine);
//   - the job was still in progress at the end of the schedule.
//
// A job submitted with a timeout that was granted must have its deadline
// recorded, the first grant + the timeout. As in the stop rule, twice the
// longest wait to run seen is allowed on top, and an excess while the
// process was starved (a goroutine waited more than half the grace) is not
// judged; so is the longest store call in flight after the deadline (a
// slow store delays the reaper's write as much).
func checkDeadline(h *History, id string, jp JobPlan, o CheckOptions, rep *Report) {
	j, ok := h.Final.Jobs[id]
	if !ok {
		return
	}
	grants := grantsOf(h, id)
	timeout := time.Duration(jp.Task.TimeoutMS) * time.Millisecond
	deadline := j.DeadlineAt
	if timeout > 0 && len(grants) > 0 && !grants[0].At.IsZero() {
		due := grants[0].At.Add(timeout)
		switch {
		case deadline.IsZero():
			// Judge the job by the deadline it should have had.
			rep.add(RuleDeadline, id, "submitted with a timeout of %s and granted at %s, but the store holds no deadline (due at %s)",
				timeout, ms(grants[0].At.Sub(h.Start)), ms(due.Sub(h.Start)))
			deadline = due
		case deadline.Sub(due) > o.ReapInterval,
			// An earlier deadline only ends the job sooner; the store's
			// clock may also read the grant's statements apart (SQLite
			// runs them one by one), so a stop latency and twice the
			// longest stall are allowed on that side.
			due.Sub(deadline) > o.ReapInterval+o.StopLatency+2*h.stalled(h.Start, h.End):
			rep.add(RuleDeadline, id, "deadline at %s, the first grant (at %s) + the timeout %s is %s",
				ms(deadline.Sub(h.Start)), ms(grants[0].At.Sub(h.Start)), timeout, ms(due.Sub(h.Start)))
		}
	}
	if deadline.IsZero() {
		return
	}
	rep.Deadlines++
	base := o.ReapInterval + o.StopLatency
	down := reaperDown(h, o.ReapInterval)
	ext := time.Duration(0)
	for range 10 { // the downtime within the bound lengthens the bound
		next := overlap(down, deadline, deadline.Add(base+ext))
		if next == ext {
			break
		}
		ext = next
	}
	bound := deadline.Add(base + ext)
	// Each kind of sign is reported once, by its first instance.
	type sign struct {
		at    time.Time
		what  string
		count int
	}
	signs := map[string]*sign{}
	var order []string
	judge := func(kind string, at time.Time, what string) {
		if !at.After(bound) {
			return
		}
		stall := h.stalled(deadline, at)
		if stall > o.Grace/2 {
			rep.DeadlineUnjudged++
			return
		}
		// A store that answered slowly meanwhile (a loaded disk) delays
		// the reaper's write as much: the bound grows by its slowest call.
		if !at.After(bound.Add(2*stall + h.storeSlow(deadline, at))) {
			return
		}
		sg, ok := signs[kind]
		if !ok {
			sg = &sign{at: at, what: what}
			signs[kind] = sg
			order = append(order, kind)
		} else if at.Before(sg.at) {
			sg.at, sg.what = at, what
		}
		sg.count++
	}
	for _, e := range h.Final.Events[id] {
		if e.Accepted {
			judge("write", e.At, fmt.Sprintf("the store accepted %s by %s#g%d (event %d)", e.Verb, e.Owner, e.Generation, e.ID))
		}
	}
	for _, s := range h.Stops {
		if s.Token.JobID == id {
			judge("stop", s.At, fmt.Sprintf("%s stopped g%d (%s)", s.Process, s.Token.Generation, s.Cause))
		}
	}
	for _, f := range h.Frames {
		if f.Dir != ToServer || f.Copy || f.Token.JobID != id {
			continue
		}
		switch f.Verb {
		case "renew", "upload", "artifact", "result":
			judge("message", f.Read, fmt.Sprintf("%s sent %s %s", f.Link, f.Verb, f.Token))
		}
	}
	for _, s := range h.S3 {
		if s.writes() && s.Token.JobID == id {
			judge("storage", s.Read, fmt.Sprintf("%s wrote storage %s %s", s.Link, s.Kind, s.Key))
		}
	}
	if j.Status == jobstore.StatusInProgress {
		tok := fencing.Token{JobID: id, Owner: j.WorkerID, Generation: j.Generation}
		judge("running", h.Settled, fmt.Sprintf("the job was still in progress under %s at the end,", tok))
	}
	if j.Status == jobstore.StatusQueued {
		// The reaper ends a queued job whose deadline passed as well.
		judge("queued", h.Settled, fmt.Sprintf("the job was still queued at g%d at the end, not TIMED_OUT,", j.Generation))
	}
	for _, kind := range order {
		sg := signs[kind]
		more := ""
		if sg.count > 1 {
			more = fmt.Sprintf(" (and %d more like it)", sg.count-1)
		}
		rep.add(RuleDeadline, id, "%s %s after the deadline%s; allowed: reap interval %s + stop latency %s + %s with no reaper",
			sg.what, ms(sg.at.Sub(deadline)), more, ms(o.ReapInterval), ms(o.StopLatency), ms(ext))
	}
}
