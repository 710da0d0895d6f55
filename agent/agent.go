package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uploader"
)

// Stop causes besides the fencing package's ErrStale, ErrRevoked and
// ErrLeaseExpired.
var (
	// ErrShutdown is the stop cause of jobs cut short by the agent stopping
	// at once (Run's context cancelled).
	ErrShutdown = errors.New("agent shutting down")
	// ErrCancelled is the stop cause of a job cancelled by the coordinator
	// (control cancel).
	ErrCancelled = errors.New("cancelled by coordinator")
	// ErrReleased is the stop cause of a job the agent gave back with a
	// fenced fail (requeue) because it was shutting down.
	ErrReleased = errors.New("released")
	// ErrOutcomeUnknown is the stop cause of a job whose final call (result,
	// fail) was answered 409 after an earlier attempt got no answer: the
	// earlier attempt may have been accepted. The coordinator's store is
	// authoritative.
	ErrOutcomeUnknown = errors.New("outcome unknown: an earlier attempt may have been accepted")
	// ErrDeadline is the stop cause of a job whose deadline passed
	// (Assign.DeadlineMS counted from the assign's receipt): its work was
	// cut short as on a revoke and it reported fail with cause deadline.
	ErrDeadline = errors.New("deadline passed")
	// ErrUnknownJob is the stop cause of a job whose renewal, upload
	// authorisation, registration, result or failure report was answered
	// 404: the coordinator knows no such job, so the job stops at once as
	// on a 409 (docs/protocol.md section 4).
	ErrUnknownJob = errors.New("unknown job: the coordinator knows no such job")
)

// Phone runs the steps of one job on one acquired phone.
type Phone interface {
	Serial() string
	// RunStep performs one step and returns what it captured.
	RunStep(ctx context.Context, step protocol.Step) ([]capture.Artifact, error)
	// OpLog returns the operation log so far as an artifact, and how many
	// entries it holds.
	OpLog() (capture.Artifact, int)
}

// Observer is implemented by a Phone whose steps read values off the
// screen (extract): LastObservation returns what the step RunStep last ran
// read, or nil.
type Observer interface {
	LastObservation() *protocol.Observation
}

// AppReporter is implemented by a Phone that knows the versions of the
// apps the job launched or read values from, for the result.
type AppReporter interface {
	Apps() []protocol.AppVersion
}

// Phones hands out phones for jobs, one job per phone.
type Phones interface {
	// Acquire locks a phone matching sel for the job whose context is
	// jobCtx, until release is called.
	Acquire(jobCtx context.Context, sel protocol.DeviceSelector) (p Phone, release func(), err error)
	// Inventory lists the phones attached now.
	Inventory() []protocol.Device
}

// UnicodeTyper is implemented by Phones that know, without I/O, whether a
// phone can type text beyond ASCII (it has the input method
// capture.IMEPackage); known is false when the phone cannot tell.
type UnicodeTyper interface {
	TypesUnicode(serial string) (ok, known bool)
}

// BusyReporter is implemented by Phones that can tell whether a phone is
// held by a job (for the status document).
type BusyReporter interface {
	Busy(serial string) bool
}

// OpLogConfigurer is implemented by Phones whose operation log options can
// change at run time (setting capture.oplog_text).
type OpLogConfigurer interface {
	SetOpLogOptions(capture.OpLogOptions)
}

