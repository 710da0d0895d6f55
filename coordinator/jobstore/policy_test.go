package jobstore_test

import (
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestPlanFailure: how an attempt ended decides the job's next state, the
// class recorded and whether the retry waits out the backoff
// (docs/operations.md, "Deadlines, attempts and end states").
func TestPlanFailure(t *testing.T) {
	for name, c := range map[string]struct {
		f    jobstore.Failure
		want jobstore.FailPlan
	}{
		"deadline": {jobstore.Failure{Cause: protocol.CauseDeadline, Class: protocol.FailClassJob},
			jobstore.FailPlan{Kind: jobstore.StatusTimedOut, Class: protocol.FailClassJob, Cause: protocol.CauseDeadline, Reason: jobstore.DetailDeadline}},
		"effect in doubt": {jobstore.Failure{Reason: jobstore.ReasonNeedsDecision + ": step 2"},
			jobstore.FailPlan{Kind: jobstore.StatusNeedsDecision, Class: protocol.FailClassJob, Reason: jobstore.ReasonNeedsDecision + ": step 2"}},
		"job failure": {jobstore.Failure{Class: protocol.FailClassJob, Reason: "assert"},
			jobstore.FailPlan{Kind: jobstore.StatusFailed, Class: protocol.FailClassJob, Reason: "assert"}},
		"unclassified": {jobstore.Failure{Reason: "boom"},
			jobstore.FailPlan{Kind: jobstore.StatusFailed, Class: protocol.FailClassJob, Reason: "boom"}},
		"legacy requeue": {jobstore.Failure{Requeue: true},
			jobstore.FailPlan{Kind: jobstore.OutcomeRetry, Class: protocol.FailClassInfrastructure}},
		"phone unplugged": {jobstore.Failure{Class: protocol.FailClassInfrastructure, Cause: protocol.CausePhoneUnplugged},
			jobstore.FailPlan{Kind: jobstore.OutcomeRetry, Class: protocol.FailClassInfrastructure, Cause: protocol.CausePhoneUnplugged}},
		"agent sleeps": {jobstore.Failure{Class: protocol.FailClassInfrastructure, Cause: protocol.CauseAgentSleep},
			jobstore.FailPlan{Kind: jobstore.OutcomeRetry, Class: protocol.FailClassInfrastructure, Cause: protocol.CauseAgentSleep, Immediate: true}},
		"agent updates": {jobstore.Failure{Class: protocol.FailClassInfrastructure, Cause: protocol.CauseAgentUpdate, Requeue: true},
			jobstore.FailPlan{Kind: jobstore.OutcomeRetry, Class: protocol.FailClassInfrastructure, Cause: protocol.CauseAgentUpdate, Immediate: true}},
	} {
		if got := jobstore.PlanFailure(c.f); got != c.want {
			t.Errorf("%s: plan %+v, want %+v", name, got, c.want)
		}
	}
	if b, m := (jobstore.FailPlan{Immediate: true}).Backoff(5, 9); b != 0 || m != 0 {
		t.Errorf("an immediate retry waits %d (cap %d)", b, m)
	}
	if b, m := (jobstore.FailPlan{}).Backoff(5, 9); b != 5 || m != 9 {
		t.Errorf("a retry waits %d (cap %d), want 5 (cap 9)", b, m)
	}
}

// TestRetry: a store's policy is the default until set, and a zero part of
// a policy set keeps the default's (the cap never below the backoff).
func TestRetry(t *testing.T) {
	var r jobstore.Retry
	if r.Policy() != jobstore.DefaultRetryPolicy {
		t.Fatalf("zero Retry holds %+v", r.Policy())
	}
	r.Set(jobstore.RetryPolicy{Backoff: 10 * time.Millisecond, BackoffMax: time.Second})
	if got := r.Policy(); got != (jobstore.RetryPolicy{Backoff: 10 * time.Millisecond, BackoffMax: time.Second}) {
		t.Fatalf("set policy reads %+v", got)
	}
	r.Set(jobstore.RetryPolicy{})
	if r.Policy() != jobstore.DefaultRetryPolicy {
		t.Fatalf("an empty policy reads %+v, want the default", r.Policy())
	}
	r.Set(jobstore.RetryPolicy{Backoff: 2 * time.Hour})
	if got := r.Policy(); got.BackoffMax != 2*time.Hour {
		t.Fatalf("cap %s below the backoff %s", got.BackoffMax, got.Backoff)
	}
}
