package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent/procs"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uploader"
)

var (
	// errStopped is returned by a side effect refused or cut short because
	// the job stopped (its lease context is done).
	errStopped = errors.New("job stopped")
	// errReleased is the work's end when the agent is giving the job back
	// (shutdown) while its lease is still held.
	errReleased = errors.New("job being released")
	// errIdle ends an interactive job that waited too long for a step.
	errIdle = errors.New("interactive job idle")
)

// failedError is the end of a job whose failure was reported.
type failedError struct{ reason string }

func (e *failedError) Error() string { return e.reason }

// maxPendingSteps bounds the interactive steps queued for one job.
const maxPendingSteps = 16

type stepReq struct {
	req   protocol.StepRequest
	msg   *nats.Msg
	reply *protocol.StepReply // the step's outcome, when it ran
}

type job struct {
	a    *Agent
	tok  fencing.Token
	ttl  time.Duration
	task protocol.Task
	// deadline is the time the job may run from its assign's receipt
	// (Assign.DeadlineMS), 0 for none; deadlineTimer stops it then.
	deadline      time.Duration
	deadlineTimer *time.Timer
	log           zerolog.Logger
	procs         *procs.Group
	started       time.Time
	steps         chan *stepReq
	// finishReq is a request to finish an interactive job that arrived
	// between two steps of its task (servePending); interact takes it up
	// first. Only the job's own goroutine uses it.
	finishReq *stepReq

	// Set by newJob.
	guard      *fencing.Guard
	ctx        context.Context // the lease: done when the job stopped
	work       context.Context // ctx, also cancelled when the job is released
	cancelWork context.CancelCauseFunc

	// gate orders the job's fenced publishes against its stop: a request
	// is published under the read lock while the lease is held; stop takes
	// the write lock. Once stop returns, nothing of the job leaves the
	// agent on NATS.
	gate  sync.RWMutex
	calls atomic.Int64 // fenced requests published
	// callsAtStop is calls when stop ran (-1 before).
	callsAtStop atomic.Int64

	// final is set (under a.mu) once the job has begun its final call:
	// it holds no slot from then on (Agent.busyLocked).
	final bool

	mu        sync.Mutex
	step      int    // steps run so far (task and interactive)
	current   string // the call or step in progress, for the stop record
	arts      []string
	obs       []protocol.Observation // read by extract steps, sent with the result
	apps      []protocol.AppVersion  // the apps launched or read from, for the result
	phone     string
	leased    bool
	accepting bool // interactive steps are taken
	releasing string
	effects   map[string]protocol.EffectReceipt // receipts of effect steps, by key (effect.go)
	extra     jobExtras                         // logcat, manifest (manifest.go)

	// releaseCause is the release's fail cause; "" is agent_shutdown
	// (sleep.go sets agent_sleep).
	releaseCause string
}

// newJob returns a job whose lease guard runs from now on under parent.
// grantedPhone returns the selector the job of as acquires its phone with:
// the task's, narrowed to the phone the coordinator granted when the assign
// names one. That phone must be one of the agent's, in state device, and
// match the task's selector: the job is refused otherwise rather than run on
// another phone than the one the coordinator counted.
func (a *Agent) grantedPhone(as protocol.Assign) (protocol.DeviceSelector, error) {
	sel := as.Task.Device
	if as.Serial == "" {
		return sel, nil
	}
	if sel.Serial != "" && sel.Serial != as.Serial {
		return sel, fmt.Errorf("granted phone %s is not the task's phone %s", as.Serial, sel.Serial)
	}
	sel.Serial = as.Serial
	for _, d := range a.opts.Phones.Inventory() {
		if d.Serial != as.Serial {
			continue
		}
		if d.State != protocol.DeviceReady {
			why := ""
			if d.Reason != "" {
				why = " (" + d.Reason + ")"
			}
			return sel, &phoneNotReadyError{fmt.Sprintf("granted phone %s is in state %q%s, not %q", as.Serial, d.State, why, protocol.DeviceReady)}
		}
		if !sel.Matches(d) {
			return sel, fmt.Errorf("granted phone %s does not match the task's selector %s", as.Serial, as.Task.Device.Describe())
		}
		return sel, nil
	}
	return sel, &phoneNotReadyError{fmt.Sprintf("granted phone %s is not connected to this agent", as.Serial)}
}

