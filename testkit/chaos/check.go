package chaos

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// Rules a history is checked against.
const (
	RuleLinearizable     = "linearizable"     // the store calls are a history of the fenced job register
	RuleOneAcceptance    = "one-acceptance"   // at most one result accepted per job
	RuleStaleAccepted    = "stale-accepted"   // no write accepted under a token that was not current
	RuleFinalGeneration  = "final-generation" // the accepted result is the final generation's
	RuleManifest         = "manifest"         // the manifest is the accepted generation's, stored with matching stamps
	RuleStamps           = "stamps"           // every object carries the stamps of the grant it was written under
	RuleNoEffectAfterEnd = "no-effect-after-stop"
	RuleNoJobLost        = "no-job-lost"
	RuleNoResultLost     = "no-result-lost"
)

// CheckOptions tunes Check.
type CheckOptions struct {
	// Grace is how long after a stop a side effect that was already past
	// its lease check may still be seen leaving the agent; default the
	// lease TTL.
	Grace time.Duration
	// Timeout bounds the linearizability check of one job; default 10s.
	Timeout time.Duration
	// ReapInterval is how often the coordinators' reapers sweep; default a
	// quarter of the lease TTL, as the harness configures them.
	ReapInterval time.Duration
	// StopLatency bounds how long an agent keeps running a job after the
	// store ended its grant; default one lease TTL: an agent that hears
	// nothing stops when its lease runs out, at most one TTL after its
	// last accepted renewal (docs/reliability.md, section 5.5).
	StopLatency time.Duration
}

// Violation is one broken rule.
type Violation struct {
	Rule   string
	JobID  string
	Detail string
}

func (v Violation) String() string {
	if v.JobID == "" {
		return fmt.Sprintf("%s: %s", v.Rule, v.Detail)
	}
	return fmt.Sprintf("%s: job %s: %s", v.Rule, v.JobID, v.Detail)
}

// Report is the checker's verdict on one history, with the counts the
// long runs add up.
type Report struct {
	Seed       int64
	Violations []Violation

	// Jobs by how they ended. InProgress: run by a live agent process
	// under its current token at the end. Lost: missing from the store, or
	// demonstrably dropped by the coordinators (see dropped). Unfinished:
	// not ended otherwise, still queued or in progress when the settle
	// time ran out (leases expiring again and again on an overloaded
	// machine, agents offline, a queue longer than the agents).
	Jobs, Succeeded, Failed, InProgress, Unfinished, Lost int
	// The other end states.
	TimedOut, Cancelled, NeedsDecision int

	// Retries counts grants after a job's first (operator reassignments
	// not counted). Deadlines counts jobs with a deadline recorded;
	// DeadlineUnjudged the signs of a job running past its bound seen
	// while the process was starved, whose timing cannot be judged.
	Retries, Deadlines, DeadlineUnjudged int

	// StaleRejected counts fenced writes (renew, upload, artifact, result,
	// fail) the store refused because the token was not current.
	StaleRejected int
	// StaleAccepted counts writes the store accepted under a token that was
	// not the job's current one.
	StaleAccepted int
	// ResultsLost counts results a client was told were accepted that are
	// not the job's final result.
	ResultsLost int
	// DuplicateAcceptances counts results accepted for a job beyond the
	// first.
	DuplicateAcceptances int

	// Linearizable is the porcupine verdict over all jobs: Illegal when one
	// job's history is not linearizable, Unknown when a check timed out.
	Linearizable porcupine.CheckResult
	// Illegal holds, per job whose history is not linearizable, what the
	// checker found, for the visualisation.
	Illegal map[string]porcupine.LinearizationInfo

	// RecurringSchedules counts the run's recurring schedules, their slots
	// fired and missed, and those still running when the run ended (their
	// last slots not judged).
	RecurringSchedules, RecurringFired, RecurringMissed, RecurringUnended int

	FaultsPlanned  map[Kind]int
	FaultsInjected map[Kind]int

	// MaxStopLag is the longest time from a recorded stop to a side effect
	// of the stopped token that was still within the grace period, and
	// which side effect that was.
	MaxStopLag     time.Duration
	MaxStopLagWhat string
	// StopsUnjudged counts side effects seen later than the grace after a
	// stop while the process was starved around it (a goroutine waited to
	// run more than half the grace): their timing cannot be judged.
	StopsUnjudged int
	// Orphans counts multipart uploads left open (killed processes leave
	// them; the spool's recovery removes them on restart).
	Orphans  int
	StoreOps int
	Messages int
	// MaxStall is the longest a goroutine of the process waited to run
	// during the schedule (see History.Stalls).
	MaxStall time.Duration
}

