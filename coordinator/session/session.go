package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/internal/redact"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
)

// Session statuses.
const (
	StatusOpen   = "open"   // steps may be sent
	StatusLost   = "lost"   // the job's lease moved away: see LostError
	StatusClosed = "closed" // closed by its caller; the job succeeded
	StatusEnded  = "ended"  // the job ended otherwise (idle timeout, cancel, failure)
)

// Limits of Open and Step.
const (
	DefaultIdleTimeout = 5 * time.Minute
	MinIdleTimeout     = time.Second
	MaxIdleTimeout     = time.Hour
	DefaultWait        = 10 * time.Second
	MaxWait            = 5 * time.Minute
	// MaxSteps is the most steps one Step call takes.
	MaxSteps = 50
	// MaxWaitStepMS bounds a wait step's duration_ms and MaxGestureMS a
	// swipe's (or long press's), as the MCP tools bound theirs.
	MaxWaitStepMS = 60_000
	MaxGestureMS  = 10_000
)

// Store is what the manager needs of the coordinator's store
// (jobstore.Store has it).
type Store interface {
	Submit(ctx context.Context, spec jobstore.JobSpec) (jobstore.Job, error)
	Get(ctx context.Context, jobID string) (jobstore.Job, error)
	Cancel(ctx context.Context, jobID, reason string) (fencing.Token, error)
	Agents(ctx context.Context) ([]jobstore.Agent, error)
	GetAgent(ctx context.Context, agentID string) (jobstore.Agent, error)
	// Artifacts lists the artifacts registered for one generation of a
	// job: a capture an agent names is presigned only when registered.
	Artifacts(ctx context.Context, jobID string, generation int64) ([]jobstore.ArtifactRecord, error)
}

// GetPresigner signs artifact downloads (coordinator.S3Presigner has it).
type GetPresigner interface {
	PresignGet(ctx context.Context, key string, expiry time.Duration) (string, error)
}

// Options configures a Manager.
type Options struct {
	Store Store
	// Conn is the coordinator's NATS connection: it sends the step verb and
	// control status to agents.
	Conn *nats.Conn
	// Presigner signs a GET URL for every capture; nil answers captures
	// without a URL.
	Presigner     GetPresigner
	PresignExpiry time.Duration // validity of a capture URL (default 15m)
	// Kick asks the scheduler to run now (coordinator.Server.Kick), so an
	// opened session is granted without waiting for the next pass; nil
	// waits for it.
	Kick func()
	// OfflineAfter: an agent silent this long has no phone for a new
	// session (default 15s, as the coordinator's agents.offline_after).
	OfflineAfter time.Duration
	// StepTimeout bounds the wait for one step's reply, on top of the
	// step's own duration_ms (default 2m).
	StepTimeout time.Duration
	// ControlTimeout bounds a control status request to an agent (default 2s).
	ControlTimeout time.Duration
	// PollEvery is how often Open looks at the job while it waits for the
	// grant (default 20ms).
	PollEvery time.Duration
	// Phones is the coordinator's rule of which phones a project may use
	// (coordinator.Server.Phones); nil lets every project use every phone.
	Phones *coordinator.PhoneRule
	// Retain is how long a closed, ended or lost session stays in memory
	// (default 1h); after that it is recovered from the store when asked.
	Retain time.Duration
	// HTTPClient reads a UI dump back through its presigned URL, for a
	// record_observation naming an element (default: a client with a 30s
	// timeout).
	HTTPClient *http.Client
	Log        zerolog.Logger
}

