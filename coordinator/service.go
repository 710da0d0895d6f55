package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// ServiceName is the micro service name; it is also the queue group, so
// several coordinators can serve the same subjects.
const ServiceName = "edgecoord"

// Options configures a Server.
type Options struct {
	ID               string        // coordinator id, shown in service info
	Version          string        // semantic version for the micro service
	LeaseTTL         time.Duration // granted on claim and renewal
	ReapInterval     time.Duration // how often expired leases are reclaimed
	ScheduleInterval time.Duration // how often queued jobs are handed out
	HeartbeatEvery   time.Duration // asked of agents
	OfflineAfter     time.Duration // an agent silent this long gets no new jobs
	Log              zerolog.Logger
}

func (o *Options) defaults() {
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 30 * time.Second
	}
	if o.ReapInterval <= 0 {
		o.ReapInterval = time.Second
	}
	if o.ScheduleInterval <= 0 {
		o.ScheduleInterval = 500 * time.Millisecond
	}
	if o.HeartbeatEvery <= 0 {
		o.HeartbeatEvery = 5 * time.Second
	}
	if o.OfflineAfter <= 0 {
		o.OfflineAfter = 3 * o.HeartbeatEvery
	}
	if !semver.MatchString(o.Version) {
		// The micro service needs a semantic version; development builds
		// ("dev") are announced as a pre-release.
		o.Version = "0.0.0-dev"
	}
	if o.ID == "" {
		o.ID = "edgecoord"
	}
}

var semver = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

type agentState struct {
	id       string
	bootID   string
	version  string
	devices  []protocol.Device
	slots    int
	running  map[string]fencing.Token // job id → token granted
	lastSeen time.Time
}

func (a *agentState) owner() string { return fencing.Owner(a.id, a.bootID) }

// Server serves the agent verbs over NATS and runs the scheduler and the
// reaper. Construct it with New, then Run it.
type Server struct {
	nc    *nats.Conn
	store Store
	opts  Options
	log   zerolog.Logger

	mu     sync.Mutex
	agents map[string]*agentState
	kick   chan struct{}
}

// New returns a Server that uses nc and store.
func New(nc *nats.Conn, store Store, opts Options) *Server {
	opts.defaults()
	return &Server{
		nc:     nc,
		store:  store,
		opts:   opts,
		log:    opts.Log.With().Str("component", "coordinator").Logger(),
		agents: map[string]*agentState{},
		kick:   make(chan struct{}, 1),
	}
}

// Run serves until ctx is cancelled, then stops the service and returns
// after every goroutine it started has ended.
func (s *Server) Run(ctx context.Context) error {
	svc, err := micro.AddService(s.nc, micro.Config{
		Name:        ServiceName,
		Version:     s.opts.Version,
		Description: "edgeagent coordinator, wire protocol " + protocol.Version,
		QueueGroup:  ServiceName,
		Metadata:    map[string]string{"coordinator_id": s.opts.ID},
	})
	if err != nil {
		return fmt.Errorf("add micro service: %w", err)
	}
	handlers := map[string]func(context.Context, string, []byte) (any, error){
		protocol.VerbHello:     s.hello,
		protocol.VerbHeartbeat: s.heartbeat,
		protocol.VerbRenew:     s.renew,
		protocol.VerbUpload:    s.upload,
		protocol.VerbArtifact:  s.artifact,
		protocol.VerbResult:    s.result,
		protocol.VerbFail:      s.fail,
	}
	for _, verb := range protocol.CoordVerbs {
		h := handlers[verb]
		if err := svc.AddEndpoint(verb, s.wrap(ctx, verb, h), micro.WithEndpointSubject(protocol.CoordWildcard(verb))); err != nil {
			_ = svc.Stop()
			return fmt.Errorf("add endpoint %s: %w", verb, err)
		}
	}
	s.log.Info().Str("coordinator_id", s.opts.ID).Dur("lease_ttl", s.opts.LeaseTTL).Msg("coordinator serving")

	var wg sync.WaitGroup
	wg.Go(func() { s.loop(ctx, s.opts.ReapInterval, nil, s.reapOnce) })
	wg.Go(func() { s.loop(ctx, s.opts.ScheduleInterval, s.kick, s.scheduleOnce) })
	<-ctx.Done()
	err = svc.Stop()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("stop micro service: %w", err)
	}
	return nil
}

func (s *Server) loop(ctx context.Context, every time.Duration, kick <-chan struct{}, f func(context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
		f(ctx)
	}
}

// Kick asks the scheduler to run now.
func (s *Server) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

type handlerError struct {
	code int
	msg  string
}

func (e *handlerError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &handlerError{code: protocol.CodeBadRequest, msg: fmt.Sprintf(format, a...)}
}

