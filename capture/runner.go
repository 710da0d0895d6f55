package capture

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/protocol"
)

// RunnerOptions configures a Runner.
type RunnerOptions struct {
	// SpoolDir, when set, is the directory captures stream into, one file
	// per artifact (Artifact.Path), hashed as they are written, so that a
	// long recording is never held in memory and the upload does not read
	// a capture again to hash it. When empty, captures are kept in memory
	// (Artifact.Data).
	SpoolDir string
	// OpLog, when set, receives one entry per step, failed steps included.
	OpLog *OpLog
	// BeforeAfter takes a screenshot before and after every input step
	// (task capture before_after, see SetBeforeAfter).
	BeforeAfter bool
	// RecordSegments bounds the segments of one recording: when the phone
	// ends a recording at its time limit (180 s), the runner starts the
	// next segment at once, up to this many in all (docs/capture.md,
	// Recordings longer than 180 s). 0: no bound; 1: no chaining, the
	// recording is cut at the limit.
	RecordSegments int
}

// StepOutcome is what one step did.
type StepOutcome struct {
	Seq       int // 1-based step number within the job (StepInfo)
	Op        string
	Start     time.Time
	Duration  time.Duration
	Artifacts []Artifact // captures of the step, in order; empty for input steps
	// Warning tells what went other than asked in a step that succeeded:
	// a recording the phone cut at its time limit before record_stop, an
	// optional extract whose element was absent.
	Warning string
	// Observation is what an extract step read (nil for other steps and
	// an optional extract that found nothing).
	Observation *protocol.Observation
}

// Runner runs the steps of one job on one phone. RunStep calls must not
// overlap; Close may be called at any time from any goroutine.
type Runner struct {
	dev       Device
	opts      RunnerOptions
	job       context.Context
	closeOnce sync.Once

	mu        sync.Mutex
	stopAfter func() bool
	closed    bool
	seq       int
	names     map[string]bool
	rec       Recording
	recName   string
	recSeq    int // the number of the step that started rec
	// warning is the Warning of the step being run; only RunStep touches it.
	warning string
	// observation is what the extract step being run read; only RunStep
	// touches it.
	observation *protocol.Observation
	// point is where the element step being run touched the screen (its
	// element's centre), for the operation log; only RunStep touches it.
	point *[2]int
	// versions are the app versions read for observations, by package.
	versions map[string]protocol.AppVersion
	// logMark is where the job's logcat starts (logcat.go).
	logMark *LogMark
}

// NewRunner returns a runner bound to the job context ctx: when ctx is done
// (revoke, stale token, self-fence deadline, shutdown) the runner closes at
// once, which aborts a recording in progress even between steps.
func NewRunner(ctx context.Context, d Device, opts RunnerOptions) *Runner {
	r := &Runner{dev: d, opts: opts, job: ctx, names: map[string]bool{OpLogName: true}}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Under the lock: when ctx is already done, Close runs at once in its
	// own goroutine and must see stopAfter set.
	r.stopAfter = context.AfterFunc(ctx, r.Close)
	return r
}

// Device returns the runner's phone.
func (r *Runner) Device() Device { return r.dev }

// Close aborts a recording in progress and makes later RunStep calls fail
// with ErrClosed. It is idempotent; every call returns only once the abort
// is done. Artifacts already returned stay valid.
func (r *Runner) Close() { r.closeOnce.Do(r.close) }

func (r *Runner) close() {
	r.mu.Lock()
	r.closed = true
	rec := r.rec
	r.rec = nil
	stop := r.stopAfter
	r.mu.Unlock()
	stop()
	if rec != nil {
		rec.Abort()
	}
}