// phoneNotReadyError is an assign's granted phone that is not usable now
// (gone, offline, resting): answered 503, the job is not at fault.
type phoneNotReadyError struct{ msg string }

func (e *phoneNotReadyError) Error() string { return e.msg }

// checkTyping refuses a task with a text step beyond ASCII when no phone
// it may run on can type it (none has the input method
// capture.IMEPackage), so that the job is never half-typed: the error
// names the step and what to install (docs/capture.md, Text beyond ASCII).
// A phone that cannot tell is given the benefit of the doubt; its step
// fails if it cannot type the text.
func (a *Agent) checkTyping(task protocol.Task) error {
	step := -1
	for i, s := range task.Steps {
		if s.Op == protocol.OpText && protocol.NeedsIME(s.Text) {
			step = i
			break
		}
	}
	tp, ok := a.opts.Phones.(UnicodeTyper)
	if step < 0 || !ok {
		return nil
	}
	serial := ""
	for _, d := range a.opts.Phones.Inventory() {
		if !task.Device.Matches(d) {
			continue
		}
		if can, known := tp.TypesUnicode(d.Serial); can || !known {
			return nil
		}
		serial = d.Serial
	}
	if serial == "" {
		return nil // no matching phone: acquiring one reports it
	}
	return fmt.Errorf("steps[%d]: text: %v", step, &capture.NoIMEError{Serial: serial})
}

func newJob(a *Agent, parent context.Context, tok fencing.Token, ttl time.Duration, task protocol.Task, deadline time.Duration) *job {
	j := &job{a: a, tok: tok, ttl: ttl, task: task, deadline: deadline, procs: procs.NewGroup(), started: time.Now(), steps: make(chan *stepReq, maxPendingSteps)}
	j.log = a.log.With().Str("job_id", tok.JobID).Str("owner", tok.Owner).Int64("generation", tok.Generation).Logger()
	j.guard, j.ctx = fencing.NewGuard(parent, tok, j.started, ttl, a.opts.SafetyMargin, j.guardOptions()...)
	var work context.Context
	work, j.cancelWork = context.WithCancelCause(j.ctx)
	// The phone's runner logs with the job's fields through the context.
	j.work = j.log.WithContext(procs.WithGroup(work, j.procs))
	j.accepting = true
	j.callsAtStop.Store(-1)
	if deadline > 0 {
		// Counted from the receipt of the assign (docs/protocol.md
		// section 6.7): the job is stopped when it passes.
		j.deadlineTimer = time.AfterFunc(deadline, j.deadlinePassed)
	}
	return j
}

// deadlinePassed cuts the job's work short at its deadline, as a revoke
// would: the step in progress ends (phone processes killed, a recording
// aborted), the upload in flight is aborted and no further upload or
// result follows. The job then reports fail with cause deadline while its
// lease is held (deadlineFail). A job already stopped, released or in its
// final call is left as it is.
func (j *job) deadlinePassed() {
	j.cancelWork(fmt.Errorf("%w after %s", ErrDeadline, seconds(j.deadline)))
}

// seconds formats d as seconds ("1.5s").
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

func (j *job) status() JobStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	st := JobStatus{Token: j.tok, Step: j.step}
	st.Deadline = j.guard.Deadline()
	return st
}

func (j *job) doc() protocol.AgentJob {
	j.mu.Lock()
	defer j.mu.Unlock()
	d := protocol.AgentJob{
		Token: j.tok, Started: j.started.UTC(), Step: j.step, Steps: len(j.task.Steps), Current: j.current,
		Interactive: j.task.Interactive, Phone: j.phone, Leased: j.leased,
		LeaseLeftMS: j.guard.Left().Milliseconds(),
	}
	return d
}

func (j *job) setCurrent(s string) {
	j.mu.Lock()
	j.current = s
	j.mu.Unlock()
}