func (s *Server) wrap(ctx context.Context, verb string, h func(context.Context, string, []byte) (any, error)) micro.HandlerFunc {
	return func(req micro.Request) {
		agentID, v, err := protocol.ParseCoordSubject(req.Subject())
		if err != nil || v != verb {
			_ = req.Error(strconv.Itoa(protocol.CodeBadRequest), "bad subject", nil)
			return
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := h(rctx, agentID, req.Data())
		if err != nil {
			code, msg := s.classify(err)
			ev := s.log.Debug()
			if code >= 500 {
				ev = s.log.Error()
			}
			ev.Str("agent_id", agentID).Str("verb", verb).Int("code", code).Err(err).Msg("request refused")
			_ = req.Error(strconv.Itoa(code), msg, nil)
			return
		}
		_ = req.RespondJSON(resp)
	}
}

func (s *Server) classify(err error) (int, string) {
	var he *handlerError
	switch {
	case errors.As(err, &he):
		return he.code, he.msg
	case errors.Is(err, fencing.ErrStale):
		return protocol.CodeStale, "stale token"
	case errors.Is(err, ErrNotFound):
		return protocol.CodeUnknownJob, "unknown job"
	case errors.Is(err, ErrConflict):
		return protocol.CodeStale, "job not in progress under this token"
	}
	return protocol.CodeUnavailable, "coordinator unavailable"
}

// decode parses a JSON body strictly enough to name what was wrong.
func decode(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return badRequest("decode body: %v", err)
	}
	return nil
}

// checkToken validates a token and that it belongs to the agent of the
// subject the request came on.
func checkToken(agentID string, tok fencing.Token) error {
	if err := tok.Validate(); err != nil {
		return badRequest("%v", err)
	}
	if tok.AgentID() != agentID {
		return &handlerError{code: protocol.CodeForbidden, msg: "token owner is not this agent"}
	}
	return nil
}

func (s *Server) hello(ctx context.Context, agentID string, data []byte) (any, error) {
	var h protocol.Hello
	if err := decode(data, &h); err != nil {
		return nil, err
	}
	if h.BootID == "" {
		return nil, badRequest("boot_id is empty")
	}
	if h.Slots <= 0 {
		h.Slots = 1
	}
	s.mu.Lock()
	prev := s.agents[agentID]
	st := &agentState{id: agentID, bootID: h.BootID, version: h.Version, devices: h.Devices, slots: h.Slots, running: map[string]fencing.Token{}, lastSeen: time.Now()}
	if prev != nil && prev.bootID == h.BootID {
		st.running = prev.running // reconnect of the same process
	}
	s.agents[agentID] = st
	s.mu.Unlock()
	if prev != nil && prev.bootID != h.BootID {
		s.log.Info().Str("agent_id", agentID).Str("boot_id", h.BootID).Str("previous_boot_id", prev.bootID).Msg("agent restarted")
		s.releaseAll(ctx, prev)
	}
	s.log.Info().Str("agent_id", agentID).Str("boot_id", h.BootID).Str("version", h.Version).Int("devices", len(h.Devices)).Int("slots", h.Slots).Msg("agent hello")
	s.Kick()
	return protocol.HelloReply{
		LeaseTTLMS:    s.opts.LeaseTTL.Milliseconds(),
		HeartbeatMS:   s.opts.HeartbeatEvery.Milliseconds(),
		ServerTime:    time.Now().UTC(),
		UploadMode:    "direct",
		CoordinatorID: s.opts.ID,
	}, nil
}

// releaseAll requeues every job a previous boot of an agent held: a
// restarted agent never finishes its previous life's jobs.
func (s *Server) releaseAll(ctx context.Context, prev *agentState) {
	for _, tok := range prev.running {
		if err := s.store.Fail(ctx, tok, "agent restarted", true); err == nil {
			s.log.Info().Str("job_id", tok.JobID).Str("owner", tok.Owner).Int64("generation", tok.Generation).Msg("job released: agent restarted")
		}
	}
}

func (s *Server) heartbeat(ctx context.Context, agentID string, data []byte) (any, error) {
	var hb protocol.Heartbeat
	if err := decode(data, &hb); err != nil {
		return nil, err
	}
	s.mu.Lock()
	st := s.agents[agentID]
	if st == nil || st.bootID != hb.BootID {
		s.mu.Unlock()
		return nil, &handlerError{code: protocol.CodeUnavailable, msg: "unknown agent session: send hello"}
	}
	st.lastSeen = time.Now()
	if hb.Devices != nil {
		st.devices = hb.Devices
	}
	running := map[string]fencing.Token{}
	for _, t := range hb.Running {
		if g, ok := st.running[t.JobID]; ok && g == t {
			running[t.JobID] = t
		}
	}
	// Grants made after the agent built this heartbeat are kept.
	for id, t := range st.running {
		if _, ok := running[id]; !ok && !containsJob(hb.Running, id) {
			running[id] = t
		}
	}
	st.running = running
	free := st.slots - len(st.running)
	s.mu.Unlock()
	if free > 0 {
		s.Kick()
	}
	return protocol.Ack{OK: true}, nil
}