func (o *Options) defaults() {
	if o.PresignExpiry <= 0 {
		o.PresignExpiry = 15 * time.Minute
	}
	if o.OfflineAfter <= 0 {
		o.OfflineAfter = 15 * time.Second
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = 2 * time.Minute
	}
	if o.ControlTimeout <= 0 {
		o.ControlTimeout = 2 * time.Second
	}
	if o.PollEvery <= 0 {
		o.PollEvery = 20 * time.Millisecond
	}
	if o.Retain <= 0 {
		o.Retain = time.Hour
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
}

// Manager opens, drives and closes sessions. It is safe for concurrent
// use; calls on one session run one at a time.
type Manager struct {
	opts  Options
	store Store
	nc    *nats.Conn
	log   zerolog.Logger

	mu       sync.Mutex
	sessions map[string]*session
}

// New returns a Manager.
func New(opts Options) (*Manager, error) {
	if opts.Store == nil {
		return nil, errors.New("new session manager: no store")
	}
	if opts.Conn == nil {
		return nil, errors.New("new session manager: no NATS connection")
	}
	opts.defaults()
	return &Manager{opts: opts, store: opts.Store, nc: opts.Conn,
		log: opts.Log.With().Str("component", "sessions").Logger(), sessions: map[string]*session{}}, nil
}

// OpenRequest asks for a session.
type OpenRequest struct {
	Project     string // "" means jobstore.DefaultProject
	SubmittedBy string // who opens it (an API token's name)
	Device      protocol.DeviceSelector
	// IdleTimeout ends the session when no step comes for this long; 0
	// means DefaultIdleTimeout; MinIdleTimeout to MaxIdleTimeout.
	IdleTimeout time.Duration
	// Wait is how long Open waits for a matching phone to be free; 0 means
	// DefaultWait, at most MaxWait.
	Wait time.Duration
}

// Phone is the phone a session drives.
type Phone struct {
	Serial string `json:"serial"`
	Model  string `json:"model,omitempty"`
}

// Info describes a session.
type Info struct {
	ID          string
	JobID       string
	Project     string
	SubmittedBy string
	Agent       string // "" when not known (a lost session recovered after a restart)
	Phone       Phone
	Status      string
	IdleTimeout time.Duration
	LastStep    int
	OpenedAt    time.Time
	// Reason says why the session is lost or ended.
	Reason string
	// Lost is set when Status is StatusLost.
	Lost *LostError
}

// Capture is an artifact a step made (or, on close, one of the job's).
type Capture struct {
	Name        string `json:"name"`
	Key         string `json:"key"`
	ContentType string `json:"content_type"`
	// URL is a presigned GET, valid for the manager's PresignExpiry; ""
	// when the coordinator has no storage configured.
	URL string `json:"url,omitempty"`
}

// StepResult is the outcome of one step.
type StepResult struct {
	// Seq is the step's number in the session's operation log; 0 for a
	// record_observation, which runs on the coordinator.
	Seq        int       `json:"seq"`
	Op         string    `json:"op"`
	Outcome    string    `json:"outcome"` // ok or error
	Error      string    `json:"error,omitempty"`
	DurationMS float64   `json:"duration_ms"` // on the agent: the phone, the uploads and their registration
	Captures   []Capture `json:"captures"`
	// Observation is what a record_observation recorded.
	Observation *Recorded `json:"observation,omitempty"`
}

// session is one session's state.
type session struct {
	turn chan struct{} // held by the call in progress

	mu        sync.Mutex
	info      Info
	tok       fencing.Token
	jobStatus string // the job's status once the session is over
	lastUsed  time.Time

	// dump is the UI dump whose elements a record_observation read last
	// (held by the call in progress, like turn).
	dump dumpElements
}

func (s *session) snapshot() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

// over returns the error every call gets once the session is not open.
func (s *session) over() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.info.Status {
	case StatusLost:
		return s.info.Lost
	case StatusClosed, StatusEnded:
		return &EndedError{SessionID: s.info.ID, Status: s.info.Status, JobStatus: s.jobStatus, Reason: s.info.Reason}
	}
	return nil
}

func (s *session) acquire(ctx context.Context) error {
	select {
	case s.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the session's previous call: %w", ctx.Err())
	}
}

func (s *session) release() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
	<-s.turn
}

// sessionID is the id of the session holding the grant of tok: the job id
// and the generation, so that the store alone tells, after a coordinator
// restart, whether the job still runs under the session's grant.
func sessionID(tok fencing.Token) string {
	return tok.JobID + "." + strconv.FormatInt(tok.Generation, 10)
}

// JobOf returns the job of session id; false when id is not a session id.
func JobOf(id string) (jobID string, ok bool) {
	j, _, ok := parseID(id)
	return j, ok
}

func parseID(id string) (jobID string, gen int64, ok bool) {
	j, g, found := strings.Cut(id, ".")
	if !found || protocol.CheckJobID(j) != nil {
		return "", 0, false
	}
	n, err := strconv.ParseInt(g, 10, 64)
	if err != nil || n <= 0 || strconv.FormatInt(n, 10) != g {
		return "", 0, false
	}
	return j, n, true
}

func randomJobID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "s-" + hex.EncodeToString(b[:])
}

