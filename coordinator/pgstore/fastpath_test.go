package pgstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestGroupedCommitRefusedBatch sends results together of which one the
// database refuses (a \u0000 escape is valid JSON but not jsonb): the
// batch's transaction is rolled back, every result goes again on its own,
// and all but that one are accepted and recorded once.
func TestGroupedCommitRefusedBatch(t *testing.T) {
	ctx := t.Context()
	s := open(t, withPool(testenv.Postgres(t), 4))
	const n = 40
	toks := make([]fencing.Token, n)
	for i := range n {
		id := fmt.Sprintf("g-%02d", i)
		if _, err := s.Submit(ctx, jobstore.JobSpec{ID: id, Task: task}); err != nil {
			t.Fatal(err)
		}
		l, err := s.Claim(ctx, id, "pc-1/boot", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		toks[i] = l.Token
	}
	bad := 7
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			res := json.RawMessage(`{"ok": true}`)
			if i == bad {
				res = json.RawMessage(`{"text": "\u0000"}`)
			}
			_, errs[i] = s.CommitManifest(ctx, toks[i], res)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		switch {
		case i == bad && err == nil:
			t.Errorf("the result the database refuses was accepted")
		case i == bad && errors.Is(err, fencing.ErrStale):
			t.Errorf("the refused result was answered as stale: %v", err)
		case i != bad && err != nil:
			t.Errorf("result %d: %v", i, err)
		}
	}
	for i, tk := range toks {
		j, err := s.Get(ctx, tk.JobID)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := s.WriteEvents(ctx, tk.JobID)
		if err != nil {
			t.Fatal(err)
		}
		results := 0
		for _, e := range evs {
			if e.Verb == "result" {
				results++
			}
		}
		switch {
		case i == bad && (j.Status != jobstore.StatusInProgress || results != 0):
			t.Errorf("refused job %s: %s, %d result events", tk.JobID, j.Status, results)
		case i != bad && (j.Status != jobstore.StatusSucceeded || results != 1):
			t.Errorf("job %s: %s, %d result events", tk.JobID, j.Status, results)
		}
	}
}
