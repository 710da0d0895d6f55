package coordinator_test

import (
	"testing"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// TestNewEvent: how a write_events row becomes a job event, for the ends
// the store tests cannot reach on every branch (a reclaim that ends a job,
// an end recorded under a verb of a later version).
func TestNewEvent(t *testing.T) {
	t.Parallel()
	base := jobstore.RawEvent{ID: 7, JobID: "j", Owner: "pc-a/boot", Generation: 2, Accepted: true, JobFound: true,
		Project: "p", JobStatus: jobstore.StatusInProgress, JobGen: 2, ArtSize: -1}
	for _, c := range []struct {
		name       string
		edit       func(*jobstore.RawEvent)
		wantType   string
		wantStatus string
		wantReason string
	}{
		{"renew", func(r *jobstore.RawEvent) { r.Verb = "renew" }, "", "", ""},
		{"refused claim", func(r *jobstore.RawEvent) { r.Verb, r.Accepted = "claim", false }, "", "", ""},
		{"unknown job", func(r *jobstore.RawEvent) { r.Verb, r.JobFound = "claim", false }, "", "", ""},
		{"grant", func(r *jobstore.RawEvent) { r.Verb, r.JobPhone = "claim", "S1" }, jobstore.EventGranted, "", ""},
		{"reclaim, queued again", func(r *jobstore.RawEvent) {
			r.Verb, r.Detail, r.JobStatus, r.JobGen = "reclaim", "lease expired", jobstore.StatusQueued, 3
		}, jobstore.EventReclaimed, "", ""},
		{"reclaim that ended the job", func(r *jobstore.RawEvent) {
			r.Verb, r.Detail, r.JobStatus, r.JobGen, r.Ended, r.FailReason = "reclaim", "lease expired", jobstore.StatusFailed, 3, true, "attempts used up"
		}, jobstore.EventFailed, jobstore.StatusFailed, "attempts used up"},
		{"deadline under a later verb", func(r *jobstore.RawEvent) {
			r.Verb, r.JobStatus, r.Ended, r.FailReason = "timeout", jobstore.StatusTimedOut, true, "deadline passed"
		}, jobstore.EventTimedOut, jobstore.StatusTimedOut, "deadline passed"},
		{"needs decision", func(r *jobstore.RawEvent) {
			r.Verb, r.JobStatus, r.Ended, r.FailReason = "fail", jobstore.StatusNeedsDecision, true, "effect in doubt"
		}, jobstore.EventNeedsDecision, jobstore.StatusNeedsDecision, "effect in doubt"},
		{"cancel", func(r *jobstore.RawEvent) {
			r.Verb, r.Detail, r.JobStatus, r.Ended = "cancel", "not needed", jobstore.StatusCancelled, true
		}, jobstore.EventCancelled, jobstore.StatusCancelled, "not needed"},
		{"fail, queued again", func(r *jobstore.RawEvent) { r.Verb, r.JobStatus = "fail", jobstore.StatusQueued },
			jobstore.EventAttemptFailed, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := base
			c.edit(&r)
			e := jobstore.NewEvent(r)
			if e.Type != c.wantType || e.Status != c.wantStatus || e.Reason != c.wantReason {
				t.Errorf("event %+v, want type %q status %q reason %q", e, c.wantType, c.wantStatus, c.wantReason)
			}
			if e.Type != "" && e.Message == "" {
				t.Error("no message")
			}
			if e.Type == jobstore.EventGranted && (e.Phone != "S1" || e.Message != "granted g2 to agent pc-a on phone S1") {
				t.Errorf("grant: phone %q message %q", e.Phone, e.Message)
			}
		})
	}
}
