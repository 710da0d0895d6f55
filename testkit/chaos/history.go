package chaos

import (
	"sync"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/uploader"
)

// History is everything one schedule recorded: the plan, the faults as
// injected, every call the coordinators made to the job store, every
// message of every agent process, every storage request of every agent
// process, the agents' stop records, and the final state read back from the
// store and the storage.
type History struct {
	Seed    int64
	Plan    Plan
	Start   time.Time // every offset in the history is from here
	Settled time.Time // when the schedule stopped waiting for jobs to end
	End     time.Time
	Ops     []*StoreOp
	Frames  []*FrameRecord
	S3      []*S3Record
	Faults  []*FaultRecord
	Notes   []Note
	Stops   []StopRec
	// Fires are the FireSlot calls of the coordinators' schedule loops.
	Fires []*FireRec
	// Spans are the coordinators' store calls outside the job register
	// (the reaper's deadline pass, the schedule loop's): only when each
	// was made and returned, for storeSlow.
	Spans []StoreSpan
	Final Final
	// Stalls are the times goroutines of the process running the schedule
	// waited to run (an overloaded machine): a probe that wakes every 10ms
	// woke that much late, or the runtime's scheduling latencies showed a
	// goroutine waiting that long.
	Stalls []Stall
}

// Stall is one wait to run of more than 5ms, seen at At.
type Stall struct {
	At   time.Time
	Late time.Duration
}

// stalled returns the longest stall that overlaps from … to.
func (h *History) stalled(from, to time.Time) time.Duration {
	var m time.Duration
	for _, s := range h.Stalls {
		if !s.At.Before(from) && !s.At.Add(-s.Late).After(to) {
			m = max(m, s.Late)
		}
	}
	return m
}

// storeSlow returns the longest store call (of any client) in flight
// between from and to: the store's own slowness then (a loaded disk, a
// held write lock), which delays a reaper's writes as a stall of the
// process does.
func (h *History) storeSlow(from, to time.Time) time.Duration {
	var m time.Duration
	in := func(call, ret time.Time) {
		if !ret.IsZero() && !ret.Before(from) && !call.After(to) {
			m = max(m, ret.Sub(call))
		}
	}
	for _, op := range h.Ops {
		in(op.Call, op.Return)
	}
	for _, sp := range h.Spans {
		in(sp.Call, sp.Return)
	}
	return m
}

// StoreSpan is a store call of a coordinator that is not an operation of
// the job register: the reaper's deadline pass, the schedule loop's reads
// and fires. They hold the store's time (SQLite's one writer) as the
// register's calls do.
type StoreSpan struct {
	Client, Method string
	Call, Return   time.Time
}

// StoreOp is one call of a coordinator (or of the harness, client
// "operator") to the job store, with when it was made and when it returned.
// These are the operations of the fenced job register the checker verifies.
type StoreOp struct {
	Client      string // coordinator process, or "operator"
	Method      string // one of the op* constants
	JobID       string // "" for a claim that found nothing or failed
	Token       fencing.Token
	Owner       string          // grants and hello: the owner asking
	Lease       fencing.Token   // grants: the token granted
	Old         fencing.Token   // takeover: the token taken away
	Taken       []fencing.Token // reclaim and hello: the tokens taken back
	Requeue     bool            // fail: retried (jobstore.Failure.Retried)
	NotRun      bool            // fail: the assign was refused before the job ran (jobstore.Failure.NotRun): requeued, the grant not counted
	MaxAttempts int             // submit: the job's max_attempts (0: the default)
	Call        time.Time
	Return      time.Time
	Outcome     string // one of the out* constants
	Err         string
}

// Store operations.
const (
	opSubmit   = "submit"
	opClaim    = "claim"    // ClaimFor
	opTakeover = "takeover" // TakeOverExpired
	opReassign = "reassign" // operator Reassign
	opReclaim  = "reclaim"  // ReclaimExpired
	opHello    = "hello"    // AgentHello (releases a previous boot's jobs)
	opRenew    = "renew"
	opCommit   = "commit"
	opFail     = "fail"
	opArtifact = "artifact"
	opUpload   = "upload"
	opCancel   = "cancel"
)

// Store outcomes.
const (
	outOK       = "ok"
	outStale    = "stale"
	outNotFound = "notfound"
	outConflict = "conflict"
	outNoJob    = "nojob"
	outUnknown  = "unknown" // the call failed: it may or may not have taken effect
)

// FrameRecord is one NATS message through an agent process's link.
type FrameRecord struct {
	Link     string // the agent process, "<agent_id>/<boot_id>"
	Dir      Dir
	Subject  string
	Reply    string
	Verb     string        // the subject's verb, or "reply" for an inbox message
	Token    fencing.Token // the token in the body, when there is one
	Code     int           // a reply's error code; 0 for success
	Accepted bool          // a reply with "accepted": true (a result)
	Copy     bool          // a duplicate made by a fault
	Read     time.Time     // when the link read it: the send time of its sender
	Sent     time.Time     // when the link forwarded it; zero when it never was
	Note     string        // "dropped" (by a fault hook), "lost" (connection gone), "reordered"
}

// S3Record is one storage request of an agent process.
type S3Record struct {
	Link   string
	Method string
	Kind   string // put, initiate, part, complete, abort, list, head, get, other
	Key    string
	Token  fencing.Token // job and generation from the key, owner of the process
	Read   time.Time     // when the agent's uploader issued it
	Live   bool          // the job's context was still live when it was issued
	Status int           // the storage's answer; 0 when the request was not forwarded
	Note   string        // why it was not forwarded: "storage outage", "killed"
}

// writes reports whether the request creates or changes stored data.
func (r *S3Record) writes() bool {
	switch r.Kind {
	case s3Put, s3Initiate, s3Part, s3Complete:
		return true
	}
	return false
}