func containsJob(toks []fencing.Token, jobID string) bool {
	for _, t := range toks {
		if t.JobID == jobID {
			return true
		}
	}
	return false
}

func (s *Server) renew(ctx context.Context, agentID string, data []byte) (any, error) {
	var r protocol.Renew
	if err := decode(data, &r); err != nil {
		return nil, err
	}
	if err := checkToken(agentID, r.Token); err != nil {
		return nil, err
	}
	exp, err := s.store.Renew(ctx, r.Token, s.opts.LeaseTTL)
	if err != nil {
		return nil, err
	}
	return protocol.RenewReply{LeaseTTLMS: s.opts.LeaseTTL.Milliseconds(), ExpiresAt: exp}, nil
}

func (s *Server) upload(ctx context.Context, agentID string, data []byte) (any, error) {
	return nil, &handlerError{code: protocol.CodeUnavailable, msg: "presigned uploads are not enabled on this coordinator"}
}

func (s *Server) artifact(ctx context.Context, agentID string, data []byte) (any, error) {
	var a protocol.Artifact
	if err := decode(data, &a); err != nil {
		return nil, err
	}
	if err := checkToken(agentID, a.Token); err != nil {
		return nil, err
	}
	if err := protocol.ValidateArtifactName(a.Name); err != nil {
		return nil, badRequest("%v", err)
	}
	if want := a.Token.ObjectKey(a.Name); a.Key != want {
		return nil, badRequest("artifact key %q: want %q", a.Key, want)
	}
	err := s.store.RegisterArtifact(ctx, a.Token, ArtifactRecord{
		JobID: a.Token.JobID, Generation: a.Token.Generation, Owner: a.Token.Owner,
		Name: a.Name, Key: a.Key, Size: a.Size, SHA256: a.SHA256, ContentType: a.ContentType, ETag: a.ETag,
	})
	if err != nil {
		return nil, err
	}
	return protocol.Ack{OK: true}, nil
}

func (s *Server) result(ctx context.Context, agentID string, data []byte) (any, error) {
	var r protocol.Result
	if err := decode(data, &r); err != nil {
		return nil, err
	}
	if err := checkToken(agentID, r.Token); err != nil {
		return nil, err
	}
	if len(r.Result) == 0 {
		r.Result = json.RawMessage("null")
	}
	if !json.Valid(r.Result) {
		return nil, badRequest("result is not valid JSON")
	}
	if err := s.store.Commit(ctx, r.Token, r.Result); err != nil {
		return nil, err
	}
	s.forget(agentID, r.Token.JobID)
	arts, err := s.store.Artifacts(ctx, r.Token.JobID, r.Token.Generation)
	if err != nil {
		s.log.Error().Err(err).Str("job_id", r.Token.JobID).Msg("list manifest")
	}
	manifest := make([]string, 0, len(arts))
	for _, a := range arts {
		manifest = append(manifest, a.Key)
	}
	s.log.Info().Str("job_id", r.Token.JobID).Str("owner", r.Token.Owner).Int64("generation", r.Token.Generation).Int("artifacts", len(manifest)).Msg("result accepted")
	return protocol.ResultReply{Accepted: true, Manifest: manifest}, nil
}

func (s *Server) fail(ctx context.Context, agentID string, data []byte) (any, error) {
	var f protocol.Fail
	if err := decode(data, &f); err != nil {
		return nil, err
	}
	if err := checkToken(agentID, f.Token); err != nil {
		return nil, err
	}
	if err := s.store.Fail(ctx, f.Token, f.Reason, f.Requeue); err != nil {
		return nil, err
	}
	s.forget(agentID, f.Token.JobID)
	s.log.Info().Str("job_id", f.Token.JobID).Str("owner", f.Token.Owner).Int64("generation", f.Token.Generation).Bool("requeue", f.Requeue).Msg("job failure reported")
	if f.Requeue {
		s.Kick()
	}
	return protocol.Ack{OK: true}, nil
}

func (s *Server) forget(agentID, jobID string) {
	s.mu.Lock()
	if st := s.agents[agentID]; st != nil {
		delete(st.running, jobID)
	}
	s.mu.Unlock()
	s.Kick()
}

