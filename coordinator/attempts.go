package coordinator

import (
	"context"
	"time"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// Deadlines, attempts and end states (docs/operations.md, "Deadlines,
// attempts and end states").

// ApplyJobDefaults fills what spec leaves unset from the jobs section of
// the coordinator configuration: the task's timeout (jobs.default_timeout)
// and the attempt limit (jobs.max_attempts). Every way of submitting a job
// applies it before Store.Submit.
func ApplyJobDefaults(spec jobstore.JobSpec, cfg config.CoordinatorJobs) jobstore.JobSpec {
	if spec.Task.TimeoutMS == 0 && cfg.DefaultTimeout > 0 {
		spec.Task.TimeoutMS = max(1, cfg.DefaultTimeout.Duration().Milliseconds())
	}
	if spec.MaxAttempts == 0 && cfg.MaxAttempts > 0 {
		spec.MaxAttempts = cfg.MaxAttempts
	}
	return spec
}

// RetryPolicyOf is the retry backoff the jobs section configures.
func RetryPolicyOf(cfg config.CoordinatorJobs) jobstore.RetryPolicy {
	return jobstore.RetryPolicy{Backoff: cfg.RetryBackoff.Duration(), BackoffMax: cfg.RetryBackoffMax.Duration()}
}

// DeadlineMS is the time left to a lease's deadline as an assign carries
// it (protocol.Assign.DeadlineMS): DeadlineAt − ExpiresAt + ttl, both on
// the database clock, so the agent counts it from when it receives the
// assign; at least 1 ms when the deadline has passed, 0 without deadline.
func DeadlineMS(l jobstore.Lease, ttl time.Duration) int64 {
	if l.DeadlineAt.IsZero() {
		return 0
	}
	return max(1, (l.DeadlineAt.Sub(l.ExpiresAt) + ttl).Milliseconds())
}

// endedState tells, after a retried failure of tok was accepted, whether
// it ended the job: StatusFailed when the job had no attempts left (the
// generation stays tok's), "" when it went back to the queue (a retry
// raises the generation) or the job could not be read.
func (s *Server) endedState(ctx context.Context, tok fencing.Token) string {
	j, err := s.store.Get(ctx, tok.JobID)
	if err != nil || j.Generation != tok.Generation || !jobstore.Finished(j.Status) {
		return ""
	}
	return j.Status
}

// attemptTaken counts the end of an attempt the coordinator took away
// (infrastructure, cause), and the job's end when it had no attempts left.
func (s *Server) attemptTaken(ctx context.Context, tok fencing.Token, cause string) {
	s.metrics.attemptEnded(protocol.FailClassInfrastructure, cause)
	if st := s.endedState(ctx, tok); st != "" {
		s.metrics.jobEnded(st)
		s.jobLog(tok).Warn().Str("cause", cause).Msg("job failed: attempts exhausted")
	}
}

// expireOnce ends the jobs whose deadline passed (TIMED_OUT, in the store)
// and revokes the tokens taken away. The reaper runs it on every sweep.
func (s *Server) expireOnce(ctx context.Context) {
	toks, err := s.store.ExpireDeadlines(ctx, reapLimit)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error().Err(err).Msg("expire deadlines")
		}
		return
	}
	// Jobs that timed out while queued hold no token: the jobs gauge
	// counts them, jobs_ended_total counts those taken from an agent.
	for _, t := range toks {
		s.metrics.attemptEnded(protocol.FailClassJob, protocol.CauseDeadline)
		s.metrics.jobEnded(jobstore.StatusTimedOut)
		s.jobLog(t).Info().Msg("deadline passed; job timed out")
		s.Revoke(t, "deadline passed")
	}
	if len(toks) > 0 {
		s.Kick()
	}
}