// stop is the one stop path: revoke, 409, self-fence deadline, cancel and
// shutdown all end here. It cancels the job's context; everything the job
// started runs under that context and ends with it: steps on the phone
// (recordings are aborted), uploads in flight (multipart uploads are
// aborted), local processes (killed with their process group), and no
// fenced call is made after it.
func (j *job) stop(cause error) {
	j.gate.Lock()
	defer j.gate.Unlock()
	if stopped, _, _ := j.guard.Stopped(); !stopped {
		j.callsAtStop.Store(j.calls.Load())
	}
	j.guard.Stop(cause)
}

// publishGated publishes one fenced request of the job only while its
// lease is held, and never concurrently with its stop.
func (j *job) publishGated(send func() error) error {
	j.gate.RLock()
	defer j.gate.RUnlock()
	if !j.guard.Held() {
		return errStopped
	}
	err := send()
	if err == nil {
		j.calls.Add(1)
	}
	return err
}

// call sends one fenced request of the job to the coordinator.
func (j *job) call(ctx context.Context, verb string, req, resp any) error {
	return j.a.requestGated(ctx, verb, req, resp, j.publishGated)
}

// release cuts the job's work short and gives the job back with a fenced
// fail (requeue) while its lease is held. A job already in its final call
// (result or failure report) finishes that instead.
func (j *job) release(reason string) {
	j.mu.Lock()
	if j.releasing == "" {
		j.releasing = reason
	}
	j.mu.Unlock()
	j.cancelWork(errReleased)
}

// stoppedErr says why the work ended early: released, its deadline
// passed (ErrDeadline), or stopped.
func (j *job) stoppedErr() error {
	if j.ctx.Err() == nil {
		switch cause := context.Cause(j.work); {
		case errors.Is(cause, errReleased):
			return errReleased
		case errors.Is(cause, ErrDeadline):
			return ErrDeadline
		}
	}
	return errStopped
}

// effect runs one side effect (renewal, upload, registration, result,
// failure report) only while the lease is held. A 409 reply stops the job
// with staleCause (fencing.ErrStale when nil); a 404 (the coordinator knows
// no such job) stops it the same way with ErrUnknownJob: nothing more of
// the job reaches storage or the coordinator (docs/protocol.md sections 4
// and 6.2). A call cut short by the stop returns errStopped.
func (j *job) effect(ctx context.Context, what string, staleCause error, f func(ctx context.Context) error) error {
	if !j.guard.Check() || ctx.Err() != nil {
		return errStopped
	}
	if what != "renew" && what != "release" {
		// Renewals run beside the work and a release follows it: neither
		// is what a stop cuts short.
		j.setCurrent(what)
	}
	err := f(ctx)
	if j.stopOnRefusal(err, what, staleCause) {
		return errStopped
	}
	if errors.Is(err, errStopped) {
		j.guard.Check() // the deadline passed: stop now
		return errStopped
	}
	if err != nil && ctx.Err() != nil {
		return errStopped
	}
	return err
}

// stopOnRefusal stops the job when err is the coordinator saying the token
// is not current: a 409 stops it with staleCause (fencing.ErrStale when
// nil), a 404 with ErrUnknownJob. It reports whether it stopped the job.
func (j *job) stopOnRefusal(err error, what string, staleCause error) bool {
	switch {
	case errors.Is(err, fencing.ErrStale):
		if staleCause == nil {
			staleCause = fencing.ErrStale
		}
		j.stop(staleCause)
	case errors.Is(err, protocol.ErrUnknownJob):
		j.stop(fmt.Errorf("%w (404 to %s)", ErrUnknownJob, what))
	default:
		return false
	}
	return true
}

func (j *job) guardOptions() []fencing.GuardOption {
	var o []fencing.GuardOption
	if j.a.opts.GuardCheckInterval > 0 {
		o = append(o, fencing.WithCheckInterval(j.a.opts.GuardCheckInterval))
	}
	if j.a.opts.WallClock != nil {
		o = append(o, fencing.WithWallClock(j.a.opts.WallClock))
	}
	return o
}