// Open submits an interactive job for req and waits, up to req.Wait (and
// ctx), for it to be granted to a phone and taken by its agent. With no
// connected phone matching the selector it answers *BusyError at once;
// with none free within the wait, the job is cancelled and it answers
// *BusyError.
func (m *Manager) Open(ctx context.Context, req OpenRequest) (Info, error) {
	if req.Project == "" {
		req.Project = jobstore.DefaultProject
	}
	if err := jobstore.CheckProject(req.Project); err != nil {
		return Info{}, inputErr("project", "%v", err)
	}
	switch {
	case req.IdleTimeout == 0:
		req.IdleTimeout = DefaultIdleTimeout
	case req.IdleTimeout < MinIdleTimeout || req.IdleTimeout > MaxIdleTimeout:
		return Info{}, inputErr("idle_timeout", "%v is out of range %v to %v", req.IdleTimeout, MinIdleTimeout, MaxIdleTimeout)
	}
	switch {
	case req.Wait == 0:
		req.Wait = DefaultWait
	case req.Wait < 0 || req.Wait > MaxWait:
		return Info{}, inputErr("wait", "%v is out of range 0 to %v", req.Wait, MaxWait)
	}
	m.prune()
	if err := m.checkPhones(ctx, req.Project, req.Device); err != nil {
		return Info{}, err
	}
	job, err := m.store.Submit(ctx, jobstore.JobSpec{
		ID:               randomJobID(),
		Task:             protocol.Task{Device: req.Device, Interactive: true, IdleTimeoutMS: req.IdleTimeout.Milliseconds()},
		Project:          req.Project,
		SubmittedBy:      req.SubmittedBy,
		AllowInteractive: true,
	})
	if err != nil {
		return Info{}, fmt.Errorf("open session: submit job: %w", err)
	}
	log := m.log.With().Str("job_id", job.ID).Str("project", req.Project).Logger()
	if m.opts.Kick != nil {
		m.opts.Kick()
	}
	j, err := m.awaitGrant(ctx, job.ID, req.Wait)
	if err != nil {
		reason := "session not opened: " + err.Error()
		var be *BusyError
		if errors.As(err, &be) {
			reason = "session not opened: no phone free within " + req.Wait.String()
		}
		m.abandon(ctx, job.ID, reason)
		log.Info().Err(err).Msg("session not opened")
		return Info{}, err
	}
	tok := fencing.Token{JobID: j.ID, Owner: j.WorkerID, Generation: j.Generation}
	s := &session{turn: make(chan struct{}, 1), tok: tok, lastUsed: time.Now(), info: Info{
		ID: sessionID(tok), JobID: j.ID, Project: j.Project, SubmittedBy: j.SubmittedBy, Agent: tok.AgentID(),
		Phone: m.phone(ctx, tok.AgentID(), j.Device), Status: StatusOpen, IdleTimeout: req.IdleTimeout, OpenedAt: j.CreatedAt,
	}}
	m.mu.Lock()
	m.sessions[s.info.ID] = s
	m.mu.Unlock()
	log.Info().Str("session_id", s.info.ID).Str("agent_id", s.info.Agent).Str("serial", s.info.Phone.Serial).
		Int64("generation", tok.Generation).Msg("session opened")
	return s.snapshot(), nil
}

// Phones is the manager's rule of which phones a project may use (nil:
// every project may use every phone).
func (m *Manager) Phones() *coordinator.PhoneRule { return m.opts.Phones }

// checkPhones answers *BusyError when no connected agent that takes work
// has a ready phone matching sel that project may use (the coordinator's
// phone rule), naming why each matching phone is refused.
func (m *Manager) checkPhones(ctx context.Context, project string, sel protocol.DeviceSelector) error {
	agents, err := m.store.Agents(ctx)
	if err != nil {
		return fmt.Errorf("open session: list agents: %w", err)
	}
	dups := coordinator.DuplicateSerials(agents, m.opts.OfflineAfter)
	var refused []string
	for _, a := range agents {
		if !a.Online(m.opts.OfflineAfter) || a.Draining || a.AgentDraining {
			continue
		}
		for _, d := range a.Devices {
			if !sel.Matches(d) {
				continue
			}
			why := m.opts.Phones.Refusal(project, a.ID, d, dups)
			if why == "" {
				return nil
			}
			refused = append(refused, fmt.Sprintf("%s of agent %s: %s", d.Serial, a.ID, why))
		}
	}
	if len(refused) > 0 {
		return &BusyError{Detail: fmt.Sprintf("no connected phone matching the device selector may be used by project %s (%s)", project, strings.Join(refused, "; "))}
	}
	return &BusyError{Detail: "no connected phone matches the device selector"}
}

