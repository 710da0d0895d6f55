package jobstore

import (
	"sync/atomic"

	"github.com/edgeagent/edgeagent/protocol"
)

// JobPolicy is the policy columns of a job to submit, defaults applied.
type JobPolicy struct {
	Project     string
	Priority    int
	MaxAttempts int
	SubmittedBy string
}

// Policy returns spec's policy with the defaults applied: project
// DefaultProject, DefaultMaxAttempts attempts.
func Policy(spec JobSpec) JobPolicy {
	p := JobPolicy{Project: spec.Project, Priority: spec.Priority, MaxAttempts: spec.MaxAttempts, SubmittedBy: spec.SubmittedBy}
	if p.Project == "" {
		p.Project = DefaultProject
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	return p
}

// FailPlan is a Failure prepared for a store's fail statement.
type FailPlan struct {
	Kind   string // OutcomeRetry, OutcomeRequeue, or the end state: FAILED, TIMED_OUT, NEEDS_DECISION
	Class  string // recorded class (never empty)
	Cause  string
	Reason string
	// Immediate: retried without the backoff (Failure.Immediate).
	Immediate bool
}

// Backoff returns the backoff base and cap a retry of the plan waits out:
// base and maxBackoff, or 0 and 0 when the plan is Immediate.
func (p FailPlan) Backoff(base, maxBackoff int64) (int64, int64) {
	if p.Immediate {
		return 0, 0
	}
	return base, maxBackoff
}

// PlanFailure prepares f (Failure.Outcome).
func PlanFailure(f Failure) FailPlan {
	reason := f.Reason
	if reason == "" && f.Cause == protocol.CauseDeadline {
		reason = DetailDeadline
	}
	return FailPlan{Kind: f.Outcome(), Class: f.RecordedClass(), Cause: f.Cause, Reason: reason, Immediate: f.Immediate()}
}

// Retry holds a store's retry policy; its zero value holds
// DefaultRetryPolicy. It is safe for concurrent use.
type Retry struct {
	p atomic.Pointer[RetryPolicy]
}

// Set replaces the policy; a zero Backoff or BackoffMax keeps the default's.
func (r *Retry) Set(p RetryPolicy) {
	if p.Backoff <= 0 {
		p.Backoff = DefaultRetryPolicy.Backoff
	}
	if p.BackoffMax <= 0 {
		p.BackoffMax = max(DefaultRetryPolicy.BackoffMax, p.Backoff)
	}
	r.p.Store(&p)
}

// Policy returns the policy.
func (r *Retry) Policy() RetryPolicy {
	if p := r.p.Load(); p != nil {
		return *p
	}
	return DefaultRetryPolicy
}