func (j *job) run() {
	start := j.started
	guard, ctx := j.guard, j.ctx
	// Processes the job started die with its work: stop or release.
	stopKill := context.AfterFunc(j.work, func() { j.procs.Kill() })
	defer func() {
		stopKill()
		j.procs.Kill()
	}()
	defer j.cancelWork(nil)
	if j.deadlineTimer != nil {
		defer j.deadlineTimer.Stop()
	}

	j.log.Info().Int("steps", len(j.task.Steps)).Bool("interactive", j.task.Interactive).Msg("job assigned")

	// Do not start before the coordinator has confirmed the lease.
	err := j.confirmLease(ctx)
	if err == nil {
		j.mu.Lock()
		j.leased = true
		j.mu.Unlock()
		leaseCtx, stopLease := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { j.keepLease(leaseCtx) })
		var once sync.Once
		endLease := func() { once.Do(func() { stopLease(); wg.Wait() }) }
		err = j.work_(endLease)
		endLease()
	} else if !errors.Is(err, errStopped) {
		j.log.Warn().Err(err).Msg("lease not confirmed; job not started")
		j.a.noteError("renew", j.tok.JobID, err)
	}
	stoppedBy := func(cause error) bool {
		return errors.Is(err, cause) || (errors.Is(err, errStopped) && j.stoppedErr() == cause)
	}
	switch {
	case stoppedBy(errReleased):
		err = j.giveBack()
	case stoppedBy(ErrDeadline):
		err = j.deadlineFail()
	}
	j.closeSteps()
	j.finish(err, start)
	guard.Stop(context.Canceled) // releases the guard's timers; a no-op when stopped
}

// finish logs and records how the job ended.
func (j *job) finish(err error, start time.Time) {
	stopped, cause, at := j.guard.Stopped()
	if !stopped && j.ctx.Err() != nil {
		stopped, cause, at = true, context.Cause(j.ctx), time.Now()
	}
	m := j.a.metrics
	var fe *failedError
	switch {
	case stopped && cause != nil && !errors.Is(cause, context.Canceled):
		j.mu.Lock()
		cut := j.current
		j.mu.Unlock()
		calls := j.callsAtStop.Load()
		if calls < 0 { // stopped by the deadline or shutdown: no request could leave after it
			calls = j.calls.Load()
		}
		j.a.recordStop(StopRecord{Token: j.tok, Cause: cause.Error(), Err: cause, At: at, CutShort: cut, Calls: int(calls)})
		if j.a.opts.OnStop != nil {
			j.a.opts.OnStop(j.tok, cause)
		}
		m.jobs.WithLabelValues("stopped").Inc()
		ev := j.log.Warn()
		if errors.Is(cause, ErrReleased) {
			ev = j.log.Info()
		}
		ev.Str("cause", cause.Error()).Str("cut_short", cut).Dur("after", time.Since(start)).Msg("job stopped")
	case err == nil:
		m.jobs.WithLabelValues("succeeded").Inc()
		j.log.Info().Dur("took", time.Since(start)).Msg("job done")
	case errors.As(err, &fe):
		m.jobs.WithLabelValues("failed").Inc()
	default:
		m.jobs.WithLabelValues("error").Inc()
		j.a.noteError("job", j.tok.JobID, err)
		j.log.Warn().Err(err).Msg("job ended with error")
	}
}

func (j *job) renewOnce(ctx context.Context) error {
	sent := time.Now()
	var rep protocol.RenewReply
	err := j.effect(ctx, "renew", nil, func(ctx context.Context) error {
		return j.call(ctx, protocol.VerbRenew, protocol.Renew{Token: j.tok}, &rep)
	})
	if err != nil {
		if errors.Is(err, errStopped) {
			if j.ctx.Err() != nil {
				j.a.metrics.renewals.WithLabelValues("stale").Inc()
			}
			return errStopped
		}
		j.a.metrics.renewals.WithLabelValues("failed").Inc()
		return fmt.Errorf("renew lease: %w", err)
	}
	ttl := time.Duration(rep.LeaseTTLMS) * time.Millisecond
	if ttl <= 0 {
		ttl = j.ttl
	}
	if !j.guard.Renewed(sent, ttl) {
		return errStopped
	}
	j.noteClock(sent, time.Now(), rep)
	j.a.metrics.renewals.WithLabelValues("accepted").Inc()
	return nil
}