// awaitGrant waits until the job is in progress and its agent runs it
// under the job's current token. A grant whose assign the agent refused
// goes back to the queue and is granted again: the wait follows it, since
// no step ran yet.
func (m *Manager) awaitGrant(ctx context.Context, jobID string, wait time.Duration) (jobstore.Job, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(m.opts.PollEvery)
	defer tick.Stop()
	for {
		j, err := m.store.Get(ctx, jobID)
		if err != nil {
			return j, fmt.Errorf("open session: read job %s: %w", jobID, err)
		}
		if jobstore.Finished(j.Status) {
			return j, fmt.Errorf("open session: job %s ended %s before a step: %s", jobID, j.Status, j.FailReason)
		}
		if j.Status == jobstore.StatusInProgress && j.WorkerID != "" {
			tok := fencing.Token{JobID: j.ID, Owner: j.WorkerID, Generation: j.Generation}
			if _, ok := m.agentRuns(ctx, tok); ok {
				return j, nil
			}
		}
		select {
		case <-ctx.Done():
			return j, fmt.Errorf("open session: wait for a phone: %w", ctx.Err())
		case <-deadline.C:
			return j, &BusyError{Detail: "no matching phone became free within " + wait.String()}
		case <-tick.C:
		}
	}
}

// agentRuns asks tok's agent (control status) whether it runs tok's job
// under tok, and how many steps the job ran there.
func (m *Manager) agentRuns(ctx context.Context, tok fencing.Token) (int, bool) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.ControlTimeout)
	defer cancel()
	raw, err := coordinator.PushControl(ctx, m.nc, tok.AgentID(), protocol.Control{Command: protocol.ControlStatus})
	if err != nil {
		return 0, false
	}
	var st protocol.AgentStatus
	if json.Unmarshal(raw, &st) != nil {
		return 0, false
	}
	for _, j := range st.Jobs {
		if j.Token == tok {
			return j.Step, true
		}
	}
	return 0, false
}

// phone describes serial as its agent last reported it.
func (m *Manager) phone(ctx context.Context, agentID, serial string) Phone {
	p := Phone{Serial: serial}
	if a, err := m.store.GetAgent(ctx, agentID); err == nil {
		for _, d := range a.Devices {
			if d.Serial == serial {
				p.Model = d.Model
			}
		}
	}
	return p
}

// abandon cancels a session's job and revokes the token it took away, so
// that the phone holding it (the session's, or the one the job moved to)
// is released.
func (m *Manager) abandon(ctx context.Context, jobID, reason string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.ControlTimeout)
	defer cancel()
	tok, err := m.store.Cancel(ctx, jobID, reason)
	switch {
	case errors.Is(err, jobstore.ErrConflict), errors.Is(err, jobstore.ErrNotFound):
		return
	case err != nil:
		m.log.Warn().Err(err).Str("job_id", jobID).Msg("cancel the job of a session")
		return
	}
	if tok.Owner != "" {
		if err := coordinator.PublishRevoke(m.nc, tok, reason, m.opts.ControlTimeout); err != nil {
			m.log.Warn().Err(err).Str("job_id", jobID).Msg("revoke the job of a session")
		}
	}
}

// prune forgets sessions that are over and unused for Retain.
func (m *Manager) prune() {
	cut := time.Now().Add(-m.opts.Retain)
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, s := range m.sessions {
		s.mu.Lock()
		drop := s.info.Status != StatusOpen && s.lastUsed.Before(cut)
		s.mu.Unlock()
		if drop {
			delete(m.sessions, id)
		}
	}
}

