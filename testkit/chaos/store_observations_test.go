package chaos

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestWrappersCommitObserved: the harness's store wrappers pass a result
// with observations through (rather than hide the store's, which would
// make the coordinator refuse such results), recording it as a commit of
// its token with its outcome, and a store fault fails it as it fails a
// commit.
func TestWrappersCommitObserved(t *testing.T) {
	raw, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rec := NewRecorder(1, Plan{}, time.Now())
	faults := &storeFaults{}
	var st jobstore.Store = &recordingStore{Store: &faultyStore{Store: raw, f: faults}, client: "c1", rec: rec}
	obsStore, ok := st.(jobstore.ObservationStore)
	if !ok {
		t.Fatal("the wrapped store is no jobstore.ObservationStore")
	}
	ctx := t.Context()
	if _, err := raw.Submit(ctx, jobstore.JobSpec{ID: "j", Task: protocol.Task{Steps: []protocol.Step{{Op: protocol.OpWait}}}}); err != nil {
		t.Fatal(err)
	}
	old, err := raw.Claim(ctx, "j", "a/1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := raw.Reassign(ctx, "j", "b/1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	obs := []protocol.Observation{{Step: 1, Name: "price", Raw: "1", Value: "1", Parse: protocol.ParseNumber}}
	commit := func(tok fencing.Token) error {
		_, err := obsStore.CommitObserved(ctx, tok, jobstore.ObservedResult{Result: json.RawMessage(`{}`), Observations: obs})
		return err
	}
	faults.setDown(true)
	if err := commit(cur.Token); !errors.Is(err, errStoreDown) {
		t.Fatalf("commit while the store is down: %v", err)
	}
	faults.setDown(false)
	if err := commit(old.Token); !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("old token: %v", err)
	}
	if err := commit(cur.Token); err != nil {
		t.Fatalf("current token: %v", err)
	}
	var got []string
	for _, op := range rec.h.Ops {
		got = append(got, op.Method+" "+op.Token.String()+" "+op.Outcome)
	}
	want := []string{
		opCommit + " " + cur.Token.String() + " " + outUnknown,
		opCommit + " " + old.Token.String() + " " + outStale,
		opCommit + " " + cur.Token.String() + " " + outOK,
	}
	if len(got) != len(want) {
		t.Fatalf("recorded %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("recorded %q, want %q", got, want)
		}
	}
	rows, err := obsStore.ListObservations(ctx, jobstore.ObservationFilter{Project: jobstore.DefaultProject, Limit: 10, All: true})
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows %+v, %v", rows, err)
	}
}

// TestWrappersRecordObservations: the harness's store wrappers pass a
// session's recorded observations through, unrecorded as operations (they
// change nothing of the job's fencing state; their observe write events
// are replayed by Check), and a store fault fails them as it fails a
// commit.
func TestWrappersRecordObservations(t *testing.T) {
	raw, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rec := NewRecorder(1, Plan{}, time.Now())
	faults := &storeFaults{}
	var st jobstore.Store = &recordingStore{Store: &faultyStore{Store: raw, f: faults}, client: "c1", rec: rec}
	obsStore := st.(jobstore.ObservationStore)
	ctx := t.Context()
	if _, err := raw.Submit(ctx, jobstore.JobSpec{ID: "j", Task: protocol.Task{Steps: []protocol.Step{{Op: protocol.OpWait}}}}); err != nil {
		t.Fatal(err)
	}
	old, err := raw.Claim(ctx, "j", "a/1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := raw.Reassign(ctx, "j", "b/1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	obs := []protocol.Observation{{Step: 1, Name: "price", Raw: "1", Value: "1", Parse: protocol.ParseNumber}}
	faults.setDown(true)
	if err := obsStore.RecordObservations(ctx, cur.Token, obs); !errors.Is(err, errStoreDown) {
		t.Fatalf("record while the store is down: %v", err)
	}
	faults.setDown(false)
	if err := obsStore.RecordObservations(ctx, old.Token, obs); !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("old token: %v", err)
	}
	if err := obsStore.RecordObservations(ctx, cur.Token, obs); err != nil {
		t.Fatalf("current token: %v", err)
	}
	if len(rec.h.Ops) != 0 {
		t.Fatalf("recorded operations %+v, want none", rec.h.Ops)
	}
	rows, err := obsStore.ListObservations(ctx, jobstore.ObservationFilter{Project: jobstore.DefaultProject, Limit: 10, All: true})
	if err != nil || len(rows) != 2 || rows[0].Accepted || !rows[1].Accepted {
		t.Fatalf("rows %+v, %v; want the refused one and the accepted one", rows, err)
	}
}