// confirmLease renews the lease once before the work starts, retrying
// what may pass (a 503, such as the coordinator's "request budget of this
// agent spent: slow down", or no answer) with backoff until it is
// confirmed or the job stops: at the self-fence deadline at the latest. A
// 400 or 403 is final; a 404 or 409 stops the job.
func (j *job) confirmLease(ctx context.Context) error {
	return j.retry(ctx, "renew", 50*time.Millisecond, time.Second, func() error { return j.renewOnce(ctx) })
}

// keepLease renews at a third of the TTL with ±10 % jitter until ctx is
// done. Failed renewals are retried at the next tick; the self-fence
// deadline stops the job if none is accepted in time.
func (j *job) keepLease(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		d := j.ttl / 3
		d += time.Duration(rand.Int64N(int64(d/5)+1)) - d/10
		t.Reset(d)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := j.renewOnce(ctx); err != nil {
			if ctx.Err() != nil || errors.Is(err, errStopped) {
				return
			}
			j.log.Warn().Err(err).Msg("renewal failed; retrying")
			j.a.noteError("renew", j.tok.JobID, err)
		}
	}
}

// work_ runs the job's steps and interactive steps, then commits or reports
// the failure. endLease stops the renewals before the final call, so that
// no renewal races the result.
func (j *job) work_(endLease func()) error {
	err := j.runSteps(endLease)
	if errors.Is(err, errStopped) {
		return j.stoppedErr()
	}
	return err
}

func (j *job) runSteps(endLease func()) error {
	phone, release, err := j.a.opts.Phones.Acquire(j.work, j.task.Device)
	if err != nil {
		if j.work.Err() != nil {
			return errStopped
		}
		endLease()
		return j.failJob(fmt.Sprintf("acquire phone: %v", err), err)
	}
	defer release()
	j.mu.Lock()
	j.phone = phone.Serial()
	j.mu.Unlock()

	// fail reports the job failed because of cause, classified as cause
	// says (classify), after uploading the operation log.
	fail := func(cause error) error {
		reason := cause.Error()
		if err := j.uploadEnd(phone); err != nil {
			if errors.Is(err, errStopped) {
				return errStopped
			}
			reason += "; " + err.Error()
		}
		endLease()
		return j.failJob(reason, cause)
	}
	if err := j.startCapture(phone); err != nil {
		if j.work.Err() != nil {
			return errStopped
		}
		return fail(err)
	}
	// Requested steps run after the task's step in progress.
	for _, s := range j.task.Steps {
		if !j.guard.Check() || j.work.Err() != nil {
			return errStopped
		}
		seq := j.beginStep()
		if _, err := j.runGuarded(phone, seq, fmt.Sprintf("step %d (%s)", seq, s.Op), "task", s); err != nil {
			return j.stepFailure(err, fail)
		}
		if err := j.servePending(phone); err != nil {
			return j.stepFailure(err, fail)
		}
	}
	var finish *stepReq
	if j.task.Interactive {
		finish, err = j.interact(phone)
		if errors.Is(err, errIdle) {
			return fail(err)
		}
		if err != nil {
			return j.stepFailure(err, fail)
		}
	}
	j.mu.Lock()
	j.accepting = false
	j.mu.Unlock()
	if err := j.uploadEnd(phone); err != nil {
		if errors.Is(err, errStopped) {
			j.replyStopped(finish)
			return errStopped
		}
		endLease()
		ferr := j.failJob(err.Error(), err)
		j.replyStopped(finish)
		return ferr
	}
	endLease()
	if j.stoppedErr() == ErrDeadline {
		// The deadline passed after the last upload: no result.
		j.replyStopped(finish)
		return errStopped
	}
	rep, err := j.commit()
	if finish != nil {
		if err != nil {
			j.replyStopped(finish)
		} else {
			r := protocol.StepReply{Outcome: protocol.OutcomeOK}
			if finish.reply != nil {
				r = *finish.reply
			}
			r.Finished, r.Manifest = true, rep.Manifest
			reply(finish.msg, r)
		}
	}
	return err
}