// lookup returns the session id names, from memory or else recovered from
// its job in the store (after a coordinator restart, or on another
// coordinator sharing the store).
func (m *Manager) lookup(ctx context.Context, id string) (*session, error) {
	m.mu.Lock()
	s := m.sessions[id]
	m.mu.Unlock()
	if s != nil {
		return s, nil
	}
	jobID, gen, ok := parseID(id)
	if !ok {
		return nil, ErrNotFound
	}
	j, err := m.store.Get(ctx, jobID)
	if errors.Is(err, jobstore.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", id, err)
	}
	if !j.Task.Interactive || gen > j.Generation {
		return nil, ErrNotFound
	}
	s = &session{turn: make(chan struct{}, 1), lastUsed: time.Now(), tok: fencing.Token{JobID: jobID, Generation: gen}, info: Info{
		ID: id, JobID: jobID, Project: j.Project, SubmittedBy: j.SubmittedBy, Status: StatusOpen,
		IdleTimeout: time.Duration(j.Task.IdleTimeoutMS) * time.Millisecond, OpenedAt: j.CreatedAt,
	}}
	if gen == j.Generation {
		s.tok.Owner = j.WorkerID
		if j.Status == jobstore.StatusSucceeded {
			s.tok.Owner = j.CompletedBy
		}
		s.info.Agent = s.tok.AgentID()
		s.info.Phone = m.phone(ctx, s.info.Agent, j.Device)
	}
	switch {
	case gen == j.Generation && j.Status == jobstore.StatusInProgress:
		if step, ok := m.agentRuns(ctx, s.tok); ok {
			s.info.LastStep = step
		}
	case gen == j.Generation && j.Status == jobstore.StatusSucceeded:
		s.info.Status, s.jobStatus = StatusClosed, j.Status
	case gen == j.Generation && jobstore.Finished(j.Status):
		s.info.Status, s.info.Reason, s.jobStatus = StatusEnded, endReason(j), j.Status
	default:
		reason := fmt.Sprintf("the job's lease moved to generation %d", j.Generation)
		if gen == j.Generation {
			reason = fmt.Sprintf("the job is %s without an owner", j.Status)
		}
		s.info.Status = StatusLost
		s.info.Lost = &LostError{SessionID: id, JobID: jobID, Generation: gen, Reason: reason}
		s.info.Reason = s.info.Lost.Reason
		if !jobstore.Finished(j.Status) {
			m.abandon(ctx, jobID, fmt.Sprintf("session %s lost: %s", id, s.info.Reason))
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev := m.sessions[id]; prev != nil {
		return prev, nil
	}
	m.sessions[id] = s
	m.log.Info().Str("session_id", id).Str("job_id", jobID).Str("status", s.info.Status).Msg("session recovered from the store")
	return s, nil
}

func endReason(j jobstore.Job) string {
	if j.FailReason != "" {
		return "job " + j.Status + ": " + j.FailReason
	}
	return "job " + j.Status
}

// Project returns the project of session id, for access checks: it
// reads the session from memory or its job from the store and touches
// nothing, so that a caller refused afterwards has changed nothing (a
// session recovered by lookup may be found lost, which cancels its job:
// that happens only once the caller is authorised; docs/security.md).
func (m *Manager) Project(ctx context.Context, id string) (string, error) {
	m.mu.Lock()
	s := m.sessions[id]
	m.mu.Unlock()
	if s != nil {
		return s.snapshot().Project, nil
	}
	jobID, gen, ok := parseID(id)
	if !ok {
		return "", ErrNotFound
	}
	j, err := m.store.Get(ctx, jobID)
	if errors.Is(err, jobstore.ErrNotFound) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("read session %s: %w", id, err)
	}
	if !j.Task.Interactive || gen > j.Generation {
		return "", ErrNotFound
	}
	return j.Project, nil
}

// Get describes session id. An open session whose job's lease moved is
// found lost (and its job cancelled) here too.
func (m *Manager) Get(ctx context.Context, id string) (Info, error) {
	s, err := m.lookup(ctx, id)
	if err != nil {
		return Info{}, err
	}
	select {
	case s.turn <- struct{}{}:
	default:
		// A call is running: describe the session as it stands.
		return s.snapshot(), nil
	}
	defer s.release()
	if s.over() == nil {
		_ = m.check(ctx, s)
	}
	return s.snapshot(), nil
}

// check compares the session's token with the job in the store and marks
// the session lost or ended when they differ.
func (m *Manager) check(ctx context.Context, s *session) error {
	j, err := m.store.Get(ctx, s.tok.JobID)
	if err != nil {
		return fmt.Errorf("read job %s: %w", s.tok.JobID, err)
	}
	switch {
	case j.Generation == s.tok.Generation && j.Status == jobstore.StatusInProgress && j.WorkerID == s.tok.Owner:
		return nil
	case j.Generation == s.tok.Generation && jobstore.Finished(j.Status):
		return m.markEnded(s, j)
	case j.Generation == s.tok.Generation:
		return m.markLost(ctx, s, fmt.Sprintf("the job is %s without an owner", j.Status))
	}
	where := ""
	if j.WorkerID != "" {
		where = " on agent " + fencing.Token{Owner: j.WorkerID}.AgentID()
	}
	return m.markLost(ctx, s, fmt.Sprintf("the job's lease moved to generation %d%s (%s)", j.Generation, where, j.Status))
}

func (m *Manager) markEnded(s *session, j jobstore.Job) error {
	s.mu.Lock()
	s.jobStatus = j.Status
	if j.Status == jobstore.StatusSucceeded {
		s.info.Status = StatusClosed
	} else {
		s.info.Status, s.info.Reason = StatusEnded, endReason(j)
	}
	s.mu.Unlock()
	m.log.Info().Str("session_id", s.info.ID).Str("job_id", j.ID).Str("job_status", j.Status).Msg("session ended")
	return s.over()
}

func (m *Manager) markLost(ctx context.Context, s *session, reason string) error {
	s.mu.Lock()
	s.info.Status = StatusLost
	s.info.Reason = reason
	s.info.Lost = &LostError{SessionID: s.info.ID, JobID: s.tok.JobID, Generation: s.tok.Generation, LastStep: s.info.LastStep, Reason: reason}
	lost := s.info.Lost
	s.mu.Unlock()
	m.log.Warn().Str("session_id", lost.SessionID).Str("job_id", lost.JobID).Int64("generation", lost.Generation).
		Int("last_step", lost.LastStep).Str("reason", reason).Msg("session lost")
	m.abandon(ctx, s.tok.JobID, fmt.Sprintf("session %s lost at generation %d after step %d: %s", lost.SessionID, lost.Generation, lost.LastStep, reason))
	return lost
}

// CheckSteps refuses steps a session cannot run, naming the field: before
// any runs, every rule that does not depend on the phone (a
// record_observation's raw is read as its parse says here).
func CheckSteps(steps []Step) error {
	if len(steps) == 0 {
		return inputErr("steps", "at least one step is required")
	}
	if len(steps) > MaxSteps {
		return inputErr("steps", "%d steps, at most %d per call", len(steps), MaxSteps)
	}
	for i, st := range steps {
		field := fmt.Sprintf("steps[%d]", i)
		if st.Op == OpRecordObservation {
			if _, err := checkObservationStep(field, st); err != nil {
				return err
			}
			continue
		}
		switch {
		case st.Raw != "":
			return inputErr(field+".raw", "only %s takes raw", OpRecordObservation)
		case st.Bounds != nil:
			return inputErr(field+".bounds", "only %s takes bounds", OpRecordObservation)
		case st.ElementIndex != nil:
			return inputErr(field+".element_index", "only %s takes element_index", OpRecordObservation)
		}
		if st.Effect != nil {
			return inputErr(field+".effect", "effect steps are not run in sessions; submit them as a job (docs/effects.md)")
		}
		if st.Op == protocol.OpInstallApp {
			return inputErr(field+".op", "install_app is not run in sessions; submit it as a job (docs/api.md, APKs)")
		}
		switch {
		case st.Op == protocol.OpWait && st.DurationMS > MaxWaitStepMS:
			return inputErr(field+".duration_ms", "%d is more than %d, the longest wait one step may take", st.DurationMS, MaxWaitStepMS)
		case st.Op == protocol.OpSwipe && st.DurationMS > MaxGestureMS:
			return inputErr(field+".duration_ms", "%d is more than %d, the longest swipe or long press", st.DurationMS, MaxGestureMS)
		}
		if err := st.Step.Validate(); err != nil {
			msg := err.Error()
			if f, rest, ok := strings.Cut(msg, ": "); ok && !strings.ContainsAny(f, " ") {
				return inputErr(field+"."+f, "%s", rest)
			}
			return inputErr(field, "%s", msg)
		}
	}
	return nil
}

// Step runs steps on the session's phone, in order, one step request each,
// and returns their results. Before each step the job's lease is compared
// with the session's grant; when it moved, or the agent refuses the token
// (409, 404), Step returns the results so far and a *LostError, and no
// further step is sent. A step whose outcome is "error" (the phone could
// not do it) does not stop the others.
//
// A record_observation runs on the coordinator (record): it is not
// compared with the job first, since the store's fence judges the
// session's token in the transaction that records it; a refusal makes the
// session lost (or ended) and is an error wrapping ErrRefused and the
// *LostError (or *EndedError).
func (m *Manager) Step(ctx context.Context, id string, steps []Step) ([]StepResult, error) {
	if err := CheckSteps(steps); err != nil {
		return nil, err
	}
	s, err := m.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.release()
	if err := s.over(); err != nil {
		return nil, err
	}
	results := make([]StepResult, 0, len(steps))
	for i, st := range steps {
		if st.Op == OpRecordObservation {
			r, err := m.record(ctx, s, fmt.Sprintf("steps[%d]", i), st)
			if err != nil {
				return results, err
			}
			results = append(results, r)
			continue
		}
		if err := m.check(ctx, s); err != nil {
			return results, err
		}
		var rep protocol.StepReply
		if err := m.send(ctx, s, protocol.StepRequest{Token: s.tok, Step: st.Step}, time.Duration(st.DurationMS)*time.Millisecond, &rep); err != nil {
			return results, err
		}
		s.mu.Lock()
		if rep.Seq > s.info.LastStep {
			s.info.LastStep = rep.Seq
		}
		s.mu.Unlock()
		results = append(results, StepResult{Seq: rep.Seq, Op: rep.Op, Outcome: rep.Outcome, Error: rep.Error,
			DurationMS: rep.DurationMS, Captures: m.captures(ctx, s.tok, rep.Artifacts)})
	}
	return results, nil
}

// send sends one step request to the session's agent. A refusal of the
// token, no reply or an agent that cannot take it now is checked against
// the store: a lease that moved makes the session lost.
func (m *Manager) send(ctx context.Context, s *session, req protocol.StepRequest, extra time.Duration, rep *protocol.StepReply) error {
	rctx, cancel := context.WithTimeout(ctx, m.opts.StepTimeout+extra)
	defer cancel()
	agentID := s.tok.AgentID()
	err := natsrpc.Request(rctx, m.nc, protocol.AgentSubject(agentID, protocol.VerbStep), req, rep)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("step on session %s: %w (the step may have run)", s.info.ID, ctx.Err())
	}
	var ue *UnavailableError
	switch {
	case errors.Is(err, fencing.ErrStale), errors.Is(err, protocol.ErrUnknownJob):
		if cerr := m.check(ctx, s); cerr != nil {
			return cerr
		}
		return m.markLost(ctx, s, fmt.Sprintf("agent %s no longer runs the job under the session's grant (%v)", agentID, err))
	case errors.Is(err, nats.ErrNoResponders):
		ue = &UnavailableError{Detail: fmt.Sprintf("agent %s is not connected: the step did not run", agentID)}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		ue = &UnavailableError{Detail: fmt.Sprintf("agent %s did not reply within %v: the step may have run (the next step's seq tells)", agentID, m.opts.StepTimeout+extra), MayHaveRun: true}
	case errors.Is(err, protocol.ErrUnavailable):
		ue = &UnavailableError{Detail: fmt.Sprintf("agent %s cannot take the step now: %v", agentID, err)}
	default:
		return fmt.Errorf("step on session %s: %w", s.info.ID, err)
	}
	if cerr := m.check(ctx, s); cerr != nil {
		return cerr
	}
	return ue
}

