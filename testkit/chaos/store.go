package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

var _ jobstore.ObservationStore = (*recordingStore)(nil)
var _ jobstore.ObservationStore = (*faultyStore)(nil)

// outcomeOf classifies the answer of a store call. Every error that is not
// one of the store's answers (a stale token, an unknown job, a conflict, no
// job) leaves the outcome unknown: the statement may have been applied.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return outOK
	case errors.Is(err, fencing.ErrStale):
		return outStale
	case errors.Is(err, jobstore.ErrNotFound):
		return outNotFound
	case errors.Is(err, jobstore.ErrConflict):
		return outConflict
	case errors.Is(err, jobstore.ErrNoJob):
		return outNoJob
	}
	return outUnknown
}

// recordingStore records the calls a coordinator makes to its store that
// read or change a job's fencing state: the operations of the fenced job
// register. Everything else passes through.
type recordingStore struct {
	jobstore.Store
	client string
	rec    *Recorder
}

func (s *recordingStore) op(method, jobID string) *StoreOp {
	return s.rec.begin(&StoreOp{Client: s.client, Method: method, JobID: jobID})
}

// ExpireDeadlines is the reaper's deadline pass: recorded as a span (its
// writes are read back from the store's write events).
func (s *recordingStore) ExpireDeadlines(ctx context.Context, limit int) ([]fencing.Token, error) {
	call := time.Now()
	toks, err := s.Store.ExpireDeadlines(ctx, limit)
	s.rec.span(s.client, "expire-deadlines", call)
	return toks, err
}

func (s *recordingStore) Submit(ctx context.Context, spec jobstore.JobSpec) (jobstore.Job, error) {
	op := s.op(opSubmit, spec.ID)
	op.MaxAttempts = spec.MaxAttempts
	j, err := s.Store.Submit(ctx, spec)
	if err == nil {
		op.JobID = j.ID
	}
	s.rec.end(op, outcomeOf(err), err)
	return j, err
}

func (s *recordingStore) grant(method string, op *StoreOp, l jobstore.Lease, err error) {
	if err == nil {
		op.JobID = l.Token.JobID
		op.Lease = l.Token
	}
	s.rec.end(op, outcomeOf(err), err)
}

func (s *recordingStore) ClaimFor(ctx context.Context, req jobstore.ClaimRequest) (jobstore.Lease, error) {
	op := s.op(opClaim, "")
	op.Owner = req.Owner
	l, err := s.Store.ClaimFor(ctx, req)
	s.grant(opClaim, op, l, err)
	return l, err
}

func (s *recordingStore) Reassign(ctx context.Context, jobID, newOwner string, ttl time.Duration) (jobstore.Lease, error) {
	op := s.op(opReassign, jobID)
	op.Owner = newOwner
	l, err := s.Store.Reassign(ctx, jobID, newOwner, ttl)
	s.grant(opReassign, op, l, err)
	return l, err
}

func (s *recordingStore) TakeOverExpired(ctx context.Context, req jobstore.ClaimRequest) (jobstore.Lease, fencing.Token, error) {
	op := s.op(opTakeover, "")
	op.Owner = req.Owner
	l, old, err := s.Store.TakeOverExpired(ctx, req)
	if err == nil {
		op.Old = old
	}
	s.grant(opTakeover, op, l, err)
	return l, old, err
}

func (s *recordingStore) ReclaimExpired(ctx context.Context, limit int) ([]fencing.Token, error) {
	op := s.op(opReclaim, "")
	toks, err := s.Store.ReclaimExpired(ctx, limit)
	op.Taken = append([]fencing.Token(nil), toks...)
	s.rec.end(op, outcomeOf(err), err)
	return toks, err
}

func (s *recordingStore) AgentHello(ctx context.Context, h jobstore.AgentHello) (jobstore.Agent, []fencing.Token, error) {
	op := s.op(opHello, "")
	op.Owner = fencing.Owner(h.AgentID, h.BootID)
	a, toks, err := s.Store.AgentHello(ctx, h)
	op.Taken = append([]fencing.Token(nil), toks...)
	s.rec.end(op, outcomeOf(err), err)
	return a, toks, err
}

func (s *recordingStore) fenced(method string, tok fencing.Token, call func() error) error {
	op := s.op(method, tok.JobID)
	op.Token = tok
	err := call()
	s.rec.end(op, outcomeOf(err), err)
	return err
}

func (s *recordingStore) Renew(ctx context.Context, tok fencing.Token, ttl time.Duration) (time.Time, error) {
	var exp time.Time
	err := s.fenced(opRenew, tok, func() error {
		var err error
		exp, err = s.Store.Renew(ctx, tok, ttl)
		return err
	})
	return exp, err
}

func (s *recordingStore) Commit(ctx context.Context, tok fencing.Token, result json.RawMessage) error {
	return s.fenced(opCommit, tok, func() error { return s.Store.Commit(ctx, tok, result) })
}