// OK reports whether no rule was broken.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

func (r *Report) add(rule, job, format string, args ...any) {
	r.Violations = append(r.Violations, Violation{Rule: rule, JobID: job, Detail: fmt.Sprintf(format, args...)})
}

// FailedJobs returns the jobs named by violations, sorted.
func (r *Report) FailedJobs() []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range r.Violations {
		if v.JobID != "" && !seen[v.JobID] {
			seen[v.JobID] = true
			out = append(out, v.JobID)
		}
	}
	sort.Strings(out)
	return out
}

// fencedVerbs are the write_events verbs that carry a token presented by an
// agent.
var fencedVerbs = map[string]bool{
	jobstore.VerbRenew: true, jobstore.VerbUpload: true, jobstore.VerbArtifact: true,
	jobstore.VerbResult: true, jobstore.VerbFail: true, jobstore.VerbObserve: true,
}

// Check verifies a history: the porcupine model over the store calls, and
// direct audits of the final store and storage state, of the agents' stops
// against their messages and storage writes, and of every submitted job.
func Check(h *History, o CheckOptions) *Report {
	if o.Grace <= 0 {
		o.Grace = h.Plan.Shape.withDefaults().LeaseTTL
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	ttl := h.Plan.Shape.withDefaults().LeaseTTL
	if o.ReapInterval <= 0 {
		o.ReapInterval = timingFor(ttl).reap
	}
	if o.StopLatency <= 0 {
		o.StopLatency = ttl
	}
	rep := &Report{Seed: h.Seed, FaultsPlanned: map[Kind]int{}, FaultsInjected: map[Kind]int{}, StoreOps: len(h.Ops), Messages: len(h.Frames)}
	for _, f := range h.Faults {
		rep.FaultsPlanned[f.Fault.Kind]++
		if !f.Applied.IsZero() {
			rep.FaultsInjected[f.Fault.Kind]++
		}
	}
	var jobs []string
	for _, j := range h.Plan.Jobs {
		jobs = append(jobs, j.ID)
	}
	rep.Jobs = len(jobs)
	checkLinearizable(h, jobs, o, rep)
	for _, id := range jobs {
		checkJob(h, id, o, rep)
	}
	for _, jp := range h.Plan.Jobs {
		checkAttempts(h, jp.ID, jp, rep)
		checkDeadline(h, jp.ID, jp, o, rep)
	}
	checkObjects(h, rep)
	checkStops(h, o, rep)
	checkResultsKept(h, rep)
	checkEffects(h, rep)
	checkRecurring(h, rep)
	rep.Orphans = len(h.Final.Incomplete)
	rep.MaxStall = h.stalled(h.Start, h.End)
	return rep
}

func checkLinearizable(h *History, jobs []string, o CheckOptions, rep *Report) {
	rep.Linearizable = porcupine.Ok
	all := registerOps(h, jobs)
	for _, id := range jobs {
		ops := all[id]
		res, info := porcupine.CheckOperationsVerbose(registerModel, ops, o.Timeout)
		switch res {
		case porcupine.Illegal:
			rep.Linearizable = porcupine.Illegal
			if rep.Illegal == nil {
				rep.Illegal = map[string]porcupine.LinearizationInfo{}
			}
			rep.Illegal[id] = info
			rep.add(RuleLinearizable, id, "the store calls on this job are not a history of the fenced job register (%d operations)", len(ops))
		case porcupine.Unknown:
			if rep.Linearizable == porcupine.Ok {
				rep.Linearizable = porcupine.Unknown
			}
		}
	}
}

// replayState is a job's fencing state replayed from its write_events, in
// the order the store applied them.
type replayState struct {
	status string // "" before the first grant: queued
	gen    int64
	owner  string
	maxGen int64
}

func checkJob(h *History, id string, o CheckOptions, rep *Report) {
	j, ok := h.Final.Jobs[id]
	if !ok {
		rep.Lost++
		rep.add(RuleNoJobLost, id, "the job is not in the store")
		return
	}
	// Replay the store's own record of every attempt.
	st := replayState{status: stQueued}
	var accepted []jobstore.WriteEvent
	grantOwner := map[int64]string{}
	for _, e := range h.Final.Events[id] {
		if e.Verb == jobstore.VerbResult || e.Verb == jobstore.VerbResultUnfenced {
			if e.Accepted {
				accepted = append(accepted, e)
			}
		}
		if fencedVerbs[e.Verb] && !e.Accepted && !strings.HasPrefix(e.Detail, "forbidden") {
			rep.StaleRejected++
		}
		if !e.Accepted {
			continue
		}
		current := st.status == stInProgress && st.gen == e.Generation && st.owner == e.Owner
		switch e.Verb {
		case jobstore.VerbClaim, jobstore.VerbReassign:
			if e.Generation <= st.maxGen {
				rep.add(RuleStaleAccepted, id, "grant to %s at generation %d, not above generation %d granted before (event %d)", e.Owner, e.Generation, st.maxGen, e.ID)
			}
			st = replayState{status: stInProgress, gen: e.Generation, owner: e.Owner, maxGen: max(st.maxGen, e.Generation)}
			grantOwner[e.Generation] = e.Owner
		case jobstore.VerbReclaim:
			if !current {
				rep.StaleAccepted++
				rep.add(RuleStaleAccepted, id, "reclaim of %s#g%d accepted while the job was %s g%d %s (event %d)", e.Owner, e.Generation, st.status, st.gen, st.owner, e.ID)
			}
			st.status, st.owner = stQueued, ""
		case jobstore.VerbRenew, jobstore.VerbUpload, jobstore.VerbArtifact, jobstore.VerbObserve:
			if !current {
				rep.StaleAccepted++
				rep.add(RuleStaleAccepted, id, "%s by %s#g%d accepted while the job was %s g%d %s (event %d)", e.Verb, e.Owner, e.Generation, st.status, st.gen, st.owner, e.ID)
			}
		case jobstore.VerbResult, jobstore.VerbFail:
			if !current {
				rep.StaleAccepted++
				rep.add(RuleStaleAccepted, id, "%s by %s#g%d accepted while the job was %s g%d %s (event %d)", e.Verb, e.Owner, e.Generation, st.status, st.gen, st.owner, e.ID)
			}
			switch {
			case e.Verb == jobstore.VerbResult:
				st.status = stSucceeded
			case e.Class == protocol.FailClassInfrastructure:
				st.status, st.owner = stQueued, "" // retried (or FAILED, attempts used up)
			default:
				st.status, st.owner = "ended", "" // FAILED, or queued again
			}
		case jobstore.VerbResultUnfenced:
			// It carries no generation: only the owner and the status can
			// be judged.
			if st.status != stInProgress || st.owner != e.Owner {
				rep.StaleAccepted++
				rep.add(RuleStaleAccepted, id, "unfenced result by %s accepted while the job was %s g%d %s (event %d)", e.Owner, st.status, st.gen, st.owner, e.ID)
			}
			st.status = stSucceeded
		case jobstore.VerbCancel:
			st.status, st.owner = stFailed, ""
		case jobstore.VerbTimeout:
			// The reaper ends the current grant, or a job queued again
			// after one (the event may name its last owner).
			if !current && st.status != stQueued {
				rep.StaleAccepted++
				rep.add(RuleStaleAccepted, id, "timeout of %s#g%d accepted while the job was %s g%d %s (event %d)", e.Owner, e.Generation, st.status, st.gen, st.owner, e.ID)
			}
			st.status, st.owner = "ended", ""
		}
	}
	if len(accepted) > 1 {
		rep.DuplicateAcceptances += len(accepted) - 1
		var who []string
		for _, e := range accepted {
			who = append(who, fmt.Sprintf("%s by %s#g%d (event %d)", e.Verb, e.Owner, e.Generation, e.ID))
		}
		rep.add(RuleOneAcceptance, id, "%d results accepted: %s", len(accepted), strings.Join(who, ", "))
	}
	var okCommits []*StoreOp
	for _, op := range h.Ops {
		if op.JobID == id && op.Method == opCommit && op.Outcome == outOK {
			okCommits = append(okCommits, op)
		}
	}
	if len(okCommits) > 1 && len(accepted) <= 1 {
		rep.DuplicateAcceptances += len(okCommits) - 1
		rep.add(RuleOneAcceptance, id, "the store answered %d commits as accepted", len(okCommits))
	}

	switch j.Status {
	case jobstore.StatusSucceeded:
		rep.Succeeded++
		checkAccepted(h, j, accepted, rep)
	case jobstore.StatusFailed:
		rep.Failed++
	case jobstore.StatusTimedOut:
		rep.TimedOut++
	case jobstore.StatusCancelled:
		rep.Cancelled++
	case jobstore.StatusNeedsDecision:
		rep.NeedsDecision++
	default:
		if p, ok := h.Final.Running[id]; ok && j.Status == jobstore.StatusInProgress && p == j.WorkerID && h.Final.Live[p] {
			rep.InProgress++
			return
		}
		if why := dropped(h, j); why != "" {
			rep.Lost++
			rep.add(RuleNoJobLost, id, "still %s (generation %d, owner %q) at the end: %s", j.Status, j.Generation, j.WorkerID, why)
			return
		}
		rep.Unfinished++
	}
}

// dropped tells whether the coordinators demonstrably left a job that has
// not ended: a queued job was passed over by a claim of a job submitted
// after it (grants take the oldest queued job that fits a free phone, and
// every job of a schedule fits any phone), or an expired lease was left in
// place by a reaper sweep well after its expiry. A job that is merely slow
// to end (an overloaded machine, agents offline) is not dropped.
func dropped(h *History, j jobstore.Job) string {
	ttl := h.Plan.Shape.withDefaults().LeaseTTL
	submitted := map[string]*StoreOp{}
	for _, op := range h.Ops {
		if op.Method == opSubmit && op.Outcome == outOK {
			submitted[op.JobID] = op
		}
	}
	switch j.Status {
	case jobstore.StatusQueued:
		mine := submitted[j.ID]
		if mine == nil {
			return ""
		}
		for _, op := range h.Ops {
			if op.Method != opClaim || op.Outcome != outOK || op.JobID == j.ID || !op.Call.After(j.UpdatedAt.Add(ttl)) {
				continue
			}
			if other := submitted[op.JobID]; other != nil && other.Call.After(mine.Return) {
				return fmt.Sprintf("queued since %s, passed over by the claim of %s (submitted after it) by %s at %s",
					ms(j.UpdatedAt.Sub(h.Start)), op.JobID, op.Owner, ms(op.Call.Sub(h.Start)))
			}
		}
	case jobstore.StatusInProgress:
		if j.LeaseExpiresAt.IsZero() {
			return "in progress with no lease expiry"
		}
		tok := fencing.Token{JobID: j.ID, Owner: j.WorkerID, Generation: j.Generation}
		for _, op := range h.Ops {
			if op.Method != opReclaim || op.Outcome != outOK || !op.Call.After(j.LeaseExpiresAt.Add(ttl)) {
				continue
			}
			if !slices.Contains(op.Taken, tok) {
				return fmt.Sprintf("its lease expired at %s and a reaper sweep by %s at %s left it", ms(j.LeaseExpiresAt.Sub(h.Start)), op.Client, ms(op.Call.Sub(h.Start)))
			}
		}
	}
	return ""
}

// agentResult is the result document the agent commits.
type agentResult struct {
	Artifacts []string `json:"artifacts"`
	Steps     int      `json:"steps"`
}

// checkAccepted audits a SUCCEEDED job: its accepted result belongs to the
// final grant, and its manifest is that generation's, stored with matching
// stamps.
func checkAccepted(h *History, j jobstore.Job, accepted []jobstore.WriteEvent, rep *Report) {
	id := j.ID
	tok := fencing.Token{JobID: id, Owner: j.CompletedBy, Generation: j.Generation}
	if j.CompletedBy != j.WorkerID {
		rep.add(RuleFinalGeneration, id, "result completed by %s, but the final grant (g%d) is %s's", j.CompletedBy, j.Generation, j.WorkerID)
	}
	for _, e := range accepted {
		if e.Verb == jobstore.VerbResult && e.Generation != j.Generation {
			rep.add(RuleFinalGeneration, id, "result accepted under generation %d, the job's final generation is %d", e.Generation, j.Generation)
		}
	}
	var res agentResult
	if err := json.Unmarshal(j.Result, &res); err != nil {
		rep.add(RuleFinalGeneration, id, "stored result %s is not the agent's document: %v", j.Result, err)
		return
	}
	prefix := fmt.Sprintf("jobs/%s/g%d/", id, j.Generation)
	for _, k := range res.Artifacts {
		if !strings.HasPrefix(k, prefix) {
			rep.add(RuleFinalGeneration, id, "the stored result lists %s, not under the final generation's %s", k, prefix)
		}
	}
	manifest := h.Final.Manifests[id]
	inManifest := map[string]bool{}
	objects := map[string]int{}
	for i, o := range h.Final.Objects {
		objects[o.Key] = i
	}
	for _, a := range manifest {
		inManifest[a.Key] = true
		if a.Generation != j.Generation || a.Owner != j.CompletedBy || a.Key != tok.ObjectKey(a.Name) {
			rep.add(RuleManifest, id, "manifest entry %s registered by %s#g%d, want %s", a.Key, a.Owner, a.Generation, tok)
		}
		i, ok := objects[a.Key]
		if !ok {
			rep.add(RuleManifest, id, "manifest entry %s is not in storage", a.Key)
			continue
		}
		o := h.Final.Objects[i]
		if o.Token != tok {
			rep.add(RuleManifest, id, "object %s carries stamps %s, want %s", a.Key, o.Token, tok)
		}
		if o.SHA256 != a.SHA256 || o.Size != a.Size {
			rep.add(RuleManifest, id, "object %s has sha256 %.12s… size %d, registered %.12s… size %d", a.Key, o.SHA256, o.Size, a.SHA256, a.Size)
		}
	}
	for _, k := range res.Artifacts {
		if !inManifest[k] {
			rep.add(RuleManifest, id, "the result lists %s, which is not in the manifest", k)
		}
	}
	if len(res.Artifacts) != len(manifest) {
		rep.add(RuleManifest, id, "the result lists %d artifacts, the manifest holds %d", len(res.Artifacts), len(manifest))
	}
}

// checkObjects audits every stored object: its stamps name the job and the
// generation of its key, and the owner that held that generation.
func checkObjects(h *History, rep *Report) {
	grants := map[string]map[int64]string{} // job → generation → owner
	for id, evs := range h.Final.Events {
		grants[id] = map[int64]string{}
		for _, e := range evs {
			if e.Accepted && (e.Verb == jobstore.VerbClaim || e.Verb == jobstore.VerbReassign) {
				grants[id][e.Generation] = e.Owner
			}
		}
	}
	for _, o := range h.Final.Objects {
		p := strings.Split(o.Key, "/")
		if len(p) != 4 || p[0] != "jobs" {
			rep.add(RuleStamps, "", "object %s is outside jobs/<job>/g<generation>/", o.Key)
			continue
		}
		var gen int64
		if _, err := fmt.Sscanf(p[2], "g%d", &gen); err != nil {
			rep.add(RuleStamps, p[1], "object %s has no generation in its key", o.Key)
			continue
		}
		if o.Token.JobID != p[1] || o.Token.Generation != gen {
			rep.add(RuleStamps, p[1], "object %s carries stamps %s", o.Key, o.Token)
			continue
		}
		if owner, ok := grants[p[1]][gen]; ok && owner != o.Token.Owner {
			rep.add(RuleStamps, p[1], "object %s stamped by %s, generation %d was granted to %s", o.Key, o.Token.Owner, gen, owner)
		}
	}
}

// checkStops audits that no side effect of a stopped token left its agent
// after the stop. Exact: an agent process records one stop per run of a
// token, so two stops of one token mean it ran the token again after
// stopping it. By time: no fenced message (as the agent's link read it) and
// no storage write (as the agent's uploader issued it) of the token later
// than Grace after the stop.
func checkStops(h *History, o CheckOptions, rep *Report) {
	type key struct {
		process string
		tok     fencing.Token
	}
	stops := map[key]time.Time{}
	count := map[key]int{}
	for _, s := range h.Stops {
		k := key{s.Process, s.Token}
		count[k]++
		if t, ok := stops[k]; !ok || s.At.Before(t) {
			stops[k] = s.At
		}
	}
	keys := make([]key, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].tok.String()+keys[i].process < keys[j].tok.String()+keys[j].process
	})
	for _, k := range keys {
		if count[k] > 1 {
			rep.add(RuleNoEffectAfterEnd, k.tok.JobID, "%s stopped %s %d times: it ran the token again after stopping it", k.process, k.tok, count[k])
		}
	}
	late := func(k key, at time.Time, what string) {
		stop, ok := stops[k]
		if !ok || !at.After(stop) {
			return
		}
		lag := at.Sub(stop)
		stall := h.stalled(stop.Add(-2*o.Grace), at)
		if lag > o.Grace && stall > o.Grace/2 {
			// The process was starved around the stop (the stop itself
			// may have come late): its timing cannot be judged.
			rep.StopsUnjudged++
			return
		}
		// A message already past its lease check still waits for two
		// goroutines to be scheduled (the NATS client's flusher, the
		// link's reader) before it is seen: allow twice the longest wait
		// to run seen around the stop on top of the grace.
		if lag <= o.Grace+2*stall {
			if lag > rep.MaxStopLag {
				rep.MaxStopLag = lag
				rep.MaxStopLagWhat = fmt.Sprintf("%s sent %s after it stopped %s", k.process, what, k.tok)
			}
			return
		}
		rep.add(RuleNoEffectAfterEnd, k.tok.JobID, "%s sent %s %s after it stopped %s", k.process, what, ms(lag), k.tok)
	}
	for _, f := range h.Frames {
		if f.Dir != ToServer || f.Copy || f.Token.JobID == "" {
			continue
		}
		switch f.Verb {
		case "renew", "upload", "artifact", "result", "fail":
			late(key{f.Link, f.Token}, f.Read, f.Verb)
		}
	}
	for _, s := range h.S3 {
		if !s.writes() || s.Token.JobID == "" {
			continue
		}
		late(key{s.Link, s.Token}, s.Read, "storage "+s.Kind+" "+s.Key)
	}
}