// stepError is a step the phone could not perform (not a stop).
type stepError struct{ err error }

func (e *stepError) Error() string { return e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// stepFailure turns the error of a step into the job's end.
func (j *job) stepFailure(err error, fail func(error) error) error {
	if errors.Is(err, errStopped) || j.work.Err() != nil {
		return errStopped
	}
	return fail(err)
}

// beginStep numbers the next step of the job, a task step or a requested
// one: its seq in the operation log and its step reply (docs/protocol.md
// section 8). Evidence captures are not numbered.
func (j *job) beginStep() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.step++
	return j.step
}

// skipStep writes the operation log line of step seq, which the job did not
// run (reason; stepErr, when set, is the line's error).
func (j *job) skipStep(phone Phone, seq int, s protocol.Step, reason string, stepErr error) {
	sk, ok := phone.(stepSkipper)
	if !ok {
		return
	}
	if err := sk.SkipStep(seq, s, reason, stepErr); err != nil {
		j.log.Warn().Err(err).Int("seq", seq).Msg("skipped step not logged")
	}
}

// runStep runs one step on the phone and publishes what it captured; info
// is its number (and whether it is effect evidence). A failed step returns
// a *stepError; a stop returns errStopped; a failed upload or registration
// returns its error.
func (j *job) runStep(phone Phone, info capture.StepInfo, what, kind string, s protocol.Step) ([]string, error) {
	j.setCurrent(what)
	arts, err := phone.RunStep(capture.WithStepInfo(j.work, info), s)
	defer func() {
		for _, c := range arts {
			_ = c.Remove() // the ones not published: dropped with the job
		}
	}()
	if err != nil {
		if j.work.Err() != nil {
			return nil, errStopped
		}
		j.a.metrics.steps.WithLabelValues(kind, "error").Inc()
		return nil, &stepError{fmt.Errorf("%s: %w", what, err)}
	}
	j.a.metrics.steps.WithLabelValues(kind, "ok").Inc()
	var keys []string
	for len(arts) > 0 {
		c := arts[0]
		arts = arts[1:]
		key, err := j.publish(c)
		if err != nil {
			return keys, err
		}
		keys = append(keys, key)
	}
	if ar, ok := phone.(AppReporter); ok {
		if apps := ar.Apps(); len(apps) > 0 {
			j.mu.Lock()
			j.apps = apps
			j.mu.Unlock()
		}
	}
	if ob, ok := phone.(Observer); ok {
		if o := ob.LastObservation(); o != nil {
			// Published with its evidence: the result carries it, with
			// the phone's locale and time zone as its facts tell them.
			if f := j.phoneFacts(phone.Serial()); f != nil {
				o.Locale, o.TimeZone = f.Locale, f.TimeZone
			}
			j.mu.Lock()
			j.obs = append(j.obs, *o)
			j.mu.Unlock()
		}
	}
	return keys, nil
}

