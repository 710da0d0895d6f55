package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uploader"
)

// errStopped is returned by a side effect refused because the job stopped.
var errStopped = errors.New("job stopped")

type job struct {
	a     *Agent
	tok   fencing.Token
	ttl   time.Duration
	task  protocol.Task
	log   zerolog.Logger
	guard *fencing.Guard
	ctx   context.Context

	mu      sync.Mutex
	step    int
	current string // the call or step in progress, for the stop record
	arts    []string
}

func newJob(a *Agent, tok fencing.Token, ttl time.Duration, task protocol.Task) *job {
	j := &job{a: a, tok: tok, ttl: ttl, task: task}
	j.log = a.log.With().Str("job_id", tok.JobID).Str("owner", tok.Owner).Int64("generation", tok.Generation).Logger()
	return j
}

func (j *job) status() JobStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	st := JobStatus{Token: j.tok, Step: j.step}
	if j.guard != nil {
		st.Deadline = j.guard.Deadline()
	}
	return st
}

func (j *job) setCurrent(s string) {
	j.mu.Lock()
	j.current = s
	j.mu.Unlock()
}

// stop is the one stop path: revoke, 409, self-fence deadline, cancel and
// shutdown all end here. It cancels the job context; everything the job
// started runs under that context and ends with it.
func (j *job) stop(cause error) {
	j.mu.Lock()
	g := j.guard
	j.mu.Unlock()
	if g != nil {
		g.Stop(cause)
	}
}

// effect runs one side effect (upload, registration, result, failure
// report) only while the lease is held; a stale reply stops the job.
func (j *job) effect(what string, f func(ctx context.Context) error) error {
	if !j.guard.Check() {
		return errStopped
	}
	j.setCurrent(what)
	err := f(j.ctx)
	if errors.Is(err, fencing.ErrStale) {
		j.guard.Stop(fencing.ErrStale)
	}
	if err != nil && j.ctx.Err() != nil {
		return errStopped
	}
	return err
}

func (j *job) run(parent context.Context) {
	start := time.Now()
	j.mu.Lock()
	j.guard, j.ctx = fencing.NewGuard(parent, j.tok, start, j.ttl, j.a.opts.SafetyMargin)
	j.mu.Unlock()
	defer j.guard.Stop(context.Canceled) // releases the guard's timer on every path

	j.log.Info().Int("steps", len(j.task.Steps)).Msg("job assigned")

	// Do not start before the coordinator has confirmed the lease.
	if err := j.renewOnce(); err != nil {
		j.finishStopped(err)
		return
	}
	var wg sync.WaitGroup
	wg.Go(j.keepLease)
	err := j.work()
	j.guard.Stop(context.Canceled) // ends keepLease; a no-op when already stopped
	wg.Wait()
	if err != nil {
		j.finishStopped(err)
		return
	}
	j.log.Info().Dur("took", time.Since(start)).Msg("job done")
}

func (j *job) finishStopped(err error) {
	_, cause, at := j.guard.Stopped()
	if cause == nil || errors.Is(cause, context.Canceled) && !errors.Is(err, errStopped) {
		j.log.Warn().Err(err).Msg("job ended with error")
		return
	}
	j.mu.Lock()
	cut := j.current
	j.mu.Unlock()
	j.a.recordStop(StopRecord{Token: j.tok, Cause: cause.Error(), At: at, CutShort: cut})
	j.log.Warn().Str("cause", cause.Error()).Str("cut_short", cut).Msg("job stopped")
}

func (j *job) renewOnce() error {
	sent := time.Now()
	var rep protocol.RenewReply
	err := j.effect("renew", func(ctx context.Context) error {
		return j.a.request(ctx, protocol.VerbRenew, protocol.Renew{Token: j.tok}, &rep)
	})
	if err != nil {
		if !errors.Is(err, errStopped) && j.ctx.Err() == nil {
			return fmt.Errorf("renew lease: %w", err)
		}
		return errStopped
	}
	ttl := time.Duration(rep.LeaseTTLMS) * time.Millisecond
	if ttl <= 0 {
		ttl = j.ttl
	}
	if !j.guard.Renewed(sent, ttl) {
		return errStopped
	}
	return nil
}

// keepLease renews at a third of the TTL with jitter until the job ends.
// Failed renewals are retried; the self-fence deadline stops the job if
// none is accepted in time.
func (j *job) keepLease() {
	for {
		d := j.ttl / 3
		d += time.Duration(rand.Int64N(int64(d/5)+1)) - d/10
		select {
		case <-j.ctx.Done():
			return
		case <-time.After(d):
		}
		if err := j.renewOnce(); err != nil {
			if j.ctx.Err() != nil {
				return
			}
			j.log.Warn().Err(err).Msg("renewal failed; retrying")
		}
	}
}