// errNoObservations is what a wrapper answers for observations when the
// store it wraps keeps none.
var errNoObservations = errors.New("the store keeps no observations")

// CommitObserved is a commit, recorded as one: the observations travel
// with the result and change nothing of the job's fencing state.
func (s *recordingStore) CommitObserved(ctx context.Context, tok fencing.Token, c jobstore.ObservedResult) (m []string, err error) {
	obs, ok := s.Store.(jobstore.ObservationStore)
	if !ok {
		return nil, errNoObservations
	}
	err = s.fenced(opCommit, tok, func() error { m, err = obs.CommitObserved(ctx, tok, c); return err })
	return m, err
}

// RecordObservations passes through unrecorded: observations a session
// records change nothing of the job's fencing state, and their write
// events (verb observe) are judged by the write_events replay.
func (s *recordingStore) RecordObservations(ctx context.Context, tok fencing.Token, o []protocol.Observation) error {
	obs, ok := s.Store.(jobstore.ObservationStore)
	if !ok {
		return errNoObservations
	}
	return obs.RecordObservations(ctx, tok, o)
}

func (s *recordingStore) ListObservations(ctx context.Context, f jobstore.ObservationFilter) ([]jobstore.ObservationRow, error) {
	obs, ok := s.Store.(jobstore.ObservationStore)
	if !ok {
		return nil, errNoObservations
	}
	return obs.ListObservations(ctx, f)
}

func (s *recordingStore) Fail(ctx context.Context, tok fencing.Token, f jobstore.Failure) error {
	op := s.op(opFail, tok.JobID)
	op.Token = tok
	op.Requeue = f.Retried()
	op.NotRun = f.NotRun
	err := s.Store.Fail(ctx, tok, f)
	s.rec.end(op, outcomeOf(err), err)
	return err
}

func (s *recordingStore) RegisterArtifact(ctx context.Context, tok fencing.Token, a jobstore.ArtifactRecord) error {
	return s.fenced(opArtifact, tok, func() error { return s.Store.RegisterArtifact(ctx, tok, a) })
}

func (s *recordingStore) AuthorizeUpload(ctx context.Context, tok fencing.Token, name string) error {
	return s.fenced(opUpload, tok, func() error { return s.Store.AuthorizeUpload(ctx, tok, name) })
}

func (s *recordingStore) Cancel(ctx context.Context, jobID, reason string) (fencing.Token, error) {
	op := s.op(opCancel, jobID)
	tok, err := s.Store.Cancel(ctx, jobID, reason)
	if err == nil && tok.JobID != "" {
		op.Taken = []fencing.Token{tok}
	}
	s.rec.end(op, outcomeOf(err), err)
	return tok, err
}

// errStoreDown is what a coordinator's store answers during an injected
// outage.
var errStoreDown = errors.New("store unavailable (fault injected)")

// errReplyLost is what a coordinator's store answers to a write that was
// applied while replies are being lost.
var errReplyLost = errors.New("store connection lost before the reply (fault injected)")

// storeFaults is the outage switch shared by the coordinators' stores.
// While down, every call fails before it reaches the database. While
// replies are lost, every write is applied, then fails as if the connection
// broke before the answer came back, so the coordinator cannot know it took
// effect. Overlapping faults of a kind end with the last one.
type storeFaults struct {
	mu        sync.Mutex
	down      int
	lostReply int
}

func (f *storeFaults) setDown(on bool) {
	f.mu.Lock()
	f.down += count(on)
	f.mu.Unlock()
}

func (f *storeFaults) setLostReply(on bool) {
	f.mu.Lock()
	f.lostReply += count(on)
	f.mu.Unlock()
}

func count(on bool) int {
	if on {
		return 1
	}
	return -1
}

func (f *storeFaults) before() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down > 0 {
		return errStoreDown
	}
	return nil
}

func (f *storeFaults) after(err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil && f.lostReply > 0 {
		return errReplyLost
	}
	return err
}

// faultyStore injects store faults into one coordinator's store.
type faultyStore struct {
	jobstore.Store
	f *storeFaults
}

func (s *faultyStore) read(call func() error) error {
	if err := s.f.before(); err != nil {
		return err
	}
	return call()
}

func (s *faultyStore) write(call func() error) error {
	if err := s.f.before(); err != nil {
		return err
	}
	return s.f.after(call())
}

func (s *faultyStore) Submit(ctx context.Context, spec jobstore.JobSpec) (j jobstore.Job, err error) {
	err = s.write(func() error { j, err = s.Store.Submit(ctx, spec); return err })
	return j, err
}

func (s *faultyStore) ClaimFor(ctx context.Context, req jobstore.ClaimRequest) (l jobstore.Lease, err error) {
	err = s.write(func() error { l, err = s.Store.ClaimFor(ctx, req); return err })
	return l, err
}

func (s *faultyStore) Reassign(ctx context.Context, jobID, newOwner string, ttl time.Duration) (l jobstore.Lease, err error) {
	err = s.write(func() error { l, err = s.Store.Reassign(ctx, jobID, newOwner, ttl); return err })
	return l, err
}