// captures describes the artifacts of keys, each with a presigned GET.
// The keys are the agent's word: only a key under the session token's own
// prefix (protocol.CheckOwnKey, the rule of the effect verb) that is
// registered for the token's generation is described and signed; any
// other is left out and logged (docs/security.md, "Object keys an agent
// names").
func (m *Manager) captures(ctx context.Context, tok fencing.Token, keys []string) []Capture {
	out := make([]Capture, 0, len(keys))
	if len(keys) == 0 {
		return out
	}
	prefix := tok.ObjectKey("")
	registered := map[string]bool{}
	arts, err := m.store.Artifacts(ctx, tok.JobID, tok.Generation)
	if err != nil {
		m.log.Warn().Err(err).Str("job_id", tok.JobID).Int64("generation", tok.Generation).Msg("captures: read the registered artifacts")
	}
	for _, a := range arts {
		registered[a.Key] = true
	}
	for _, k := range keys {
		refused := ""
		switch {
		case protocol.CheckOwnKey(tok, k) != nil:
			refused = "not under the token's own prefix " + prefix
		case !registered[k]:
			refused = "not registered for the token's generation"
		}
		if refused != "" {
			m.log.Warn().Str("agent", tok.AgentID()).Str("job_id", tok.JobID).Int64("generation", tok.Generation).
				Str("key", protocol.ShortKey(k)).Str("reason", refused).Msg("capture key refused: not presigned")
			continue
		}
		c := Capture{Name: strings.TrimPrefix(k, prefix), Key: k, ContentType: contentType(k)}
		if m.opts.Presigner != nil {
			u, err := m.opts.Presigner.PresignGet(ctx, k, m.opts.PresignExpiry)
			if err != nil {
				m.log.Warn().Err(redact.Error(err)).Str("key", k).Msg("presign capture")
			}
			c.URL = u
		}
		out = append(out, c)
	}
	return out
}