func (j *job) work() error {
	phone, release, err := j.a.opts.Phones.Acquire(j.ctx, j.task.Device)
	if err != nil {
		if j.ctx.Err() != nil {
			return errStopped
		}
		return j.failJob(fmt.Sprintf("acquire phone: %v", err))
	}
	defer release()
	for i, s := range j.task.Steps {
		if !j.guard.Check() {
			return errStopped
		}
		j.mu.Lock()
		j.step = i
		j.mu.Unlock()
		j.setCurrent(fmt.Sprintf("step %d (%s)", i+1, s.Op))
		arts, err := phone.RunStep(j.ctx, s)
		if err != nil {
			if j.ctx.Err() != nil {
				return errStopped
			}
			if err := j.uploadOpLog(phone); err != nil {
				return err
			}
			return j.failJob(err.Error())
		}
		for _, c := range arts {
			if err := j.publish(c); err != nil {
				return err
			}
		}
	}
	if err := j.uploadOpLog(phone); err != nil {
		return err
	}
	return j.commit()
}

// publish uploads one capture and registers it with a fenced call.
func (j *job) publish(c capture.Artifact) error {
	defer func() { _ = c.Remove() }()
	a := uploader.Artifact{Name: c.Name, ContentType: c.ContentType, Size: c.Size, SHA256: c.SHA256, Path: c.Path}
	if c.Path == "" {
		a.Body = bytes.NewReader(c.Data)
		a.Size = int64(len(c.Data))
	}
	var res uploader.Result
	err := j.effect("upload "+c.Name, func(ctx context.Context) error {
		var err error
		res, err = j.a.opts.Store.Upload(ctx, j.tok, a)
		return err
	})
	if errors.Is(err, errStopped) {
		return errStopped
	}
	if err != nil {
		return j.failJob(fmt.Sprintf("upload %s: %v", c.Name, err))
	}
	err = j.effect("register "+c.Name, func(ctx context.Context) error {
		return j.a.request(ctx, protocol.VerbArtifact, protocol.Artifact{
			Token: j.tok, Name: c.Name, Key: res.Key, Size: res.Size, SHA256: res.SHA256,
			ContentType: a.ContentType, ETag: res.ETag,
		}, &protocol.Ack{})
	})
	if errors.Is(err, errStopped) {
		return errStopped
	}
	if err != nil {
		return j.failJob(fmt.Sprintf("register %s: %v", c.Name, err))
	}
	j.mu.Lock()
	j.arts = append(j.arts, res.Key)
	j.mu.Unlock()
	j.log.Debug().Str("key", res.Key).Int64("size", res.Size).Msg("artifact stored")
	return nil
}

func (j *job) uploadOpLog(p Phone) error {
	art, n := p.OpLog()
	if n == 0 {
		return nil
	}
	return j.publish(art)
}

// deliver sends a final fenced call, retrying transient failures with
// backoff until it is answered or the self-fence deadline passes.
func (j *job) deliver(what, verb string, req, resp any) error {
	backoff := 100 * time.Millisecond
	for {
		err := j.effect(what, func(ctx context.Context) error { return j.a.request(ctx, verb, req, resp) })
		if err == nil || errors.Is(err, errStopped) || errors.Is(err, fencing.ErrStale) ||
			errors.Is(err, protocol.ErrBadRequest) || errors.Is(err, protocol.ErrForbidden) || errors.Is(err, protocol.ErrUnknownJob) {
			return err
		}
		j.log.Warn().Err(err).Dur("retry_in", backoff).Msgf("%s failed; retrying", what)
		select {
		case <-j.ctx.Done():
			return errStopped
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (j *job) commit() error {
	j.mu.Lock()
	res, _ := json.Marshal(map[string]any{"artifacts": j.arts, "steps": len(j.task.Steps)})
	j.mu.Unlock()
	var rep protocol.ResultReply
	if err := j.deliver("result", protocol.VerbResult, protocol.Result{Token: j.tok, Result: res}, &rep); err != nil {
		if errors.Is(err, errStopped) || errors.Is(err, fencing.ErrStale) {
			return errStopped
		}
		return fmt.Errorf("commit result: %w", err)
	}
	j.log.Info().Int("manifest", len(rep.Manifest)).Msg("result accepted")
	return nil
}

// failJob reports the job failed (fenced) and returns the reason as error.
func (j *job) failJob(reason string) error {
	err := j.deliver("fail", protocol.VerbFail, protocol.Fail{Token: j.tok, Reason: reason}, &protocol.Ack{})
	if errors.Is(err, errStopped) || errors.Is(err, fencing.ErrStale) {
		return errStopped
	}
	j.log.Warn().Str("reason", reason).Msg("job failed")
	if err != nil {
		return fmt.Errorf("report failure %q: %w", reason, err)
	}
	return errors.New(reason)
}