// Options configures an Agent.
type Options struct {
	AgentID        string
	Version        string
	Conn           *nats.Conn
	Phones         Phones
	Store          uploader.Uploader
	Slots          int           // jobs run at once; the concurrency setting overrides it
	SafetyMargin   time.Duration // subtracted from the TTL for the self-fence deadline
	RequestTimeout time.Duration // per NATS request
	Log            zerolog.Logger
	// LogLevel, when set, is the switch the log_level setting turns.
	LogLevel *LevelSwitch
	// StateDir, when set, is where runtime settings are kept
	// (SettingsFile); they are loaded by New.
	StateDir string
	// OnStop is called once for every job that stopped (revoke, 409,
	// deadline, cancel, shutdown, release) after the job's work has ended
	// and before its slot is freed: the place to drop spooled work of that
	// token's generation. It must not block for long.
	OnStop func(tok fencing.Token, cause error)
	// InteractiveIdle is how long an interactive job waits for its next
	// step when the task does not say; default 5 minutes.
	InteractiveIdle time.Duration
	// GuardCheckInterval overrides the lease guard's periodic clock check
	// (fencing.WithCheckInterval).
	GuardCheckInterval time.Duration
	// WallClock overrides the wall clock of the lease guards (tests).
	WallClock func() time.Time
	// Registry, when set, receives the agent's metrics (the status
	// endpoint's /metrics serves it); default a registry of its own.
	Registry *prometheus.Registry
	// UploadMode is the agent's storage mode (protocol.UploadModeDirect
	// or UploadModePresigned), said in hello; a coordinator that cannot
	// presign refuses a presigned agent (400), and Run returns that
	// refusal. "" says nothing.
	UploadMode string
	// Update configures self-updates (update.go); the zero value refuses
	// every update.
	Update UpdateOptions
}

// StopRecord says when and why a job was stopped and what was cut short.
type StopRecord struct {
	Token    fencing.Token
	Cause    string
	Err      error
	At       time.Time
	CutShort string // the step or call in progress
	// Calls is how many fenced requests of the job had been published when
	// it stopped; none is published after (a release's fail excepted,
	// which is counted in).
	Calls int
}

// JobStatus is a running job as the agent sees it.
type JobStatus struct {
	Token    fencing.Token
	Step     int
	Deadline time.Time
}

const (
	maxStops  = 100
	maxErrors = 20
)

// Agent is the daemon core. Construct with New, then Run.
type Agent struct {
	opts    Options
	nc      *nats.Conn
	bootID  string
	owner   string
	log     zerolog.Logger
	started time.Time
	metrics *metrics

	mu   sync.Mutex
	jobs map[string]*job
	// ended holds the tokens this process has run to their end, so a
	// repeated assign can never start the same grant twice.
	ended    map[fencing.Token]time.Time
	changed  chan struct{} // closed and replaced whenever jobs changes
	stops    []StopRecord
	errs     []protocol.AgentError
	wg       sync.WaitGroup
	ttl      time.Duration
	slots    int
	draining bool // control drain
	shutdown bool // Shutdown called: no resume
	sleeping bool // the PC is going to sleep: no new jobs (sleep.go)
	closing  bool // Run is returning
	running  bool
	jobsCtx  context.Context
	sess     protocol.AgentConnection
	settings map[string]string
	idle     time.Duration
	oplogTxt bool
	rehello  chan struct{}
	// beat asks the session for a heartbeat now; owesBeat is set when an
	// assign was refused for want of a slot, so that the slot freeing is
	// reported at once.
	beat     chan struct{}
	owesBeat bool
	// reporting is held while a report of the agent's own state (hello or
	// heartbeat) is built and sent, until it is answered or given up on:
	// reports go one at a time, so the coordinator stores them in the
	// order the agent took them (report).
	reporting chan struct{}
	rpc       *rpc
	// runCtx is Run's context and cancelRun stops Run with a cause (an
	// update restart).
	runCtx    context.Context
	cancelRun context.CancelCauseFunc
	upd       updateState // update.go
}