// publish uploads one capture and registers it with a fenced call; it
// returns the object key.
func (j *job) publish(c capture.Artifact) (string, error) {
	defer func() { _ = c.Remove() }()
	// A capture's spool file was hashed as it was written: the upload spool
	// does not read it again (docs/uploads.md, Hashing).
	a := uploader.Artifact{Name: c.Name, ContentType: c.ContentType, Size: c.Size, SHA256: c.SHA256, Path: c.Path, Hashed: c.Path != ""}
	if c.Path == "" {
		a.Body = bytes.NewReader(c.Data)
		a.Size = int64(len(c.Data))
	}
	var res uploader.Result
	err := j.effect(j.work, "upload "+c.Name, nil, func(ctx context.Context) error {
		var err error
		res, err = j.a.opts.Store.Upload(ctx, j.tok, a)
		return err
	})
	switch {
	case errors.Is(err, errStopped):
		j.a.metrics.artifacts.WithLabelValues("stopped").Inc()
		return "", errStopped
	case err != nil:
		j.a.metrics.artifacts.WithLabelValues("error").Inc()
		return "", fmt.Errorf("upload %s: %w", c.Name, err)
	}
	j.a.metrics.artifacts.WithLabelValues("ok").Inc()
	if !res.Existed {
		j.a.metrics.artifactBytes.Add(float64(res.Size))
	}
	// Registered again with the same sha256 when an attempt's answer was
	// lost: the coordinator accepts that as a retry.
	err = j.callRetrying(j.work, "register "+c.Name, protocol.VerbArtifact, protocol.Artifact{
		Token: j.tok, Name: c.Name, Key: res.Key, Size: res.Size, SHA256: res.SHA256,
		ContentType: a.ContentType, ETag: res.ETag,
	}, &protocol.Ack{}, false)
	if errors.Is(err, errStopped) {
		return "", errStopped
	}
	if err != nil {
		return "", fmt.Errorf("register %s: %w", c.Name, err)
	}
	j.mu.Lock()
	j.arts = append(j.arts, res.Key)
	j.mu.Unlock()
	j.log.Debug().Str("key", res.Key).Int64("size", res.Size).Msg("artifact stored")
	return res.Key, nil
}

func (j *job) uploadOpLog(p Phone) (string, error) {
	art, n := p.OpLog()
	if n == 0 {
		return "", nil
	}
	return j.publish(art)
}

// deliver sends a final fenced call, retrying transient failures with
// backoff until it is answered or the self-fence deadline passes. A 409
// after an attempt that got no answer stops the job with
// ErrOutcomeUnknown: that attempt may have been the one accepted.
func (j *job) deliver(what, verb string, req, resp any) error {
	j.a.mu.Lock()
	j.a.freeSlotLocked(j)
	j.a.mu.Unlock()
	return j.callRetrying(j.ctx, what, verb, req, resp, true)
}

// callRetrying sends one fenced call of the job, retrying what may pass
// with backoff (a 503, such as the coordinator's "request budget of this
// agent spent: slow down", no answer, no responders) until it is answered
// or ctx ends (errStopped). A 400, 403, 404 or 409 is final. The call
// must be one the coordinator accepts again when the first attempt was
// accepted and its answer lost (docs/protocol.md: result, fail, artifact
// with the same sha256). When final (the job's result or failure
// report), a 409 after an attempt that got no answer stops the job with
// ErrOutcomeUnknown.
func (j *job) callRetrying(ctx context.Context, what, verb string, req, resp any, final bool) error {
	// The job's final call waits longer between attempts than a call its
	// work waits for.
	maxBackoff := 2 * time.Second
	if final {
		maxBackoff = 5 * time.Second
	}
	unanswered := false
	return j.retry(ctx, what, 100*time.Millisecond, maxBackoff, func() error {
		var staleCause error
		if final && unanswered {
			staleCause = fmt.Errorf("%s: %w (%w)", what, ErrOutcomeUnknown, fencing.ErrStale)
		}
		err := j.effect(ctx, what, staleCause, func(ctx context.Context) error { return j.call(ctx, verb, req, resp) })
		var pe *protocol.Error
		if err != nil && !errors.As(err, &pe) && !errors.Is(err, nats.ErrNoResponders) {
			unanswered = true
		}
		return err
	})
}

