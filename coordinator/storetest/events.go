package storetest

import (
	"errors"
	"reflect"
	"testing"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/protocol"
)

var eventTests = []struct {
	name string
	fn   func(t *testing.T, s sqlstore.Lab)
}{
	{"Events", testEvents},
	{"EventsEndStates", testEventsEndStates},
	{"RecordEvent", testRecordEvent},
}

func eventTypes(evs []jobstore.Event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func listEvents(t *testing.T, s sqlstore.Lab, q jobstore.EventQuery) []jobstore.Event {
	t.Helper()
	evs, err := s.Events(t.Context(), q)
	if err != nil {
		t.Fatalf("events %+v: %v", q, err)
	}
	return evs
}

// testEvents: a job's life as events, in order, without renewals or refused
// attempts; resume after any id gives the rest; project filters.
func testEvents(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "ev", Task: testTask(), Project: "alpha", SubmittedBy: "tok-ann"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: "other", Task: testTask(), Project: "beta"}); err != nil {
		t.Fatal(err)
	}
	la := claim(t, s, "ev", ownerA, long)
	if _, err := s.Renew(ctx, la.Token, long); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, "ev", ownerB, long); err == nil {
		t.Fatal("second claim accepted")
	}
	if err := s.RegisterArtifact(ctx, la.Token, artifact(la.Token, "shot.png", "1")); err != nil {
		t.Fatal(err)
	}
	lb := reassign(t, s, "ev", ownerB)
	if err := s.Fail(ctx, lb.Token, jobstore.Failure{Reason: "flaky", Requeue: true}); err != nil {
		t.Fatal(err)
	}
	lc := claim(t, s, "ev", ownerC, long)
	if err := s.Commit(ctx, la.Token, result("late")); err == nil {
		t.Fatal("stale commit accepted")
	}
	if err := s.Commit(ctx, lc.Token, result("c")); err != nil {
		t.Fatal(err)
	}

	evs := listEvents(t, s, jobstore.EventQuery{JobID: "ev"})
	want := []string{jobstore.EventQueued, jobstore.EventGranted, jobstore.EventArtifactRegistered,
		jobstore.EventGranted, jobstore.EventAttemptFailed, jobstore.EventGranted, jobstore.EventSucceeded}
	if got := eventTypes(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("event types of ev:\n got %v\nwant %v", got, want)
	}
	for i, e := range evs {
		if e.JobID != "ev" || e.Project != "alpha" {
			t.Errorf("event %d: job %q project %q, want ev alpha", i, e.JobID, e.Project)
		}
		if i > 0 && e.ID <= evs[i-1].ID {
			t.Errorf("event ids not increasing: %d after %d", e.ID, evs[i-1].ID)
		}
		if e.Message == "" {
			t.Errorf("event %d (%s) has no message", i, e.Type)
		}
	}
	if evs[0].Message != "queued by tok-ann" {
		t.Errorf("queued message %q, want %q", evs[0].Message, "queued by tok-ann")
	}
	if g := evs[1]; g.Generation != 1 || g.Agent != "agent-a" {
		t.Errorf("first grant: generation %d agent %q, want 1 agent-a", g.Generation, g.Agent)
	}
	if a := evs[2].Artifact; a == nil || a.Name != "shot.png" || a.Size != int64(len("shot.png"))*1000 {
		t.Errorf("artifact event carries %+v, want shot.png of %d bytes", a, len("shot.png")*1000)
	}
	// The retried release raised the generation (2 to 3), and the grant
	// after it again (to 4).
	if end := evs[6]; end.Status != jobstore.StatusSucceeded || end.Generation != 4 {
		t.Errorf("end event: status %q generation %d, want SUCCEEDED 4", end.Status, end.Generation)
	}

	// Resume after every id gives exactly the rest.
	for i := range evs {
		rest := listEvents(t, s, jobstore.EventQuery{JobID: "ev", AfterID: evs[i].ID})
		if got, want := eventTypes(rest), eventTypes(evs[i+1:]); !reflect.DeepEqual(got, want) {
			t.Errorf("after %d: %v, want %v", evs[i].ID, got, want)
		}
	}
	// UpTo and Limit bound the answer.
	if got := listEvents(t, s, jobstore.EventQuery{JobID: "ev", UpTo: evs[2].ID}); len(got) != 3 {
		t.Errorf("up to the third id: %d events, want 3", len(got))
	}
	if got := listEvents(t, s, jobstore.EventQuery{JobID: "ev", Limit: 2}); len(got) != 2 {
		t.Errorf("limit 2: %d events", len(got))
	}

	// Projects: alpha has only ev's events; an empty list has none.
	for _, e := range listEvents(t, s, jobstore.EventQuery{Projects: []string{"alpha"}}) {
		if e.JobID != "ev" {
			t.Errorf("project alpha gave an event of job %s", e.JobID)
		}
	}
	if got := listEvents(t, s, jobstore.EventQuery{Projects: []string{"alpha", "beta"}}); len(got) != len(evs)+1 {
		t.Errorf("projects alpha and beta: %d events, want %d", len(got), len(evs)+1)
	}
	if got := listEvents(t, s, jobstore.EventQuery{Projects: []string{}}); len(got) != 0 {
		t.Errorf("no project: %d events, want none", len(got))
	}

	// All shows every row, the renewal and refused attempts as Type "".
	all := listEvents(t, s, jobstore.EventQuery{All: true})
	var blank, typed int
	for _, e := range all {
		if e.Type == "" {
			blank++
		} else {
			typed++
		}
	}
	if typed != len(evs)+1 || blank != 3 {
		t.Errorf("all rows: %d events and %d others, want %d and 3 (renew, refused claim, refused commit)", typed, blank, len(evs)+1)
	}
	last, err := s.LastEventID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if last != all[len(all)-1].ID {
		t.Errorf("last event id %d, want %d", last, all[len(all)-1].ID)
	}
	if _, err := s.Events(ctx, jobstore.EventQuery{All: true, JobID: "ev"}); err == nil {
		t.Error("all rows of one job accepted")
	}

	// The submit is a job event, not a write attempt.
	for _, e := range events(t, s, "ev") {
		if e.verb == jobstore.VerbSubmit {
			t.Errorf("WriteEvents lists the submit: %+v", e)
		}
	}
}