// RunStep performs s on the phone and returns what it captured:
//
//   - screenshot: <name>.png (image/png), name defaulting to screenshot-NNN
//   - ui_dump: <name>.xml (application/xml), default ui_dump-NNN
//   - record_stop: <name>.mp4 (video/mp4), name from the record_stop step,
//     else from its record_start step, else recording-NNN with the
//     record_start's number
//
// NNN is the step's Seq: the StepInfo carried by ctx (WithStepInfo), else
// the runner's next number. ".png", ".xml" or ".mp4" is appended unless the
// name already ends with it, and a name may be used once per runner.
// tap with duration_ms > 0 is a long press; wait sleeps duration_ms. Every
// wait honours ctx, which should be the job context or derived from it.
// On error the outcome still carries Seq, Op, Start and Duration. When the
// job context is done by the time the step ends, the runner is closed (and a
// recording aborted) before RunStep returns.
func (r *Runner) RunStep(ctx context.Context, s protocol.Step) (StepOutcome, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return StepOutcome{Op: s.Op}, fmt.Errorf("run step %s: %w", s.Op, ErrClosed)
	}
	info := stepInfoFrom(ctx)
	seq := info.Seq
	if seq <= 0 {
		seq = r.seq
		if !info.Evidence {
			seq++
		}
	}
	if !info.Evidence {
		r.seq = max(r.seq, seq)
	}
	r.mu.Unlock()

	out := StepOutcome{Seq: seq, Op: s.Op, Start: time.Now()}
	r.warning, r.observation, r.point = "", nil, nil
	arts, err := r.execStep(ctx, seq, s, info)
	if err == nil {
		out.Observation = r.observation
	}
	out.Duration = time.Since(out.Start)
	out.Artifacts = arts
	if err != nil {
		err = fmt.Errorf("run step %d (%s): %w", seq, s.Op, err)
	} else if out.Warning = r.warning; out.Warning != "" {
		// The job's logger, when its context carries one, adds the job's
		// fields.
		zerolog.Ctx(r.job).Warn().Str("serial", r.dev.Serial()).Int("seq", seq).Str("op", s.Op).
			Msg(out.Warning)
	}
	if r.job.Err() != nil {
		// The job was stopped: make sure the recording is gone before the
		// caller hears of it.
		r.Close()
	}
	if r.opts.OpLog != nil {
		e := OpEntry{
			Time:       out.Start,
			Seq:        seq,
			Serial:     r.dev.Serial(),
			Op:         s.Op,
			Params:     withPoint(r.opts.OpLog.Params(s), r.point),
			DurationMS: float64(out.Duration.Microseconds()) / 1000,
			Outcome:    OutcomeOK,
			Evidence:   info.Evidence,
		}
		if err != nil {
			e.Outcome = OutcomeError
			e.Error = err.Error()
		}
		e.Warning = out.Warning
		for _, a := range arts {
			e.Artifacts = append(e.Artifacts, OpArtifact{Name: a.Name, ContentType: a.ContentType, Size: a.Size, SHA256: a.SHA256})
		}
		if lerr := r.opts.OpLog.Append(e); lerr != nil && err == nil {
			err = lerr
		}
	}
	return out, err
}

// SkipStep writes the operation log line of a step the job did not run
// (an effect already done, or in doubt): seq is its number, reason why it
// was skipped, and stepErr, when not nil, makes the line's outcome error.
// Later steps go on from seq.
func (r *Runner) SkipStep(seq int, s protocol.Step, reason string, stepErr error) error {
	r.mu.Lock()
	r.seq = max(r.seq, seq)
	r.mu.Unlock()
	if r.opts.OpLog == nil {
		return nil
	}
	e := OpEntry{
		Time: time.Now(), Seq: seq, Serial: r.dev.Serial(), Op: s.Op,
		Params: r.opts.OpLog.Params(s), Outcome: OutcomeOK, Skipped: reason,
	}
	if stepErr != nil {
		e.Outcome, e.Error = OutcomeError, stepErr.Error()
	}
	return r.opts.OpLog.Append(e)
}

func (r *Runner) exec(ctx context.Context, seq int, s protocol.Step) ([]Artifact, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if s.Effect != nil {
		ctx = WithEffectKey(ctx, s.Effect.Key)
	}
	d := r.dev
	dur := time.Duration(s.DurationMS) * time.Millisecond
	switch s.Op {
	case protocol.OpLaunch:
		if err := d.Launch(ctx, s.Package); err != nil {
			return nil, err
		}
		r.appVersion(ctx, s.Package) // provenance: the version the job ran
		return nil, nil
	case protocol.OpWait:
		return nil, r.wait(ctx, dur)
	case protocol.OpTap:
		if s.Element != nil {
			return nil, r.tapElement(ctx, s, dur)
		}
		if dur > 0 {
			return nil, d.Swipe(ctx, s.X, s.Y, s.X, s.Y, dur)
		}
		return nil, d.Tap(ctx, s.X, s.Y)
	case protocol.OpSwipe:
		return nil, d.Swipe(ctx, s.X, s.Y, s.X2, s.Y2, dur)
	case protocol.OpLongPress:
		if dur == 0 {
			dur = DefaultLongPress
		}
		if s.Element != nil {
			return nil, r.tapElement(ctx, s, dur)
		}
		return nil, d.Swipe(ctx, s.X, s.Y, s.X, s.Y, dur)
	case protocol.OpText:
		if s.Element != nil {
			// Tap the field first, then type into it.
			if err := r.tapElement(ctx, s, 0); err != nil {
				return nil, err
			}
		}
		return nil, d.Text(ctx, s.Text)
	case protocol.OpWaitFor:
		return nil, r.waitFor(ctx, s)
	case protocol.OpAssert:
		return nil, r.assert(ctx, s)
	case protocol.OpScrollUntil:
		return nil, r.scrollUntil(ctx, s)
	case protocol.OpExtract:
		return r.extract(ctx, seq, s)
	case protocol.OpKey:
		return nil, d.Key(ctx, s.Key)
	case protocol.OpWake:
		return nil, d.Wake(ctx)
	case protocol.OpUnlock:
		return nil, d.Unlock(ctx)
	case protocol.OpOpenURL:
		return nil, d.OpenURL(ctx, s.URL)
	case protocol.OpForceStop:
		return nil, d.ForceStop(ctx, s.Package)
	case protocol.OpClearData:
		return nil, d.ClearData(ctx, s.Package)
	case protocol.OpRotate:
		return nil, d.Rotate(ctx, s.Orientation)
	case protocol.OpInstallApp:
		return nil, r.installApp(ctx, s)
	case protocol.OpScreenshot:
		return r.capture(s.Name, "screenshot", seq, ".png", ContentTypePNG, func() ([]byte, error) { return d.Screenshot(ctx) })
	case protocol.OpUIDump:
		return r.capture(s.Name, "ui_dump", seq, ".xml", ContentTypeXML, func() ([]byte, error) { return d.UIDump(ctx) })
	case protocol.OpRecordStart:
		return nil, r.recordStart(ctx, seq, s)
	case protocol.OpRecordStop:
		return r.recordStop(ctx, seq, s)
	default:
		// protocol.Step.Validate knows an op this runner does not.
		return nil, invalidStep("op: %q is not run by this agent", s.Op)
	}
}