// New validates opts and returns an agent with a fresh boot id. Settings
// kept in opts.StateDir are applied.
func New(opts Options) (*Agent, error) {
	if err := protocol.ValidateAgentID(opts.AgentID); err != nil {
		return nil, fmt.Errorf("new agent: %w", err)
	}
	if opts.Conn == nil || opts.Phones == nil || opts.Store == nil {
		return nil, errors.New("new agent: conn, phones and store are required")
	}
	if opts.Slots <= 0 {
		opts.Slots = 1
	}
	if opts.SafetyMargin <= 0 {
		opts.SafetyMargin = 2 * time.Second
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 5 * time.Second
	}
	if opts.InteractiveIdle <= 0 {
		opts.InteractiveIdle = 5 * time.Minute
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	var b [8]byte
	var err error
	if _, err = rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("new agent: boot id: %w", err)
	}
	a := &Agent{
		opts:      opts,
		nc:        opts.Conn,
		bootID:    hex.EncodeToString(b[:]),
		jobs:      map[string]*job{},
		ended:     map[fencing.Token]time.Time{},
		changed:   make(chan struct{}),
		slots:     opts.Slots,
		idle:      opts.InteractiveIdle,
		started:   time.Now(),
		rehello:   make(chan struct{}, 1),
		beat:      make(chan struct{}, 1),
		settings:  map[string]string{},
		reporting: make(chan struct{}, 1),
	}
	if a.metrics, err = newMetrics(opts.Registry); err != nil {
		return nil, fmt.Errorf("new agent: %w", err)
	}
	a.owner = fencing.Owner(opts.AgentID, a.bootID)
	a.initUpdate()
	a.log = opts.Log.With().Str("component", "agent").Str("agent_id", opts.AgentID).Str("boot_id", a.bootID).Logger()
	if opts.StateDir != "" {
		saved, err := loadSettings(opts.StateDir)
		if err != nil {
			return nil, fmt.Errorf("new agent: %w", err)
		}
		if len(saved) > 0 {
			if err := a.applySettings(saved, false); err != nil {
				a.log.Warn().Err(err).Msg("ignoring saved settings")
			} else {
				a.log.Info().Interface("settings", saved).Msg("applied saved settings")
			}
		}
	}
	return a, nil
}

// Owner returns "<agent_id>/<boot_id>" of this process.
func (a *Agent) Owner() string { return a.owner }

// BootID returns this process's boot id.
func (a *Agent) BootID() string { return a.bootID }

// Stops returns the most recent stops (up to 100), oldest first.
func (a *Agent) Stops() []StopRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]StopRecord(nil), a.stops...)
}

// Jobs returns the jobs running now.
func (a *Agent) Jobs() []JobStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]JobStatus, 0, len(a.jobs))
	for _, j := range a.jobs {
		out = append(out, j.status())
	}
	return out
}

// Ready reports whether NATS is connected and the coordinator accepted the
// agent's hello.
func (a *Agent) Ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sess.NATSConnected && a.sess.HelloAccepted
}

func (a *Agent) request(ctx context.Context, verb string, req, resp any) error {
	return a.requestGated(ctx, verb, req, resp, nil)
}

// requestGated sends one request to the coordinator; publish, when set,
// performs the publish (see job.publishGated).
func (a *Agent) requestGated(ctx context.Context, verb string, req, resp any, publish func(func() error) error) error {
	rctx, cancel := context.WithTimeout(ctx, a.opts.RequestTimeout)
	defer cancel()
	a.mu.Lock()
	r := a.rpc
	a.mu.Unlock()
	if r == nil {
		return errors.New("request: agent not running")
	}
	return r.request(rctx, protocol.CoordSubject(a.opts.AgentID, verb), req, resp, publish)
}

// noteError keeps err among the last errors shown by the status document.
func (a *Agent) noteError(what string, jobID string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errs = append(a.errs, protocol.AgentError{At: time.Now().UTC(), What: what, Error: err.Error(), JobID: jobID})
	if len(a.errs) > maxErrors {
		a.errs = a.errs[len(a.errs)-maxErrors:]
	}
}