// testEventsEndStates: a job ended by a failure, by a cancel and by a
// reclaim each end with the event of their end state.
func testEventsEndStates(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "f")
	lf := claim(t, s, "f", ownerA, long)
	if err := s.Fail(ctx, lf.Token, jobstore.Failure{Reason: "screen locked"}); err != nil {
		t.Fatal(err)
	}
	evs := listEvents(t, s, jobstore.EventQuery{JobID: "f"})
	end := evs[len(evs)-1]
	if end.Type != jobstore.EventFailed || end.Reason != "screen locked" || end.Status != jobstore.StatusFailed {
		t.Errorf("end of f: %+v, want failed with the reason", end)
	}

	submit(t, s, "c")
	claim(t, s, "c", ownerA, long)
	if _, err := s.Cancel(ctx, "c", "not needed"); err != nil {
		t.Fatal(err)
	}
	evs = listEvents(t, s, jobstore.EventQuery{JobID: "c"})
	end = evs[len(evs)-1]
	status := get(t, s, "c").Status
	if end.Type != jobstore.EndEvent(status) || end.Status != status || end.Reason != "not needed" {
		t.Errorf("end of c (%s): %+v, want %s with the reason", status, end, jobstore.EndEvent(status))
	}
}

// testRecordEvent: a step event lands in the job's events, not in its
// write attempts; an unknown job or verb is refused.
func testRecordEvent(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	submit(t, s, "st")
	l := claim(t, s, "st", ownerA, long)
	id, err := s.RecordEvent(ctx, jobstore.JobEvent{JobID: "st", Verb: jobstore.VerbStep,
		Owner: l.Token.Owner, Generation: l.Token.Generation, Detail: "1 " + protocol.OpTap + ": ok"})
	if err != nil {
		t.Fatal(err)
	}
	evs := listEvents(t, s, jobstore.EventQuery{JobID: "st"})
	last := evs[len(evs)-1]
	if last.ID != id || last.Type != jobstore.EventStep || last.Detail != "1 tap: ok" || last.Generation != 1 {
		t.Errorf("step event %+v, want id %d step '1 tap: ok' g1", last, id)
	}
	for _, e := range events(t, s, "st") {
		if e.verb == jobstore.VerbStep {
			t.Errorf("WriteEvents lists the step: %+v", e)
		}
	}
	if _, err := s.RecordEvent(ctx, jobstore.JobEvent{JobID: "nope", Verb: jobstore.VerbStep}); !errors.Is(err, jobstore.ErrNotFound) {
		t.Errorf("step of an unknown job: %v, want ErrNotFound", err)
	}
	if _, err := s.RecordEvent(ctx, jobstore.JobEvent{JobID: "st", Verb: "result"}); err == nil {
		t.Error("a result recorded as an event")
	}
}