// checkResultsKept audits that every result a client was told was accepted
// is the job's final result: the store's answers to the coordinators, and
// the replies the agents received.
func checkResultsKept(h *History, rep *Report) {
	told := map[fencing.Token]string{}
	for _, op := range h.Ops {
		if op.Method == opCommit && op.Outcome == outOK {
			told[op.Token] = op.Client
		}
	}
	byReply := map[string]*FrameRecord{}
	for _, f := range h.Frames {
		if f.Dir == ToServer && f.Verb == "result" && f.Reply != "" {
			byReply[f.Reply] = f
		}
	}
	for _, f := range h.Frames {
		if f.Dir == ToClient && f.Verb == "reply" && f.Accepted && f.Code == 0 && !f.Sent.IsZero() {
			if req, ok := byReply[f.Subject]; ok {
				told[req.Token] = req.Link
			}
		}
	}
	toks := make([]fencing.Token, 0, len(told))
	for t := range told {
		toks = append(toks, t)
	}
	sort.Slice(toks, func(i, j int) bool { return toks[i].String() < toks[j].String() })
	for _, t := range toks {
		j, ok := h.Final.Jobs[t.JobID]
		kept := ok && j.Status == jobstore.StatusSucceeded && j.CompletedBy == t.Owner && j.Generation == t.Generation
		if !kept {
			rep.ResultsLost++
			got := "missing"
			if ok {
				got = fmt.Sprintf("%s g%d completed by %s", j.Status, j.Generation, j.CompletedBy)
			}
			rep.add(RuleNoResultLost, t.JobID, "%s was told the result of %s was accepted; the job ended %s", told[t], t, got)
		}
	}
}