// contentType is the type the agent stores a capture under, by its
// extension (docs/capture.md).
func contentType(key string) string {
	switch strings.ToLower(path.Ext(key)) {
	case ".png":
		return "image/png"
	case ".xml":
		return "application/xml"
	case ".mp4":
		return "video/mp4"
	case ".jsonl":
		return "application/x-ndjson"
	case ".json":
		return "application/json"
	case ".txt":
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}

// Close finishes the session's job: the agent uploads the operation log
// and commits the result, and the phone is free again. It returns the
// job's artifacts (the operation log among them). Closing a closed session
// answers as the first time without artifacts; a lost one answers its
// *LostError.
func (m *Manager) Close(ctx context.Context, id string) (Info, []Capture, error) {
	s, err := m.lookup(ctx, id)
	if err != nil {
		return Info{}, nil, err
	}
	if err := s.acquire(ctx); err != nil {
		return Info{}, nil, err
	}
	defer s.release()
	if err := s.over(); err != nil {
		var ee *EndedError
		if errors.As(err, &ee) && ee.Status == StatusClosed {
			return s.snapshot(), nil, nil
		}
		return s.snapshot(), nil, err
	}
	if err := m.check(ctx, s); err != nil {
		var ee *EndedError
		if errors.As(err, &ee) && ee.Status == StatusClosed {
			return s.snapshot(), nil, nil
		}
		return s.snapshot(), nil, err
	}
	var rep protocol.StepReply
	if err := m.send(ctx, s, protocol.StepRequest{Token: s.tok, Finish: true}, 0, &rep); err != nil {
		return s.snapshot(), nil, err
	}
	if !rep.Finished {
		return s.snapshot(), nil, fmt.Errorf("close session %s: the agent did not finish the job", id)
	}
	s.mu.Lock()
	s.info.Status, s.jobStatus = StatusClosed, jobstore.StatusSucceeded
	s.mu.Unlock()
	m.log.Info().Str("session_id", id).Str("job_id", s.tok.JobID).Int("steps", s.snapshot().LastStep).Msg("session closed")
	return s.snapshot(), m.captures(ctx, s.tok, rep.Manifest), nil
}

// CloseOwnedBy ends the open sessions submittedBy (an API token's name)
// opened in this process, freeing their phones, as the token's revocation
// must (docs/ui.md): each is closed, or abandoned when its agent does not
// finish it. It returns how many it ended.
func (m *Manager) CloseOwnedBy(ctx context.Context, submittedBy, why string) int {
	m.mu.Lock()
	var ids []string
	for id, s := range m.sessions {
		s.mu.Lock()
		if s.info.SubmittedBy == submittedBy && s.info.Status == StatusOpen {
			ids = append(ids, id)
		}
		s.mu.Unlock()
	}
	m.mu.Unlock()
	for _, id := range ids {
		cctx, cancel := context.WithTimeout(ctx, m.opts.StepTimeout)
		_, _, err := m.Close(cctx, id)
		cancel()
		if err != nil {
			jobID, _ := JobOf(id)
			m.abandon(ctx, jobID, "session "+id+" ended: "+why)
		}
		m.log.Info().Str("session_id", id).Str("why", why).Msg("session ended")
	}
	return len(ids)
}

// ForServer returns the options of the manager of a coordinator process
// whose server is srv, on store and the daemon's NATS connection nc: the
// server's presigner (when it signs downloads), its URL expiry, its
// offline threshold, its phone rule and its scheduler kick.
func ForServer(srv *coordinator.Server, store Store, nc *nats.Conn, log zerolog.Logger) Options {
	o := Options{Store: store, Conn: nc, Kick: srv.Kick, OfflineAfter: srv.OfflineAfter(), PresignExpiry: srv.PresignExpiry(), Phones: srv.Phones(), Log: log}
	if p, ok := srv.Presigner().(GetPresigner); ok {
		o.Presigner = p
	}
	return o
}