// notifyLocked wakes whoever waits for the set of jobs to change.
func (a *Agent) notifyLocked() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// Run subscribes to the agent's subjects, says hello (again after every
// reconnect), keeps heartbeats going and runs assigned jobs until ctx is
// cancelled; running jobs are then stopped at once (see Shutdown for a
// graceful stop). On return every job has stopped and every goroutine the
// agent started has ended. Run returns an error when the coordinator
// refuses the agent (400 or 403 to hello).
func (a *Agent) Run(ctx context.Context) error {
	a.mu.Lock()
	if a.running {
		a.mu.Unlock()
		return errors.New("run agent: already running")
	}
	a.running = true
	a.mu.Unlock()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Jobs get their own context so that shutdown stops them with a cause
	// that says so.
	jobsCtx, stopJobs := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopJobs(ErrShutdown)

	statusCh := a.nc.StatusChanged(nats.CONNECTED, nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	defer a.nc.RemoveStatusListener(statusCh)

	a.mu.Lock()
	a.jobsCtx = jobsCtx
	a.runCtx, a.cancelRun = ctx, cancel
	trial := a.upd.trial
	a.sess.NATSConnected = a.nc.IsConnected()
	a.sess.Server = a.nc.ConnectedUrlRedacted()
	a.mu.Unlock()
	a.metrics.natsConnected.Set(b2f(a.nc.IsConnected()))

	var subs []*nats.Subscription
	unsubscribe := func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
		subs = nil
	}
	defer unsubscribe()
	for verb, h := range map[string]nats.MsgHandler{
		protocol.VerbAssign:  a.onAssign,
		protocol.VerbRevoke:  a.onRevoke,
		protocol.VerbControl: a.onControl,
		protocol.VerbStep:    a.onStep,
	} {
		s, err := a.nc.Subscribe(protocol.AgentSubject(a.opts.AgentID, verb), h)
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", verb, err)
		}
		subs = append(subs, s)
	}
	r, err := newRPC(a.nc)
	if err != nil {
		return fmt.Errorf("run agent: %w", err)
	}
	defer r.close()
	a.mu.Lock()
	a.rpc = r
	a.mu.Unlock()
	if err := a.nc.FlushTimeout(a.opts.RequestTimeout); err != nil {
		a.log.Warn().Err(err).Msg("flush subscriptions")
	}
	if trial {
		a.wg.Go(func() { a.watchTrial(ctx) })
	}
	a.wg.Go(func() {
		if err := a.session(ctx, statusCh); err != nil {
			cancel(err)
		}
	})
	<-ctx.Done()
	a.mu.Lock()
	a.closing = true
	a.mu.Unlock()
	unsubscribe()
	stopJobs(ErrShutdown)
	a.wg.Wait()
	a.mu.Lock()
	a.sess.HelloAccepted = false
	a.mu.Unlock()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// session says hello and keeps heartbeats going; it says hello again after
// a reconnect, after a 503 to a heartbeat and when the settings changed.
func (a *Agent) session(ctx context.Context, statusCh <-chan nats.Status) error {
	for {
		hb, err := a.hello(ctx, statusCh)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		t := time.NewTimer(hb)
	beat:
		for {
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case s := <-statusCh:
				if a.onStatus(s) {
					break beat
				}
			case <-a.rehello:
				break beat
			case <-a.beat:
				t.Stop()
				if err := a.heartbeat(ctx); errors.Is(err, protocol.ErrUnavailable) {
					a.log.Info().Msg("coordinator lost the session; saying hello again")
					break beat
				} else if err != nil && ctx.Err() == nil {
					a.log.Debug().Err(err).Msg("heartbeat")
					a.noteError("heartbeat", "", err)
				}
				t.Reset(hb)
			case <-t.C:
				err := a.heartbeat(ctx)
				if errors.Is(err, protocol.ErrUnavailable) {
					a.log.Info().Msg("coordinator lost the session; saying hello again")
					break beat
				}
				if err != nil && ctx.Err() == nil {
					a.log.Debug().Err(err).Msg("heartbeat")
					a.noteError("heartbeat", "", err)
				}
				t.Reset(hb)
			}
		}
		t.Stop()
	}
}

// onStatus records a NATS connection status change and reports whether the
// agent must say hello again (it reconnected).
func (a *Agent) onStatus(s nats.Status) bool {
	connected := s == nats.CONNECTED
	a.mu.Lock()
	a.sess.NATSConnected = connected
	if connected {
		a.sess.Server = a.nc.ConnectedUrlRedacted()
	} else {
		a.sess.HelloAccepted = false
	}
	a.mu.Unlock()
	a.metrics.natsConnected.Set(b2f(connected))
	if !connected {
		a.metrics.session.Set(0)
		a.log.Warn().Str("status", s.String()).Msg("lost connection to NATS")
	}
	return connected
}

// beatNow makes the session send a heartbeat now (a slot freed after an
// assign was refused for want of one, an assign refused).
func (a *Agent) beatNow() {
	select {
	case a.beat <- struct{}{}:
	default:
	}
}

// busyLocked counts the jobs that hold a slot: those not yet in their final
// call (result, failure report or release). A job whose outcome is being
// reported holds no slot: once the coordinator accepts the report it may
// grant the next job at once, and this agent has room for it
// (docs/protocol.md, assign).
func (a *Agent) busyLocked() int {
	n := 0
	for _, j := range a.jobs {
		if !j.final {
			n++
		}
	}
	return n
}