// reserve claims an artifact name for this runner.
func (r *Runner) reserve(name, prefix string, seq int, ext string) (string, error) {
	n, err := artifactName(name, prefix, seq, ext)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names[n] {
		return "", invalidStep("artifact name %q already used", n)
	}
	r.names[n] = true
	return n, nil
}

func (r *Runner) unreserve(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.names, name)
}

func (r *Runner) capture(name, prefix string, seq int, ext, ct string, grab func() ([]byte, error)) ([]Artifact, error) {
	n, err := r.reserve(name, prefix, seq, ext)
	if err != nil {
		return nil, err
	}
	b, err := grab()
	if err != nil {
		r.unreserve(n)
		return nil, err
	}
	a, err := r.keep(n, ct, b)
	if err != nil {
		r.unreserve(n)
		return nil, err
	}
	return []Artifact{a}, nil
}

func (r *Runner) recordStart(ctx context.Context, seq int, s protocol.Step) error {
	r.mu.Lock()
	running := r.rec != nil
	r.mu.Unlock()
	if running {
		return invalidStep("a recording is already running")
	}
	rec, err := r.dev.StartRecording(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		rec.Abort()
		return ErrClosed
	}
	// The chain starts the next segment when the phone ends this one at
	// its time limit (recchain.go).
	r.rec, r.recName, r.recSeq = r.newRecChain(rec), s.Name, seq
	r.mu.Unlock()
	return nil
}

func (r *Runner) recordStop(ctx context.Context, seq int, s protocol.Step) ([]Artifact, error) {
	r.mu.Lock()
	rec, name, startSeq := r.rec, r.recName, r.recSeq
	r.mu.Unlock()
	if rec == nil {
		return nil, invalidStep("no recording is running")
	}
	if s.Name != "" {
		name = s.Name
	}
	// Unnamed, the recording takes the number of the step that started it
	// (docs/protocol.md section 5).
	n, err := r.reserve(name, "recording", startSeq, ".mp4")
	if err != nil {
		return nil, err
	}
	arts, err := r.stopChain(ctx, rec.(*recChain), n)
	r.mu.Lock()
	if r.rec == rec {
		r.rec, r.recName = nil, ""
	}
	r.mu.Unlock()
	if err != nil {
		rec.Abort()
		r.unreserve(n)
		return nil, err
	}
	return arts, nil
}

// stopInto stops rec and streams its bytes into a sink: a spool file or
// memory, hashed on the way.
func (r *Runner) stopInto(ctx context.Context, rec Recording, name string) (Artifact, error) {
	s, err := newSink(r.opts.SpoolDir, name, ContentTypeMP4)
	if err != nil {
		return Artifact{}, err
	}
	if _, err := rec.Stop(ctx, s); err != nil {
		s.discard()
		return Artifact{}, err
	}
	return s.finish()
}

// waitPoll is how often a wait step looks at its phone's state.
const waitPoll = 100 * time.Millisecond

// stater is a Device that knows its state more precisely than Info says
// (adb's "gone" for a phone adb no longer lists).
type stater interface{ phoneState() string }

// stateExplainer is a Device that explains its own state (an iPhone,
// whose fixes are not adb's): nil while it is usable.
type stateExplainer interface{ stateProblem() error }

// wait sleeps d, watching the phone: a phone that leaves state "device"
// (unplugged, offline, unauthorized) fails the wait at once with a
// *PhoneStateError, as any other step on it would, rather than at the next
// step.
func (r *Runner) wait(ctx context.Context, d time.Duration) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	end := time.NewTimer(d)
	defer end.Stop()
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	for {
		var err error
		switch s := r.dev.(type) {
		case stateExplainer:
			err = s.stateProblem()
		case stater:
			err = StateProblem(r.dev.Serial(), s.phoneState())
		default:
			err = StateProblem(r.dev.Serial(), r.dev.Info().State)
		}
		if err != nil {
			return fmt.Errorf("wait: %w", err)
		}
		select {
		case <-end.C:
			return nil
		case <-ctx.Done():
			return ctxErr(ctx)
		case <-tick.C:
		}
	}
}

// withPoint adds the point an element step touched to its log line.
func withPoint(p map[string]any, pt *[2]int) map[string]any {
	if pt == nil {
		return p
	}
	if p == nil {
		p = map[string]any{}
	}
	p["x"], p["y"] = pt[0], pt[1]
	return p
}