// Storage request kinds.
const (
	s3Put      = "put"
	s3Initiate = "initiate"
	s3Part     = "part"
	s3Complete = "complete"
	s3Abort    = "abort"
	s3List     = "list"
	s3Head     = "head"
	s3Get      = "get"
	s3Other    = "other"
)

// FaultRecord is one planned fault and what became of it.
type FaultRecord struct {
	Fault   Fault
	Index   int
	Applied time.Time // zero when it was never injected
	Healed  time.Time
	Detail  string // what it hit: the process, the job, the message
	Skipped string // why it was not injected
}

// Note is a lifecycle event: a process started or killed, a server
// restarted, a job submitted.
type Note struct {
	At   time.Time
	What string
}

// StopRec is one stop an agent process recorded (agent.StopRecord).
type StopRec struct {
	Process  string
	Token    fencing.Token
	Cause    string
	At       time.Time
	CutShort string
}

// Final is the state at the end of a schedule.
type Final struct {
	Jobs       map[string]jobstore.Job
	Events     map[string][]jobstore.WriteEvent
	Manifests  map[string][]jobstore.ArtifactRecord // SUCCEEDED jobs: the artifacts of the final generation
	Objects    []uploader.Object
	Incomplete []string          // keys of multipart uploads left open
	Running    map[string]string // job id → the live process running it at the end
	Live       map[string]bool   // agent processes alive at the end
	// EffectRuns counts, by effect key, the operations of effect steps the
	// phones of every agent process received; Effects are the intents of
	// the plan's effect steps (effects.go).
	EffectRuns map[string]int
	Effects    map[string]jobstore.EffectRecord
	// Recurring are the run's recurring schedules with their slots and
	// jobs (recurring.go).
	Recurring []RecurringFinal
}

// Recorder collects a History from many goroutines.
type Recorder struct {
	mu sync.Mutex
	h  History
}

// NewRecorder starts a history at start.
func NewRecorder(seed int64, plan Plan, start time.Time) *Recorder {
	return &Recorder{h: History{Seed: seed, Plan: plan, Start: start}}
}

func (r *Recorder) frame(link string, dir Dir, f *frame, at time.Time) *FrameRecord {
	verb, tok, code, acc := messageInfo(f)
	fr := &FrameRecord{Link: link, Dir: dir, Subject: f.subject, Reply: f.reply, Verb: verb, Token: tok, Code: code, Accepted: acc, Read: at}
	r.mu.Lock()
	r.h.Frames = append(r.h.Frames, fr)
	r.mu.Unlock()
	return fr
}

func (r *Recorder) duplicate(of *FrameRecord) *FrameRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := *of
	c.Copy = true
	c.Sent = time.Time{}
	c.Note = ""
	r.h.Frames = append(r.h.Frames, &c)
	return &c
}

func (r *Recorder) frameDone(fr *FrameRecord, sent time.Time, note string) {
	r.mu.Lock()
	fr.Sent = sent
	if note != "" {
		fr.Note = note
	}
	r.mu.Unlock()
}

func (r *Recorder) s3(rec *S3Record) *S3Record {
	r.mu.Lock()
	r.h.S3 = append(r.h.S3, rec)
	r.mu.Unlock()
	return rec
}

func (r *Recorder) s3Done(rec *S3Record, status int, note string) {
	r.mu.Lock()
	rec.Status = status
	if note != "" {
		rec.Note = note
	}
	r.mu.Unlock()
}

func (r *Recorder) begin(op *StoreOp) *StoreOp {
	op.Call = time.Now()
	return op
}

func (r *Recorder) end(op *StoreOp, outcome string, err error) {
	op.Return = time.Now()
	op.Outcome = outcome
	if err != nil {
		op.Err = err.Error()
	}
	r.mu.Lock()
	r.h.Ops = append(r.h.Ops, op)
	r.mu.Unlock()
}

// span records a store call outside the job register, made at call and
// returning now.
func (r *Recorder) span(client, method string, call time.Time) {
	sp := StoreSpan{Client: client, Method: method, Call: call, Return: time.Now()}
	r.mu.Lock()
	r.h.Spans = append(r.h.Spans, sp)
	r.mu.Unlock()
}

func (r *Recorder) fault(fr *FaultRecord) {
	r.mu.Lock()
	r.h.Faults = append(r.h.Faults, fr)
	r.mu.Unlock()
}

// faultUpdate applies f to a fault record under the recorder's lock.
func (r *Recorder) faultUpdate(f func()) {
	r.mu.Lock()
	f()
	r.mu.Unlock()
}

func (r *Recorder) note(format string) {
	r.mu.Lock()
	r.h.Notes = append(r.h.Notes, Note{At: time.Now(), What: format})
	r.mu.Unlock()
}

func (r *Recorder) stops(process string, recs []StopRec) {
	r.mu.Lock()
	for _, s := range recs {
		s.Process = process
		r.h.Stops = append(r.h.Stops, s)
	}
	r.mu.Unlock()
}

// History returns a copy of what was recorded; call it when the schedule
// has ended.
func (r *Recorder) History() *History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.h
	h.Ops = cloneAll(r.h.Ops)
	h.Fires = cloneAll(r.h.Fires)
	h.Frames = cloneAll(r.h.Frames)
	h.S3 = cloneAll(r.h.S3)
	h.Faults = cloneAll(r.h.Faults)
	h.Notes = append([]Note(nil), r.h.Notes...)
	h.Stops = append([]StopRec(nil), r.h.Stops...)
	return &h
}

func cloneAll[T any](in []*T) []*T {
	out := make([]*T, len(in))
	for i, p := range in {
		c := *p
		out[i] = &c
	}
	return out
}