// freeSlotLocked frees j's slot: it has begun its final call. When an
// assign was refused for want of a slot meanwhile, the coordinator hears of
// the free slot at once.
func (a *Agent) freeSlotLocked(j *job) {
	if j.final {
		return
	}
	j.final = true
	if a.owesBeat {
		a.owesBeat = false
		a.beatNow()
	}
}

// kickHello makes the session say hello again (settings or draining
// changed).
func (a *Agent) kickHello() {
	select {
	case a.rehello <- struct{}{}:
	default:
	}
}

func (a *Agent) helloMsg() protocol.Hello {
	a.mu.Lock()
	defer a.mu.Unlock()
	return protocol.Hello{
		BootID: a.bootID, Version: a.opts.Version, Devices: a.opts.Phones.Inventory(),
		Slots: a.slots, Capabilities: []string{"screenshot", "ui_dump", "input", "record", "step", protocol.CapabilityEffect, protocol.PlatformCapability(runtime.GOOS, runtime.GOARCH)},
		Draining: a.draining || a.shutdown || a.sleeping || a.upd.running, UploadMode: a.opts.UploadMode,
		Update: a.updateStatusLocked(),
	}
}

// hello says hello until the coordinator answers, retrying with backoff; a
// reconnect retries at once. 400 and 403 are final.
func (a *Agent) hello(ctx context.Context, statusCh <-chan nats.Status) (time.Duration, error) {
	backoff := 200 * time.Millisecond
	for {
		var rep protocol.HelloReply
		var sent time.Time
		err := a.report(ctx, protocol.VerbHello, func() any {
			sent = time.Now()
			return a.helloMsg()
		}, &rep)
		if err == nil {
			if a.opts.UploadMode == protocol.UploadModePresigned && rep.UploadMode == protocol.UploadModeDirect {
				// A coordinator that does not check the hello's
				// upload_mode: refused here as it would refuse it
				// (docs/protocol.md section 5, hello).
				err := errors.New("storage mode mismatch: this agent uploads in presigned mode, but the coordinator does not presign (upload_mode direct): every upload would be refused; configure the coordinator's storage or set storage.mode direct on this agent")
				a.log.Error().Err(err).Msg("storage mode mismatch: taking no jobs")
				a.noteError("hello", "", err)
				return 0, fmt.Errorf("hello: %w", err)
			}
			rtt := time.Since(sent)
			offset := rep.ServerTime.Sub(sent.Add(rtt / 2))
			a.mu.Lock()
			a.ttl = time.Duration(rep.LeaseTTLMS) * time.Millisecond
			a.sess.HelloAccepted = true
			a.sess.NATSConnected = true
			a.sess.CoordinatorID = rep.CoordinatorID
			a.sess.LastHello = time.Now().UTC()
			a.sess.LeaseTTLMS = rep.LeaseTTLMS
			if !rep.ServerTime.IsZero() {
				a.sess.ClockOffsetMS = offset.Milliseconds()
			}
			a.mu.Unlock()
			a.metrics.session.Set(1)
			a.helloAccepted()
			a.log.Info().Str("coordinator_id", rep.CoordinatorID).Int64("lease_ttl_ms", rep.LeaseTTLMS).
				Int64("clock_offset_ms", offset.Milliseconds()).Msg("connected to coordinator")
			if len(rep.Settings) > 0 {
				if err := a.applySettings(rep.Settings, true); err != nil {
					a.log.Warn().Err(err).Msg("settings in the hello reply refused")
					a.noteError("apply settings", "", err)
				}
			}
			hb := time.Duration(rep.HeartbeatMS) * time.Millisecond
			if hb <= 0 {
				hb = 5 * time.Second
			}
			return hb, nil
		}
		if errors.Is(err, protocol.ErrForbidden) || errors.Is(err, protocol.ErrBadRequest) {
			a.log.Error().Err(err).Msg("coordinator refused hello: taking no jobs")
			a.noteError("hello", "", err)
			return 0, fmt.Errorf("hello: %w", err)
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		a.log.Warn().Err(err).Dur("retry_in", backoff).Msg("hello failed")
		a.noteError("hello", "", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case s := <-statusCh:
			if a.onStatus(s) {
				backoff = 200 * time.Millisecond
				t.Stop()
				continue
			}
		case <-t.C:
		}
		t.Stop()
		backoff = min(backoff*2, 10*time.Second)
	}
}

func (a *Agent) heartbeat(ctx context.Context) error {
	if err := a.report(ctx, protocol.VerbHeartbeat, a.heartbeatMsg, &protocol.Ack{}); err != nil {
		return err
	}
	a.mu.Lock()
	a.sess.LastHeartbeat = time.Now().UTC()
	a.mu.Unlock()
	return nil
}

// heartbeatMsg is the agent's state as a heartbeat reports it now.
func (a *Agent) heartbeatMsg() any {
	a.mu.Lock()
	hb := protocol.Heartbeat{BootID: a.bootID, Free: max(0, a.slots-a.busyLocked()), Draining: a.draining || a.shutdown || a.sleeping || a.upd.running,
		Update: a.updateStatusLocked()}
	if hb.Draining {
		hb.Free = 0
	}
	for _, j := range a.jobs {
		hb.Running = append(hb.Running, j.tok)
	}
	a.mu.Unlock()
	hb.Devices = a.opts.Phones.Inventory()
	if hb.Devices == nil {
		hb.Devices = []protocol.Device{} // "devices": [], no phones now
	}
	return hb
}

// report sends a report of the agent's own state (hello or heartbeat),
// built by build once the report before it has been answered or given up
// on, and decodes the answer into resp. The coordinator handles
// requests concurrently and stores each report as it comes: two reports
// in flight at once could be stored in the other order, and an older one
// saying "not draining" would undo a newer one saying "draining" (the
// heartbeat sent before the PC sleeps, beside the session's periodic one).
func (a *Agent) report(ctx context.Context, verb string, build func() any, resp any) error {
	select {
	case a.reporting <- struct{}{}:
	default:
		a.log.Debug().Str("verb", verb).Msg("waiting for the agent's previous state report to be answered")
		select {
		case a.reporting <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() { <-a.reporting }()
	return a.request(ctx, verb, build(), resp)
}

func reply(m *nats.Msg, v any) {
	if m.Reply == "" {
		return
	}
	data, _ := json.Marshal(v)
	_ = m.Respond(data)
}

func replyError(m *nats.Msg, code int, desc string) {
	if m.Reply == "" {
		return
	}
	msg := nats.NewMsg(m.Reply)
	msg.Header.Set("Nats-Service-Error", desc)
	msg.Header.Set("Nats-Service-Error-Code", fmt.Sprint(code))
	_ = m.RespondMsg(msg)
}

func (a *Agent) onAssign(m *nats.Msg) {
	var as protocol.Assign
	if err := json.Unmarshal(m.Data, &as); err != nil {
		replyError(m, protocol.CodeBadRequest, "decode assign: "+err.Error())
		return
	}
	if err := as.Token.Validate(); err != nil {
		replyError(m, protocol.CodeBadRequest, err.Error())
		return
	}
	if err := protocol.CheckJobID(as.Token.JobID); err != nil {
		// The id is an element of every object key of the job: one that is
		// not a single key element could write under another job's prefix
		// (docs/protocol.md section 2).
		replyError(m, protocol.CodeBadRequest, "token.job_id: "+err.Error())
		return
	}
	if as.Token.Owner != a.owner {
		replyError(m, protocol.CodeForbidden, "token owner is not this agent process")
		return
	}
	if err := as.Task.Validate(); err != nil {
		replyError(m, protocol.CodeBadRequest, "invalid task: "+err.Error())
		return
	}
	if err := checkAPKDownloads(as); err != nil {
		replyError(m, protocol.CodeBadRequest, err.Error())
		return
	}
	if as.LeaseTTLMS <= 0 {
		replyError(m, protocol.CodeBadRequest, "lease_ttl_ms must be positive")
		return
	}
	if as.DeadlineMS < 0 {
		replyError(m, protocol.CodeBadRequest, fmt.Sprintf("deadline_ms: %d is negative", as.DeadlineMS))
		return
	}
	sel, err := a.grantedPhone(as)
	var nr *phoneNotReadyError
	if errors.As(err, &nr) {
		// Not the job's fault: the coordinator gives it back without
		// spending an attempt, and hears the phone's state at once.
		a.refuseNotReady(m, err.Error(), false)
		return
	}
	if err != nil {
		replyError(m, protocol.CodeBadRequest, err.Error())
		return
	}
	as.Task.Device = sel
	if err := a.checkTyping(as.Task); err != nil {
		replyError(m, protocol.CodeBadRequest, err.Error())
		return
	}
	ttl := time.Duration(as.LeaseTTLMS) * time.Millisecond
	if ttl <= a.opts.SafetyMargin {
		replyError(m, protocol.CodeBadRequest, "lease_ttl_ms is not longer than the agent's safety margin")
		return
	}
	a.mu.Lock()
	if old, ok := a.jobs[as.Token.JobID]; ok {
		a.mu.Unlock()
		if old.tok == as.Token {
			reply(m, protocol.Ack{OK: true}) // duplicate delivery
			return
		}
		a.refuseNotReady(m, "job already running under another token", true)
		return
	}
	if _, ok := a.ended[as.Token]; ok {
		a.mu.Unlock()
		replyError(m, protocol.CodeStale, "this agent already ran this token to its end")
		return
	}
	why := ""
	switch {
	case a.closing || a.jobsCtx == nil, a.shutdown:
		why = "agent shutting down"
	case a.draining:
		why = "agent draining"
	case a.sleeping:
		why = "agent's PC going to sleep"
	case a.upd.running:
		why = "agent updating"
	case a.busyLocked() >= a.slots:
		why = "no free slot"
	}
	if why != "" {
		a.mu.Unlock()
		a.refuseNotReady(m, why, why == "no free slot")
		return
	}
	j := newJob(a, a.jobsCtx, as.Token, ttl, as.Task, time.Duration(as.DeadlineMS)*time.Millisecond)
	if len(as.APKs) > 0 {
		// install_app steps fetch their APKs from the assign's URLs.
		j.work = capture.WithAPKFetcher(j.work, newAPKFetcher(as.APKs))
	}
	a.jobs[as.Token.JobID] = j
	a.notifyLocked()
	a.metrics.jobsRunning.Set(float64(len(a.jobs)))
	a.wg.Add(1)
	a.mu.Unlock()
	reply(m, protocol.Ack{OK: true})
	go func() {
		defer a.wg.Done()
		j.run()
		a.mu.Lock()
		delete(a.jobs, j.tok.JobID)
		a.rememberEndedLocked(j.tok)
		if a.owesBeat {
			a.owesBeat = false
			a.beatNow()
		}
		a.notifyLocked()
		a.metrics.jobsRunning.Set(float64(len(a.jobs)))
		a.mu.Unlock()
	}()
}

// refuseNotReady answers an assign with 503: this agent or the granted
// phone is not ready for it now. The coordinator requeues the job without
// spending an attempt and assigns this agent nothing more until it reports
// a free slot (docs/protocol.md, assign); a heartbeat follows at once with
// the agent's phones and free slots, and again when a slot frees if
// slotWait.
func (a *Agent) refuseNotReady(m *nats.Msg, why string, slotWait bool) {
	replyError(m, protocol.CodeUnavailable, why)
	a.mu.Lock()
	if slotWait {
		a.owesBeat = true
	}
	a.mu.Unlock()
	a.beatNow()
}

// rememberEndedLocked records an ended token, keeping the set bounded: a
// token older than an hour can no longer be current anyway.
func (a *Agent) rememberEndedLocked(tok fencing.Token) {
	now := time.Now()
	if len(a.ended) >= 4096 {
		for t, at := range a.ended {
			if now.Sub(at) > time.Hour {
				delete(a.ended, t)
			}
		}
	}
	a.ended[tok] = now
}

func (a *Agent) onRevoke(m *nats.Msg) {
	var r protocol.Revoke
	if err := json.Unmarshal(m.Data, &r); err != nil {
		a.log.Warn().Err(err).Msg("bad revoke message")
		return
	}
	a.mu.Lock()
	j := a.jobs[r.Token.JobID]
	a.mu.Unlock()
	// A revoke names the token it takes away; it stops our job only when
	// that is the job's token (or a later grant, which implies ours is gone
	// too).
	if j == nil || r.Token.Owner != j.tok.Owner || r.Token.Generation < j.tok.Generation {
		return
	}
	j.stop(fmt.Errorf("%w: %s", fencing.ErrRevoked, r.Reason))
}

func (a *Agent) onControl(m *nats.Msg) {
	var c protocol.Control
	if err := json.Unmarshal(m.Data, &c); err != nil {
		replyError(m, protocol.CodeBadRequest, "decode control: "+err.Error())
		return
	}
	switch c.Command {
	case protocol.ControlCancel:
		a.mu.Lock()
		j := a.jobs[c.JobID]
		a.mu.Unlock()
		if j == nil {
			replyError(m, protocol.CodeUnknownJob, "no such running job")
			return
		}
		j.stop(ErrCancelled)
		reply(m, protocol.Ack{OK: true})
	case protocol.ControlStatus:
		reply(m, a.Status())
	case protocol.ControlDrain:
		a.SetDraining(true)
		reply(m, protocol.Ack{OK: true})
	case protocol.ControlResume:
		a.mu.Lock()
		shutdown := a.shutdown
		a.mu.Unlock()
		if shutdown {
			replyError(m, protocol.CodeUnavailable, "agent shutting down")
			return
		}
		a.SetDraining(false)
		reply(m, protocol.Ack{OK: true})
	case protocol.ControlUpdate:
		a.onUpdate(m, c.Update)
	case protocol.ControlConfig:
		if err := a.applySettings(c.Settings, true); err != nil {
			replyError(m, protocol.CodeBadRequest, err.Error())
			return
		}
		reply(m, protocol.Ack{OK: true})
	default:
		replyError(m, protocol.CodeBadRequest, "unsupported control command "+c.Command)
	}
}

// SetDraining stops (true) or resumes (false) taking new jobs; running jobs
// go on. The coordinator is told with a new hello.
func (a *Agent) SetDraining(on bool) {
	a.mu.Lock()
	changed := a.draining != on
	a.draining = on
	a.mu.Unlock()
	if changed {
		a.metrics.draining.Set(b2f(on))
		a.log.Info().Bool("draining", on).Msg("draining changed")
		a.kickHello()
	}
}

// Shutdown stops the agent gracefully: it takes no new job from now on,
// lets the running jobs finish until ctx is done, then releases those still
// running (each job's work is cut short, then a fenced fail with requeue
// gives it back so the coordinator reassigns it at once) and waits for them
// to end. Run goes on until its own context is cancelled; cancel it after
// Shutdown returns. Shutdown returns ctx's error when jobs had to be
// released.
func (a *Agent) Shutdown(ctx context.Context) error {
	a.mu.Lock()
	a.shutdown = true
	n := len(a.jobs)
	a.mu.Unlock()
	a.metrics.draining.Set(1)
	a.kickHello()
	a.log.Info().Int("running", n).Msg("shutting down: taking no new jobs")
	if a.waitJobs(ctx) {
		return nil
	}
	a.mu.Lock()
	jobs := make([]*job, 0, len(a.jobs))
	for _, j := range a.jobs {
		jobs = append(jobs, j)
	}
	a.mu.Unlock()
	for _, j := range jobs {
		j.release("agent shutting down")
	}
	// Releases end within the self-fence deadline of each job at the
	// latest.
	a.waitJobs(context.Background())
	return ctx.Err()
}

// waitJobs waits until no job runs or ctx is done; it reports whether none
// runs.
func (a *Agent) waitJobs(ctx context.Context) bool {
	for {
		a.mu.Lock()
		n, ch := len(a.jobs), a.changed
		a.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

func (a *Agent) recordStop(r StopRecord) {
	a.mu.Lock()
	a.stops = append(a.stops, r)
	if len(a.stops) > maxStops {
		a.stops = a.stops[len(a.stops)-maxStops:]
	}
	a.mu.Unlock()
	a.metrics.stops.WithLabelValues(stopLabel(r.Err)).Inc()
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