func (s *faultyStore) TakeOverExpired(ctx context.Context, req jobstore.ClaimRequest) (l jobstore.Lease, old fencing.Token, err error) {
	err = s.write(func() error { l, old, err = s.Store.TakeOverExpired(ctx, req); return err })
	return l, old, err
}

func (s *faultyStore) ReclaimExpired(ctx context.Context, limit int) (toks []fencing.Token, err error) {
	err = s.write(func() error { toks, err = s.Store.ReclaimExpired(ctx, limit); return err })
	return toks, err
}

func (s *faultyStore) AgentHello(ctx context.Context, h jobstore.AgentHello) (a jobstore.Agent, toks []fencing.Token, err error) {
	err = s.write(func() error { a, toks, err = s.Store.AgentHello(ctx, h); return err })
	return a, toks, err
}

func (s *faultyStore) AgentHeartbeat(ctx context.Context, hb jobstore.AgentBeat) (a jobstore.Agent, err error) {
	err = s.write(func() error { a, err = s.Store.AgentHeartbeat(ctx, hb); return err })
	return a, err
}

func (s *faultyStore) Renew(ctx context.Context, tok fencing.Token, ttl time.Duration) (exp time.Time, err error) {
	err = s.write(func() error { exp, err = s.Store.Renew(ctx, tok, ttl); return err })
	return exp, err
}

func (s *faultyStore) Commit(ctx context.Context, tok fencing.Token, result json.RawMessage) error {
	return s.write(func() error { return s.Store.Commit(ctx, tok, result) })
}

func (s *faultyStore) CommitObserved(ctx context.Context, tok fencing.Token, c jobstore.ObservedResult) (m []string, err error) {
	obs, ok := s.Store.(jobstore.ObservationStore)
	if !ok {
		return nil, errNoObservations
	}
	err = s.write(func() error { m, err = obs.CommitObserved(ctx, tok, c); return err })
	return m, err
}

func (s *faultyStore) RecordObservations(ctx context.Context, tok fencing.Token, o []protocol.Observation) error {
	obs, ok := s.Store.(jobstore.ObservationStore)
	if !ok {
		return errNoObservations
	}
	return s.write(func() error { return obs.RecordObservations(ctx, tok, o) })
}

func (s *faultyStore) ListObservations(ctx context.Context, f jobstore.ObservationFilter) (out []jobstore.ObservationRow, err error) {
	obs, ok := s.Store.(jobstore.ObservationStore)
	if !ok {
		return nil, errNoObservations
	}
	err = s.read(func() error { out, err = obs.ListObservations(ctx, f); return err })
	return out, err
}

func (s *faultyStore) Fail(ctx context.Context, tok fencing.Token, f jobstore.Failure) error {
	return s.write(func() error { return s.Store.Fail(ctx, tok, f) })
}

func (s *faultyStore) RegisterArtifact(ctx context.Context, tok fencing.Token, a jobstore.ArtifactRecord) error {
	return s.write(func() error { return s.Store.RegisterArtifact(ctx, tok, a) })
}

func (s *faultyStore) AuthorizeUpload(ctx context.Context, tok fencing.Token, name string) error {
	return s.write(func() error { return s.Store.AuthorizeUpload(ctx, tok, name) })
}

func (s *faultyStore) Cancel(ctx context.Context, jobID, reason string) (tok fencing.Token, err error) {
	err = s.write(func() error { tok, err = s.Store.Cancel(ctx, jobID, reason); return err })
	return tok, err
}

func (s *faultyStore) Artifacts(ctx context.Context, jobID string, generation int64) (out []jobstore.ArtifactRecord, err error) {
	err = s.read(func() error { out, err = s.Store.Artifacts(ctx, jobID, generation); return err })
	return out, err
}

func (s *faultyStore) Get(ctx context.Context, jobID string) (j jobstore.Job, err error) {
	err = s.read(func() error { j, err = s.Store.Get(ctx, jobID); return err })
	return j, err
}

func (s *faultyStore) Agents(ctx context.Context) (out []jobstore.Agent, err error) {
	err = s.read(func() error { out, err = s.Store.Agents(ctx); return err })
	return out, err
}

func (s *faultyStore) GetAgent(ctx context.Context, agentID string) (a jobstore.Agent, err error) {
	err = s.read(func() error { a, err = s.Store.GetAgent(ctx, agentID); return err })
	return a, err
}

func (s *faultyStore) JobCounts(ctx context.Context) (out map[string]int64, err error) {
	err = s.read(func() error { out, err = s.Store.JobCounts(ctx); return err })
	return out, err
}

func (s *faultyStore) ListJobs(ctx context.Context, f jobstore.JobFilter) (out []jobstore.Job, err error) {
	err = s.read(func() error { out, err = s.Store.ListJobs(ctx, f); return err })
	return out, err
}