// idleAgents returns agents with free slots, in random order so no agent is
// favoured.
func (s *Server) idleAgents() []*agentState {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*agentState
	now := time.Now()
	for _, a := range s.agents {
		if now.Sub(a.lastSeen) > s.opts.OfflineAfter {
			continue
		}
		if len(a.running) < a.slots {
			out = append(out, a)
		}
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func (s *Server) scheduleOnce(ctx context.Context) {
	for _, a := range s.idleAgents() {
		for {
			s.mu.Lock()
			free := a.slots - len(a.running)
			owner := a.owner()
			current := s.agents[a.id] == a
			s.mu.Unlock()
			if free <= 0 || !current {
				break
			}
			lease, err := s.store.ClaimNext(ctx, owner, s.opts.LeaseTTL)
			if errors.Is(err, ErrNoJob) {
				return
			}
			if err != nil {
				s.log.Error().Err(err).Msg("claim next job")
				return
			}
			s.mu.Lock()
			a.running[lease.Token.JobID] = lease.Token
			s.mu.Unlock()
			s.sendAssign(ctx, a.id, lease)
		}
	}
}

func (s *Server) sendAssign(ctx context.Context, agentID string, lease Lease) {
	log := s.log.With().Str("job_id", lease.Token.JobID).Str("owner", lease.Token.Owner).Int64("generation", lease.Token.Generation).Logger()
	msg := protocol.Assign{Token: lease.Token, LeaseTTLMS: s.opts.LeaseTTL.Milliseconds(), Task: lease.Task}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := protocol.Request(rctx, s.nc, protocol.AgentSubject(agentID, protocol.VerbAssign), msg, &protocol.Ack{}); err != nil {
		// The agent did not take it: release at once rather than wait for
		// the lease to expire.
		log.Warn().Err(err).Msg("assign not accepted; releasing")
		if ferr := s.store.Fail(ctx, lease.Token, "assign not accepted: "+err.Error(), true); ferr != nil && !errors.Is(ferr, fencing.ErrStale) {
			log.Error().Err(ferr).Msg("release job")
		}
		s.forget(agentID, lease.Token.JobID)
		return
	}
	log.Info().Str("agent_id", agentID).Msg("job assigned")
}

func (s *Server) reapOnce(ctx context.Context) {
	toks, err := s.store.ReclaimExpired(ctx, 100)
	if err != nil {
		s.log.Error().Err(err).Msg("reclaim expired leases")
		return
	}
	for _, t := range toks {
		s.log.Info().Str("job_id", t.JobID).Str("owner", t.Owner).Int64("generation", t.Generation).Msg("lease expired; job reclaimed")
		s.forget(t.AgentID(), t.JobID)
		s.Revoke(t, "lease expired")
	}
}

// Revoke pushes a revoke for tok to its agent. Delivery is best effort: the
// token is already stale in the store, so the agent learns it at its next
// fenced call or its self-fence deadline at the latest.
func (s *Server) Revoke(tok fencing.Token, reason string) {
	data, _ := json.Marshal(protocol.Revoke{Token: tok, Reason: reason})
	if err := s.nc.Publish(protocol.AgentSubject(tok.AgentID(), protocol.VerbRevoke), data); err != nil {
		s.log.Warn().Err(err).Str("job_id", tok.JobID).Msg("push revoke")
	}
}

// Reassign moves a job to another connected agent: the store raises the
// generation, the old owner is revoked and the new one assigned.
func (s *Server) Reassign(ctx context.Context, jobID, agentID string, revokeOld bool) (Lease, error) {
	s.mu.Lock()
	st := s.agents[agentID]
	var owner string
	if st != nil {
		owner = st.owner()
	}
	s.mu.Unlock()
	if st == nil {
		return Lease{}, fmt.Errorf("reassign job %s: agent %s is not connected", jobID, agentID)
	}
	before, err := s.store.Get(ctx, jobID)
	if err != nil {
		return Lease{}, fmt.Errorf("reassign job %s: %w", jobID, err)
	}
	lease, err := s.store.Reassign(ctx, jobID, owner, s.opts.LeaseTTL)
	if err != nil {
		return Lease{}, fmt.Errorf("reassign job %s: %w", jobID, err)
	}
	if before.WorkerID != "" {
		old := fencing.Token{JobID: jobID, Owner: before.WorkerID, Generation: before.Generation}
		s.forget(old.AgentID(), jobID)
		if revokeOld {
			s.Revoke(old, "reassigned")
		}
	}
	s.mu.Lock()
	st.running[jobID] = lease.Token
	s.mu.Unlock()
	s.sendAssign(ctx, agentID, lease)
	return lease, nil
}
