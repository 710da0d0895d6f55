package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// onStep takes an interactive step for a running job (VerbStep). It only
// checks and queues the request; the job runs it between its own steps, or,
// for an interactive job, when it comes, and replies then.
func (a *Agent) onStep(m *nats.Msg) {
	var r protocol.StepRequest
	if err := json.Unmarshal(m.Data, &r); err != nil {
		replyError(m, protocol.CodeBadRequest, "decode step: "+err.Error())
		return
	}
	if err := r.Token.Validate(); err != nil {
		replyError(m, protocol.CodeBadRequest, err.Error())
		return
	}
	if r.Token.Owner != a.owner {
		replyError(m, protocol.CodeForbidden, "token owner is not this agent process")
		return
	}
	a.mu.Lock()
	j := a.jobs[r.Token.JobID]
	a.mu.Unlock()
	if j == nil {
		replyError(m, protocol.CodeUnknownJob, "no such running job")
		return
	}
	if j.tok != r.Token {
		replyError(m, protocol.CodeStale, "token is not the job's current one")
		return
	}
	switch {
	case r.Finish && !j.task.Interactive:
		replyError(m, protocol.CodeBadRequest, "finish is only for interactive jobs")
		return
	case r.Step.Op == "" && !r.Finish:
		replyError(m, protocol.CodeBadRequest, "step.op is required")
		return
	case r.Step.Op != "":
		if err := r.Step.Validate(); err != nil {
			replyError(m, protocol.CodeBadRequest, "invalid step: step: "+err.Error())
			return
		}
	}
	if code, msg := j.enqueue(&stepReq{req: r, msg: m}); code != 0 {
		replyError(m, code, msg)
	}
}

// enqueue queues r for the job; it returns an error code and message when
// the job takes no more steps.
func (j *job) enqueue(r *stepReq) (int, string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.accepting {
		if j.ctx.Err() != nil {
			return protocol.CodeStale, "job stopped: token is no longer current"
		}
		return protocol.CodeUnavailable, "job is finishing"
	}
	select {
	case j.steps <- r:
		return 0, ""
	default:
		return protocol.CodeUnavailable, fmt.Sprintf("too many pending steps (%d)", maxPendingSteps)
	}
}

// servePending runs the interactive steps queued now, between two steps of
// the task.
func (j *job) servePending(phone Phone) error {
	for {
		select {
		case r := <-j.steps:
			if r.req.Finish && j.task.Interactive {
				// Finishing is interact's, after the task's steps.
				j.finishReq = r
				return nil
			}
			if err := j.runRequested(phone, r, true); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// interact serves the steps of an interactive job until one asks to
// finish, which it returns (its reply waits for the result).
func (j *job) interact(phone Phone) (*stepReq, error) {
	idle := time.Duration(j.task.IdleTimeoutMS) * time.Millisecond
	if idle <= 0 {
		j.a.mu.Lock()
		idle = j.a.idle
		j.a.mu.Unlock()
	}
	t := time.NewTimer(idle)
	defer t.Stop()
	j.setCurrent("waiting for a step")
	if r := j.finishReq; r != nil {
		j.finishReq = nil
		if r.req.Step.Op != "" {
			if err := j.runRequested(phone, r, false); err != nil {
				return nil, err
			}
		}
		return r, nil
	}
	for {
		select {
		case <-j.work.Done():
			return nil, errStopped
		case <-t.C:
			return nil, fmt.Errorf("%w for %v", errIdle, idle)
		case r := <-j.steps:
			if r.req.Step.Op != "" {
				if err := j.runRequested(phone, r, !r.req.Finish); err != nil {
					return nil, err
				}
			}
			if r.req.Finish {
				return r, nil
			}
			j.setCurrent("waiting for a step")
			t.Reset(idle)
		}
	}
}

// runRequested runs one requested step while the token is current. A step
// the phone could not perform is answered with outcome error and the job
// goes on; a stop is answered 409 (503 when the job is being released); a
// failed upload or registration is answered with outcome error and ends the
// job (its error is returned).
func (j *job) runRequested(phone Phone, r *stepReq, replyNow bool) error {
	if !j.guard.Check() || j.work.Err() != nil {
		j.replyStopped(r)
		return errStopped
	}
	start := time.Now()
	seq := j.beginStep()
	keys, err := j.runGuarded(phone, seq, fmt.Sprintf("step %d (%s, interactive)", seq, r.req.Step.Op), "interactive", r.req.Step)
	rep := protocol.StepReply{Seq: seq, Op: r.req.Step.Op, Outcome: protocol.OutcomeOK,
		DurationMS: float64(time.Since(start).Microseconds()) / 1000, Artifacts: keys}
	var se *stepError
	switch {
	case errors.Is(err, errStopped):
		j.replyStopped(r)
		return errStopped
	case errors.As(err, &se):
		rep.Outcome, rep.Error = protocol.OutcomeError, se.Error()
		j.log.Info().Str("op", r.req.Step.Op).Err(err).Msg("interactive step failed")
		reply(r.msg, rep)
		return nil
	case err != nil:
		rep.Outcome, rep.Error = protocol.OutcomeError, err.Error()+" (the job fails)"
		reply(r.msg, rep)
		return err
	}
	r.reply = &rep
	if replyNow {
		reply(r.msg, rep)
	}
	return nil
}

// replyStopped answers a step request that will not run (or whose finish
// did not commit): 409 once the token is no longer current, 503 otherwise.
func (j *job) replyStopped(r *stepReq) {
	if r == nil {
		return
	}
	if j.ctx.Err() != nil {
		replyError(r.msg, protocol.CodeStale, "job stopped: token is no longer current")
		return
	}
	replyError(r.msg, protocol.CodeUnavailable, "job is ending")
}

// closeSteps refuses the step requests still queued when the job ends.
func (j *job) closeSteps() {
	j.mu.Lock()
	j.accepting = false
	j.mu.Unlock()
	for {
		select {
		case r := <-j.steps:
			j.replyStopped(r)
		default:
			return
		}
	}
}

// AuthorizeUpload asks the coordinator to authorise and presign one upload
// of a running job (the upload verb, presigned mode): the request is fenced
// like the job's other calls — sent only while the job's lease is held, and
// a 409 or a 404 stops the job. It is the uploader.Authorize of a presigned-mode
// uploader. A token that is not a running job's current one here is
// refused with fencing.ErrStale without asking.
func (a *Agent) AuthorizeUpload(ctx context.Context, req protocol.Upload) (protocol.UploadReply, error) {
	var rep protocol.UploadReply
	a.mu.Lock()
	j := a.jobs[req.Token.JobID]
	a.mu.Unlock()
	if j == nil || j.tok != req.Token {
		return rep, fmt.Errorf("authorize upload %s: not a running job's token: %w", req.Name, fencing.ErrStale)
	}
	err := j.call(ctx, protocol.VerbUpload, req, &rep)
	j.stopOnRefusal(err, "upload "+req.Name, nil)
	if err != nil {
		return rep, fmt.Errorf("authorize upload %s: %w", req.Name, err)
	}
	return rep, nil
}
