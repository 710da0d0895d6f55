package coordinator

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/outbox"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// ServiceName is the micro service name; it is also the queue group, so
// several coordinators can serve the same subjects.
const ServiceName = "edgecoord"

// InboxPrefix is the reply inbox prefix of coordinator connections. It lies
// outside every agent's _INBOX.<agent_id>, so NATS permissions can give the
// coordinator its own inbox without the agents' (examples/nats-server.conf).
const InboxPrefix = "_INBOX_edgecoord"

// Options configures a Server.
type Options struct {
	ID               string        // coordinator id, shown in service info, hello replies and the registry
	Version          string        // semantic version for the micro service
	LeaseTTL         time.Duration // granted on claim and renewal
	ReapInterval     time.Duration // how often expired leases are reclaimed (one sweep)
	ScheduleInterval time.Duration // how often queued jobs are handed out
	HeartbeatEvery   time.Duration // asked of agents
	OfflineAfter     time.Duration // an agent silent this long (database clock) gets no new jobs
	AssignTimeout    time.Duration // how long an agent has to accept an assign (default 5s)
	// Presigner signs upload URLs for agents in presigned mode; nil answers
	// the upload verb with 503 and tells agents to upload directly.
	Presigner     Presigner
	PresignExpiry time.Duration // validity of a presigned URL (default 15m)
	// MaxConcurrent is how many agent requests are handled at once, across
	// every verb (default 64).
	MaxConcurrent int
	// RequestRate and RequestBurst are each agent's request budget: a
	// token bucket per agent id (the subject's), refilled at RequestRate
	// per second up to RequestBurst. A request past it is refused before
	// any store work (docs/security.md, "Agent request budget"). Zero
	// RequestRate sets no budget.
	RequestRate  int
	RequestBurst int
	Log          zerolog.Logger

	// Outbox publishes accepted results through the transactional outbox
	// (outbox.go); zero publishes nothing.
	Outbox outbox.Options

	// ProjectLimits and DefaultProjectLimit bound the jobs of a project in
	// progress at once (ClaimRequest); zero means no limit.
	ProjectLimits       map[string]int
	DefaultProjectLimit int
	// Phones is the rule of which phones a project may use
	// (projects.<name>.phones); nil lets every project use every phone.
	Phones *PhoneRule
	// Retry is the backoff of retried attempts, set on the store by New
	// (zero: the store keeps its policy, DefaultRetryPolicy unless set).
	Retry jobstore.RetryPolicy
	// Exports is the periodic export of the dataset into the bucket
	// (exports.go); off without a bucket or with Every 0.
	Exports ExportOptions
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
	if o.AssignTimeout <= 0 {
		o.AssignTimeout = 5 * time.Second
	}
	if o.PresignExpiry <= 0 {
		o.PresignExpiry = 15 * time.Minute
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = 64
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

// Server serves the agent verbs over NATS and runs the scheduler and the
// reaper. Construct it with New, then Run it.
//
// A Server keeps no agent or job state of its own: presence, sessions,
// phones, drain flags and every lease live in the store, so several Servers
// sharing one store (PostgreSQL) and one NATS queue group act as one
// coordinator. Each request reaches one of them; each scheduler and reaper
// pass of any of them sees every agent and every job.
type Server struct {
	nc      *nats.Conn
	store   jobstore.Store
	opts    Options
	log     zerolog.Logger
	metrics *metrics

	kick       chan struct{}
	bg         sync.WaitGroup // assigns and pushes in flight
	handling   sync.WaitGroup // requests being handled
	handlingMu sync.Mutex
	stopping   bool        // Run is returning: no new request is handled
	serving    atomic.Bool // every endpoint is subscribed

	mu sync.Mutex
	// full holds agents that said they have no free slot: a heartbeat
	// with free 0, or a refused assign for want of a slot (their view of
	// their load can be ahead of the store's, e.g. a job reassigned away
	// is still stopping there). It lasts until they report a free slot: a
	// heartbeat or hello saying so, or an accepted result or failure
	// report of one of their jobs, whose slot the agent freed when it
	// began that call.
	full map[string]bool
	// freed counts, by agent, the reports of a free slot that cleared full
	// (scheduler.go, markFull).
	freed map[string]uint64

	agentsMu sync.Mutex // the agent list of the scheduler and the reaper (scheduler.go)
	agents   []jobstore.Agent
	agentsAt time.Time
	// dups are the serials several online agents report in the agent list
	// (DuplicateSerials), refused to every project while they last.
	dups map[string][]string

	fx *effects // the effect verb, the in-doubt sweep and the outbox (effects.go)

	updates lastUpdates // the update state each agent last reported (releases.go)

	exporter *Exporter // the periodic export into the bucket; nil when off (exports.go)

	budget  *budget       // each agent's request budget (budget.go)
	revoked revokedAgents // agents revoked by the operator (revoked.go)
	known   knownAgents   // the agent ids the store knows, for metric labels
}

// New returns a Server that uses nc and store.
func New(nc *nats.Conn, store jobstore.Store, opts Options) *Server {
	opts.defaults()
	s := &Server{
		nc:    nc,
		store: store,
		opts:  opts,
		log:   opts.Log.With().Str("component", "coordinator").Str("coordinator_id", opts.ID).Logger(),
		kick:  make(chan struct{}, 1),
		full:  map[string]bool{},
		freed: map[string]uint64{},
	}
	if opts.RequestRate > 0 {
		s.budget = newBudget(opts.RequestRate, opts.RequestBurst)
	}
	if opts.Retry != (jobstore.RetryPolicy{}) {
		store.SetRetryPolicy(opts.Retry)
	}
	s.metrics = newMetrics(store, opts.OfflineAfter)
	s.fx = newEffects(s)
	if opts.Exports.Bucket != nil && opts.Exports.Every > 0 {
		e, err := NewExporter(store, opts.ID, opts.Exports, s.log)
		if err != nil {
			s.log.Warn().Err(err).Msg("exports: off")
		} else {
			s.exporter = e
			s.metrics.reg.MustRegister(e.collectors()...)
		}
	}
	return s
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
		protocol.VerbEffect:    s.effect,
	}
	// Requests are handled by MaxConcurrent long-lived workers (their
	// stacks, once grown, stay grown).
	work := make(chan func())
	var workers sync.WaitGroup
	for range s.opts.MaxConcurrent {
		workers.Go(func() {
			for f := range work {
				f()
			}
		})
	}
	stopHandling := func() {
		s.handlingMu.Lock()
		s.stopping = true
		s.handlingMu.Unlock()
		s.handling.Wait()
		close(work)
		workers.Wait()
	}
	s.handlingMu.Lock()
	s.stopping = false
	s.handlingMu.Unlock()
	for _, verb := range protocol.CoordVerbs {
		h := handlers[verb]
		if err := svc.AddEndpoint(verb, s.wrap(ctx, work, verb, h), micro.WithEndpointSubject(protocol.CoordWildcard(verb))); err != nil {
			_ = svc.Stop()
			stopHandling()
			return fmt.Errorf("add endpoint %s: %w", verb, err)
		}
	}
	// Ready only once the server holds the subscriptions: until a flush
	// returns, an agent's request may still find no responder. A
	// connection lost meanwhile sends them again when it is back.
	if err := s.nc.FlushTimeout(10 * time.Second); err != nil {
		s.log.Warn().Err(err).Msg("the NATS server did not confirm the agent verbs' subscriptions; serving them once it is reached again")
	}
	s.serving.Store(true)
	defer s.serving.Store(false)
	s.log.Info().Dur("lease_ttl", s.opts.LeaseTTL).Dur("reap_interval", s.opts.ReapInterval).
		Bool("presigned_uploads", s.opts.Presigner != nil).Msg("coordinator serving")

	var wg sync.WaitGroup
	wg.Go(func() { s.loop(ctx, s.opts.ReapInterval, nil, s.reapOnce) })
	wg.Go(func() { s.loop(ctx, s.opts.ScheduleInterval, s.kick, s.scheduleOnce) })
	wg.Go(func() { s.fx.run(ctx) })
	s.refreshRevoked(ctx)
	wg.Go(func() { s.loop(ctx, revokedEvery, nil, s.refreshRevoked) })
	if s.exporter != nil {
		wg.Go(func() { s.exporter.run(ctx) })
	}
	<-ctx.Done()
	err = svc.Stop()
	stopHandling()
	wg.Wait()
	s.bg.Wait()
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

func unavailable(format string, a ...any) error {
	return &handlerError{code: protocol.CodeUnavailable, msg: fmt.Sprintf(format, a...)}
}

func (s *Server) wrap(ctx context.Context, work chan<- func(), verb string, h func(context.Context, string, []byte) (any, error)) micro.HandlerFunc {
	return func(req micro.Request) {
		// The micro service delivers an endpoint's requests one at a time;
		// each is handed to one of MaxConcurrent workers shared by every
		// verb, so that one request waiting for the store does not hold up
		// the others. When all are busy the delivery waits. The reply is
		// published by the worker rather than through req, which the micro
		// service reads when this handler returns.
		s.handlingMu.Lock()
		if s.stopping {
			// Run is returning: the subscription is draining.
			s.handlingMu.Unlock()
			_ = req.Error(strconv.Itoa(protocol.CodeUnavailable), "coordinator stopping", nil)
			return
		}
		s.handling.Add(1)
		s.handlingMu.Unlock()
		subject, reply, data := req.Subject(), req.Reply(), req.Data()
		if !s.admit(verb, subject, reply) {
			s.handling.Done()
			return
		}
		work <- func() {
			defer s.handling.Done()
			s.handle(ctx, verb, h, subject, reply, data)
		}
	}
}

// admit decides, before any store work, whether a request is handled: a
// request whose reply subject is not its agent's own inbox is dropped
// unanswered, and one past its agent's budget is refused: the first of a
// run of refusals is answered 503, the rest are dropped unanswered, so
// that a flood costs no reply each; one of a revoked agent is answered
// 403. All are counted per agent (docs/security.md, "Agent request
// budget"). A subject that names no
// agent is left to handle, which refuses it.
func (s *Server) admit(verb, subject, reply string) bool {
	agentID, v, err := protocol.ParseCoordSubject(subject)
	if err != nil || v != verb {
		return true
	}
	if reply != "" && !ownInbox(agentID, reply) {
		s.metrics.refusedRequest(s.known.label(agentID), refusedReply)
		return false
	}
	if s.refuseRevoked(agentID, reply) {
		return false
	}
	if ok, answer := s.budget.allow(agentID); !ok {
		s.metrics.refusedRequest(s.known.label(agentID), refusedRate)
		if answer {
			s.replyError(reply, protocol.CodeUnavailable, "request budget of this agent spent: slow down")
		}
		return false
	}
	return true
}

// handle serves one request and publishes its reply.
func (s *Server) handle(ctx context.Context, verb string, h func(context.Context, string, []byte) (any, error), subject, reply string, data []byte) {
	agentID, v, err := protocol.ParseCoordSubject(subject)
	if err != nil || v != verb {
		s.metrics.request(verb, protocol.CodeBadRequest)
		s.replyError(reply, protocol.CodeBadRequest, "bad subject")
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := h(rctx, agentID, data)
	if err != nil {
		code, msg := classify(err)
		s.metrics.request(verb, code)
		var ev *zerolog.Event
		switch code {
		case protocol.CodeUnavailable:
			ev = s.log.Error()
		case protocol.CodeForbidden:
			ev = s.log.Warn()
		case protocol.CodeStale:
			ev = s.log.Info()
		default:
			ev = s.log.Debug()
		}
		if ev.Enabled() {
			ev = ev.Str("agent_id", agentID).Str("verb", verb).Int("code", code).Err(err)
			var body struct {
				Token fencing.Token `json:"token"`
			}
			if json.Unmarshal(data, &body) == nil && body.Token.JobID != "" {
				ev = ev.Str("job_id", body.Token.JobID).Str("owner", body.Token.Owner).Int64("generation", body.Token.Generation)
			}
			ev.Msg("request refused")
		}
		s.replyError(reply, code, msg)
		return
	}
	s.metrics.request(verb, 200)
	body, err := json.Marshal(resp)
	if err != nil {
		s.log.Error().Err(err).Str("verb", verb).Msg("encode reply")
		s.replyError(reply, protocol.CodeUnavailable, "encode reply")
		return
	}
	s.respond(reply, &nats.Msg{Data: body})
}

// replyError answers a request with a micro service error (code and
// description headers).
func (s *Server) replyError(reply string, code int, msg string) {
	s.respond(reply, &nats.Msg{Header: nats.Header{
		micro.ErrorHeader:     []string{msg},
		micro.ErrorCodeHeader: []string{strconv.Itoa(code)},
	}})
}

func (s *Server) respond(reply string, m *nats.Msg) {
	if reply == "" {
		return
	}
	m.Subject = reply
	if err := s.nc.PublishMsg(m); err != nil {
		s.log.Warn().Err(err).Msg("publish reply")
	}
}

func classify(err error) (int, string) {
	var he *handlerError
	switch {
	case errors.As(err, &he):
		return he.code, he.msg
	case errors.Is(err, fencing.ErrStale):
		return protocol.CodeStale, "stale token"
	case errors.Is(err, jobstore.ErrNotFound):
		return protocol.CodeUnknownJob, "unknown job"
	case errors.Is(err, jobstore.ErrConflict):
		return protocol.CodeStale, "job not in progress under this token"
	case errors.Is(err, jobstore.ErrNoSession):
		return protocol.CodeUnavailable, "unknown agent session: send hello"
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
// subject the request came on. A token of another agent is refused with
// 403, counted, and counted in the store's agent_refusals under the agent
// and verb (detail "forbidden: ...", docs/security.md, "Refused
// requests"): the agent on the subject tried to act on a lease that is not
// its own.
func (s *Server) checkToken(ctx context.Context, verb, agentID string, tok fencing.Token) error {
	if err := tok.Validate(); err != nil {
		return badRequest("%v", err)
	}
	if tok.AgentID() == agentID {
		return nil
	}
	s.metrics.forbidden.WithLabelValues(verb).Inc()
	detail := fmt.Sprintf("forbidden: token of agent %s sent on the subject of agent %s", tok.AgentID(), agentID)
	if err := s.store.RecordRefused(ctx, agentID, verb, tok, detail); err != nil {
		s.log.Error().Err(err).Str("job_id", tok.JobID).Msg("record forbidden attempt")
	}
	s.log.Warn().Str("agent_id", agentID).Str("verb", verb).Str("job_id", tok.JobID).Str("owner", tok.Owner).
		Int64("generation", tok.Generation).Msg("token of another agent refused")
	return &handlerError{code: protocol.CodeForbidden, msg: "token owner is not this agent"}
}

// fenced counts a stale-token refusal of a fenced store call.
func (s *Server) fenced(verb string, err error) error {
	if errors.Is(err, fencing.ErrStale) {
		s.metrics.stale.WithLabelValues(verb).Inc()
	}
	return err
}

func (s *Server) helloReply(a jobstore.Agent) protocol.HelloReply {
	mode := protocol.UploadModeDirect
	if s.opts.Presigner != nil {
		mode = protocol.UploadModePresigned
	}
	return protocol.HelloReply{
		LeaseTTLMS:    s.opts.LeaseTTL.Milliseconds(),
		HeartbeatMS:   s.opts.HeartbeatEvery.Milliseconds(),
		ServerTime:    time.Now().UTC(),
		UploadMode:    mode,
		CoordinatorID: s.opts.ID,
		Settings:      a.Settings,
	}
}

// checkUploadMode refuses (400) a hello whose storage mode this coordinator
// cannot serve (docs/protocol.md section 5, hello): an agent in presigned
// mode needs a coordinator that presigns (storage configured), or every
// upload of its jobs would be refused. A direct agent uploads with its own
// credentials and needs nothing of the coordinator; an agent that says no
// mode is accepted as before.
func (s *Server) checkUploadMode(agentID string, h protocol.Hello) error {
	switch h.UploadMode {
	case "", protocol.UploadModeDirect:
		return nil
	case protocol.UploadModePresigned:
		if s.opts.Presigner != nil {
			return nil
		}
		s.log.Warn().Str("agent_id", agentID).Str("boot_id", h.BootID).
			Msg("agent refused: it uploads in presigned mode, but this coordinator has no storage configured to presign (upload_mode direct)")
		return badRequest("upload_mode: storage mode mismatch: the agent uploads in presigned mode, but this coordinator does not presign (upload_mode direct, no storage configured); configure the coordinator's storage, or set storage.mode direct on the agent")
	}
	return badRequest("upload_mode: %q is not %s or %s", h.UploadMode, protocol.UploadModeDirect, protocol.UploadModePresigned)
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
	if err := s.checkUploadMode(agentID, h); err != nil {
		return nil, err
	}
	if h.Probe {
		// A connectivity check (edgeagent doctor): answered like a hello,
		// but it opens no session and releases nothing.
		a, err := s.store.GetAgent(ctx, agentID)
		if err != nil && !errors.Is(err, jobstore.ErrAgentNotFound) {
			return nil, err
		}
		s.log.Debug().Str("agent_id", agentID).Msg("hello probe")
		return s.helloReply(a), nil
	}
	a, released, err := s.store.AgentHello(ctx, jobstore.AgentHello{
		AgentID: agentID, BootID: h.BootID, Version: h.Version, Devices: h.Devices,
		Capabilities: h.Capabilities, Slots: h.Slots, Draining: h.Draining, CoordinatorID: s.opts.ID,
	})
	if err != nil {
		return nil, err
	}
	s.known.add(agentID)
	s.noteUpdate(ctx, agentID, h.Update)
	for _, tok := range released {
		s.metrics.reclaimed.WithLabelValues("agent_restarted").Inc()
		s.attemptTaken(ctx, tok, protocol.CauseAgentRestarted)
		s.jobLog(tok).Info().Str("boot_id", h.BootID).Msg("job reclaimed: agent restarted")
		s.Revoke(tok, "agent restarted")
	}
	s.log.Info().Str("agent_id", agentID).Str("boot_id", h.BootID).Str("version", h.Version).
		Int("devices", len(h.Devices)).Int("usable_devices", len(protocol.ReadyDevices(h.Devices))).
		Int("slots", h.Slots).Bool("draining", h.Draining).Int("released", len(released)).Msg("agent hello")
	s.setFull(agentID, false)
	s.noteAgent(a)
	// A phone serial another online agent reports too is refused, and
	// logged, now rather than at the next grant (phonerule.go).
	if _, _, err := s.agentList(ctx, true); err != nil {
		s.log.Warn().Err(err).Str("agent_id", agentID).Msg("list agents after a hello")
	}
	if a.Draining && !h.Draining {
		// The operator drained this agent before it (re)started: tell it.
		s.pushAsync(agentID, protocol.Control{Command: protocol.ControlDrain})
	}
	s.Kick()
	return s.helloReply(a), nil
}

func (s *Server) heartbeat(ctx context.Context, agentID string, data []byte) (any, error) {
	var hb protocol.Heartbeat
	if err := decode(data, &hb); err != nil {
		return nil, err
	}
	if hb.BootID == "" {
		return nil, badRequest("boot_id is empty")
	}
	freed := s.freeReports(agentID)
	a, err := s.store.AgentHeartbeat(ctx, jobstore.AgentBeat{AgentID: agentID, BootID: hb.BootID, Devices: hb.Devices, Draining: hb.Draining})
	if err != nil {
		return nil, err
	}
	// An agent that runs jobs and says it has no free slot gets no assign
	// from this coordinator until it reports one again; unless it did while
	// this heartbeat was handled (a result accepted meanwhile), which this
	// heartbeat may have been sent before.
	if hb.Free <= 0 && len(hb.Running) > 0 {
		s.markFull(agentID, freed)
	} else {
		s.setFull(agentID, false)
	}
	s.noteAgent(a)
	s.noteUpdate(ctx, agentID, hb.Update)
	if hb.Free > 0 && !a.Draining && !a.AgentDraining {
		s.Kick()
	}
	return protocol.Ack{OK: true}, nil
}

func (s *Server) renew(ctx context.Context, agentID string, data []byte) (any, error) {
	var r protocol.Renew
	if err := decode(data, &r); err != nil {
		return nil, err
	}
	if err := s.checkToken(ctx, jobstore.VerbRenew, agentID, r.Token); err != nil {
		return nil, err
	}
	exp, err := s.store.Renew(ctx, r.Token, s.opts.LeaseTTL)
	if err != nil {
		return nil, s.fenced(jobstore.VerbRenew, err)
	}
	return protocol.RenewReply{LeaseTTLMS: s.opts.LeaseTTL.Milliseconds(), ExpiresAt: exp}, nil
}

// maxPresignedSize is the largest object one presigned PUT can carry (the
// S3 limit of a single PUT).
const maxPresignedSize = 5 << 30

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// headerSafe reports whether v can be sent as an S3 metadata header value
// unchanged: printable US-ASCII.
func headerSafe(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// upload authorises one object for the current token and answers with a
// presigned PUT whose signed headers carry If-None-Match: * and the stamps,
// so the agent can neither overwrite an object nor drop a stamp.
func (s *Server) upload(ctx context.Context, agentID string, data []byte) (any, error) {
	var u protocol.Upload
	if err := decode(data, &u); err != nil {
		return nil, err
	}
	if s.opts.Presigner == nil {
		return nil, unavailable("presigned uploads are not enabled on this coordinator (no storage configured)")
	}
	if err := s.checkToken(ctx, jobstore.VerbUpload, agentID, u.Token); err != nil {
		return nil, err
	}
	if err := protocol.ValidateArtifactName(u.Name); err != nil {
		return nil, badRequest("%v", err)
	}
	if !sha256Hex.MatchString(u.SHA256) {
		return nil, badRequest("sha256 must be 64 lowercase hex digits")
	}
	if u.Size < 0 || u.Size > maxPresignedSize {
		return nil, badRequest("size %d out of range 0..%d", u.Size, int64(maxPresignedSize))
	}
	if u.ContentType == "" {
		u.ContentType = "application/octet-stream"
	}
	if !headerSafe(u.ContentType) || !headerSafe(u.Token.Owner) {
		return nil, badRequest("content type and owner must be printable ASCII")
	}
	if err := s.fenced(jobstore.VerbUpload, s.store.AuthorizeUpload(ctx, u.Token, u.Name)); err != nil {
		return nil, err
	}
	key := u.Token.ObjectKey(u.Name)
	headers := UploadHeaders(u.Token, u.SHA256, u.ContentType)
	signed := http.Header{}
	for k, v := range headers {
		signed.Set(k, v)
	}
	expires := time.Now().Add(s.opts.PresignExpiry).UTC()
	url, err := s.opts.Presigner.PresignPut(ctx, key, signed, s.opts.PresignExpiry)
	if err != nil {
		return nil, unavailable("presign upload: %v", err)
	}
	s.jobLog(u.Token).Debug().Str("key", key).Int64("size", u.Size).Msg("upload authorised")
	return protocol.UploadReply{Key: key, URL: url, Method: http.MethodPut, Headers: headers, Expires: expires}, nil
}

// UploadHeaders are the headers of a presigned artifact PUT, all signed
// into the URL: If-None-Match: * (never overwrite), the three token stamps,
// the content's SHA-256 as metadata and as x-amz-checksum-sha256 (base64),
// so the storage refuses content other than what was authorised, and its
// type. The agent sends them verbatim. sha256Hex must be 64 hex digits.
func UploadHeaders(tok fencing.Token, sha256Hex, contentType string) map[string]string {
	sum, _ := hex.DecodeString(sha256Hex)
	return map[string]string{
		"If-None-Match":                        "*",
		"Content-Type":                         contentType,
		"x-amz-meta-" + fencing.MetaJobID:      tok.JobID,
		"x-amz-meta-" + fencing.MetaOwner:      tok.Owner,
		"x-amz-meta-" + fencing.MetaGeneration: strconv.FormatInt(tok.Generation, 10),
		"x-amz-meta-sha256":                    sha256Hex,
		"x-amz-checksum-sha256":                base64.StdEncoding.EncodeToString(sum),
	}
}

func (s *Server) artifact(ctx context.Context, agentID string, data []byte) (any, error) {
	var a protocol.Artifact
	if err := decode(data, &a); err != nil {
		return nil, err
	}
	if err := s.checkToken(ctx, jobstore.VerbArtifact, agentID, a.Token); err != nil {
		return nil, err
	}
	if err := protocol.ValidateArtifactName(a.Name); err != nil {
		return nil, badRequest("%v", err)
	}
	if want := a.Token.ObjectKey(a.Name); a.Key != want {
		return nil, badRequest("artifact key %q: want %q", a.Key, want)
	}
	err := s.store.RegisterArtifact(ctx, a.Token, jobstore.ArtifactRecord{
		JobID: a.Token.JobID, Generation: a.Token.Generation, Owner: a.Token.Owner,
		Name: a.Name, Key: a.Key, Size: a.Size, SHA256: a.SHA256, ContentType: a.ContentType, ETag: a.ETag,
	})
	if err != nil {
		return nil, s.fenced(jobstore.VerbArtifact, err)
	}
	return protocol.Ack{OK: true}, nil
}

func (s *Server) result(ctx context.Context, agentID string, data []byte) (any, error) {
	var r protocol.Result
	if err := decode(data, &r); err != nil {
		return nil, err
	}
	if err := s.checkToken(ctx, jobstore.VerbResult, agentID, r.Token); err != nil {
		return nil, err
	}
	if len(r.Result) == 0 {
		r.Result = json.RawMessage("null")
	}
	if !json.Valid(r.Result) {
		return nil, badRequest("result is not valid JSON")
	}
	// Observations are the agent's input: checked whole before anything
	// is written (docs/dataset.md, "How rows are written").
	if err := jobstore.CheckObservations(r.Observations); err != nil {
		return nil, badRequest("%v", err)
	}
	manifest, err := s.commitResult(ctx, r.Token, r.Result, r.Observations)
	if errors.Is(err, fencing.ErrStale) {
		// A retry whose first attempt was accepted but whose reply was
		// lost: the job already holds this very token's result. Answer as
		// the first time; nothing is written again.
		if m, ok := s.replayedResult(ctx, r.Token, r.Result); ok {
			s.jobLog(r.Token).Info().Msg("result already accepted; replying again")
			return protocol.ResultReply{Accepted: true, Manifest: m}, nil
		}
	}
	if err != nil {
		return nil, s.fenced(jobstore.VerbResult, err)
	}
	s.metrics.commits.Inc()
	s.metrics.jobEnded(jobstore.StatusSucceeded)
	s.log.Info().Str("job_id", r.Token.JobID).Str("owner", r.Token.Owner).Int64("generation", r.Token.Generation).
		Int("artifacts", len(manifest)).Int("observations", len(r.Observations)).Msg("result accepted")
	// The agent freed the job's slot when it sent the result: the next job
	// may be granted to it now, whatever its last heartbeat said.
	s.setFull(agentID, false)
	s.Kick()
	return protocol.ResultReply{Accepted: true, Manifest: manifest}, nil
}

// replayedResult reports whether result, sent with tok, is the job's
// accepted result of that very token, and returns its manifest. Another
// result under the same token is not a retry: it stays refused.
func (s *Server) replayedResult(ctx context.Context, tok fencing.Token, result json.RawMessage) ([]string, bool) {
	j, err := s.store.Get(ctx, tok.JobID)
	if err != nil || j.Status != jobstore.StatusSucceeded || j.CompletedBy != tok.Owner || j.Generation != tok.Generation || !sameJSON(j.Result, result) {
		return nil, false
	}
	arts, err := s.store.Artifacts(ctx, tok.JobID, tok.Generation)
	if err != nil {
		return nil, false
	}
	m := make([]string, 0, len(arts))
	for _, a := range arts {
		m = append(m, a.Key)
	}
	return m, true
}

// sameJSON reports whether two JSON documents hold the same value, whatever
// their spacing and key order (a store may normalise what it keeps). An
// empty document is null.
func sameJSON(a, b json.RawMessage) bool {
	decode := func(m json.RawMessage) (any, bool) {
		if len(m) == 0 {
			return nil, true
		}
		d := json.NewDecoder(bytes.NewReader(m))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return nil, false
		}
		return v, true
	}
	va, okA := decode(a)
	vb, okB := decode(b)
	return okA && okB && reflect.DeepEqual(va, vb)
}

func (s *Server) fail(ctx context.Context, agentID string, data []byte) (any, error) {
	var f protocol.Fail
	if err := decode(data, &f); err != nil {
		return nil, err
	}
	if err := s.checkToken(ctx, jobstore.VerbFail, agentID, f.Token); err != nil {
		return nil, err
	}
	fl := jobstore.Failure{Reason: f.Reason, Class: f.Class, Cause: f.Cause, Requeue: f.Requeue}
	leaving := fl.AgentLeaving()
	if leaving {
		// The agent is leaving: it gets no job until it reports a free
		// slot again (a hello or a heartbeat), whatever the coordinator
		// last heard of its draining. Marked before the job is queued
		// again, so that no scheduling round in between grants it back.
		s.setFull(agentID, true)
	}
	if err := s.failJob(ctx, f.Token, fl); err != nil {
		return nil, s.fenced(jobstore.VerbFail, err)
	}
	s.metrics.attemptEnded(fl.RecordedClass(), fl.Cause)
	state := fl.Outcome()
	if fl.Retried() {
		state = jobstore.StatusQueued
		if st := s.endedState(ctx, f.Token); st != "" {
			state = st // no attempt left
		}
	}
	s.metrics.jobEnded(state)
	s.jobLog(f.Token).Info().Bool("requeue", f.Requeue).Str("class", fl.RecordedClass()).Str("cause", fl.Cause).
		Str("state", state).Msg("job failure reported")
	// The agent freed the job's slot when it sent the report (as for a
	// result), unless it is leaving.
	if !leaving {
		s.setFull(agentID, false)
	}
	s.Kick()
	return protocol.Ack{OK: true}, nil
}

// jobLog is the logger for events of one token's job.
func (s *Server) jobLog(tok fencing.Token) *zerolog.Logger {
	l := s.log.With().Str("job_id", tok.JobID).Str("owner", tok.Owner).Int64("generation", tok.Generation).Logger()
	return &l
}