// retry runs attempt until it succeeds or fails for good (errStopped, a
// 400 or a 403: the 404 and 409 of a fenced call stop the job and come
// back as errStopped), waiting between attempts from backoff, doubled
// each time up to maxBackoff; errStopped when ctx ends first.
func (j *job) retry(ctx context.Context, what string, backoff, maxBackoff time.Duration, attempt func() error) error {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		err := attempt()
		if err == nil || errors.Is(err, errStopped) ||
			errors.Is(err, protocol.ErrBadRequest) || errors.Is(err, protocol.ErrForbidden) {
			return err
		}
		j.log.Warn().Err(err).Dur("retry_in", backoff).Msgf("%s failed; retrying", what)
		j.a.noteError(what, j.tok.JobID, err)
		t.Reset(backoff)
		select {
		case <-ctx.Done():
			return errStopped
		case <-t.C:
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

func (j *job) commit() (protocol.ResultReply, error) {
	j.mu.Lock()
	res, _ := json.Marshal(j.resultLocked())
	j.mu.Unlock()
	var rep protocol.ResultReply
	j.mu.Lock()
	obs := j.obs
	j.mu.Unlock()
	if err := j.deliver("result", protocol.VerbResult, protocol.Result{Token: j.tok, Result: res, Observations: obs}, &rep); err != nil {
		if errors.Is(err, errStopped) {
			return rep, errStopped
		}
		return rep, fmt.Errorf("commit result: %w", err)
	}
	j.log.Info().Int("manifest", len(rep.Manifest)).Msg("result accepted")
	return rep, nil
}

// failJob reports the job failed (fenced), with the class and cause of
// the error that ended it (classify), and returns a *failedError.
func (j *job) failJob(reason string, cause error) error {
	class, c := classify(cause)
	err := j.deliver("fail", protocol.VerbFail, protocol.Fail{Token: j.tok, Reason: reason, Class: class, Cause: c}, &protocol.Ack{})
	if errors.Is(err, errStopped) {
		return errStopped
	}
	if err != nil {
		return fmt.Errorf("report failure %q: %w", reason, err)
	}
	j.a.metrics.failures.WithLabelValues(class, c).Inc()
	j.log.Warn().Str("reason", reason).Str("class", class).Str("cause", c).Msg("job failed")
	return &failedError{reason: reason}
}

// deadlineFail reports, while the lease is held, that the job's deadline
// passed (fail, class job, cause deadline), then stops the job with
// ErrDeadline. When the coordinator ended the job first (a revoke, a 409
// or a 404), nothing is sent.
func (j *job) deadlineFail() error {
	reason := context.Cause(j.work).Error()
	j.log.Warn().Str("cause", protocol.CauseDeadline).Int64("deadline_ms", j.deadline.Milliseconds()).
		Msg("job deadline passed: work stopped")
	err := j.deliver("fail", protocol.VerbFail, protocol.Fail{Token: j.tok, Reason: reason,
		Class: protocol.FailClassJob, Cause: protocol.CauseDeadline}, &protocol.Ack{})
	if err == nil {
		j.a.metrics.failures.WithLabelValues(protocol.FailClassJob, protocol.CauseDeadline).Inc()
		j.stop(context.Cause(j.work))
		return errStopped
	}
	if errors.Is(err, errStopped) {
		return errStopped
	}
	return fmt.Errorf("report deadline: %w", err)
}

// giveBack releases the job with a fenced fail (requeue) while its lease is
// held; the coordinator can reassign it at once.
func (j *job) giveBack() error {
	j.mu.Lock()
	reason, cause := j.releasing, j.releaseCause
	j.mu.Unlock()
	if reason == "" {
		reason = "released by agent"
	}
	if cause == "" {
		cause = protocol.CauseAgentShutdown
	}
	err := j.deliver("release", protocol.VerbFail, protocol.Fail{Token: j.tok, Reason: reason, Requeue: true,
		Class: protocol.FailClassInfrastructure, Cause: cause}, &protocol.Ack{})
	if err == nil {
		j.a.metrics.failures.WithLabelValues(protocol.FailClassInfrastructure, cause).Inc()
		j.stop(fmt.Errorf("%w: %s", ErrReleased, reason))
		return errStopped
	}
	if errors.Is(err, errStopped) {
		return errStopped
	}
	return fmt.Errorf("release job: %w", err)
}

// phoneFacts returns the facts the agent last read of the phone serial, or
// nil.
func (j *job) phoneFacts(serial string) *protocol.PhoneFacts {
	for _, d := range j.a.opts.Phones.Inventory() {
		if d.Serial == serial {
			return d.Facts
		}
	}
	return nil
}
