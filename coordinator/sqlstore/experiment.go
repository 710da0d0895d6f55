package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// Results written in the stale-writer experiment.
const (
	ResultNew = "NEW-B" // the new owner's result
	ResultOld = "OLD-A" // the old owner's late result
)

// ExperimentResult is one row of the stale-writer experiment, counted from
// what the store holds afterwards.
type ExperimentResult struct {
	Fenced        bool
	Jobs          int
	StaleAccepted int // late writes of the old owner the store accepted (write_events)
	Overwritten   int // jobs whose stored result is the old owner's
	Survived      int // jobs whose stored result is the new owner's
	JobIDs        []string
}

func (r ExperimentResult) String() string {
	mode := "unfenced"
	if r.Fenced {
		mode = "fenced"
	}
	return fmt.Sprintf("%-8s stale writes accepted %d/%d, new results overwritten %d/%d, new results surviving %d/%d",
		mode, r.StaleAccepted, r.Jobs, r.Overwritten, r.Jobs, r.Survived, r.Jobs)
}

// StaleWriterExperiment reproduces the experiment of docs/design.md ("Why
// fencing") on jobs new jobs of s: each is claimed by A (generation 1),
// reassigned to B (generation 2) as after A's lease loss, B commits NEW-B,
// and then A's late OLD-A arrives: through Commit with A's token when fenced,
// through UnfencedCommit otherwise. The counts are read back from the store.
func StaleWriterExperiment(ctx context.Context, s Lab, jobs int, fenced bool) (ExperimentResult, error) {
	res := ExperimentResult{Fenced: fenced, Jobs: jobs}
	run := NewJobID()[:8]
	a := fencing.Owner("lab-a", run)
	b := fencing.Owner("lab-b", run)
	task := protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "screen.png"}}}
	newResult, _ := json.Marshal(map[string]string{"value": ResultNew, "by": b})
	oldResult, _ := json.Marshal(map[string]string{"value": ResultOld, "by": a})
	for i := range jobs {
		id := fmt.Sprintf("exp-%s-%d", run, i)
		if _, err := s.Submit(ctx, jobstore.JobSpec{ID: id, Task: task}); err != nil {
			return res, fmt.Errorf("run experiment: %w", err)
		}
		la, err := s.Claim(ctx, id, a, time.Minute)
		if err != nil {
			return res, fmt.Errorf("run experiment: %w", err)
		}
		lb, err := s.Reassign(ctx, id, b, time.Minute)
		if err != nil {
			return res, fmt.Errorf("run experiment: %w", err)
		}
		if err := s.Commit(ctx, lb.Token, newResult); err != nil {
			return res, fmt.Errorf("run experiment: %w", err)
		}
		if fenced {
			err = s.Commit(ctx, la.Token, oldResult)
			if err != nil && !errors.Is(err, fencing.ErrStale) {
				return res, fmt.Errorf("run experiment: %w", err)
			}
		} else if _, err := s.UnfencedCommit(ctx, id, a, oldResult); err != nil {
			return res, fmt.Errorf("run experiment: %w", err)
		}
		res.JobIDs = append(res.JobIDs, id)
	}
	for _, id := range res.JobIDs {
		j, err := s.Get(ctx, id)
		if err != nil {
			return res, fmt.Errorf("run experiment: %w", err)
		}
		var got struct{ Value string }
		if err := json.Unmarshal(j.Result, &got); err != nil {
			return res, fmt.Errorf("run experiment: result of %s: %w", id, err)
		}
		switch got.Value {
		case ResultOld:
			res.Overwritten++
		case ResultNew:
			res.Survived++
		}
		evs, err := s.WriteEvents(ctx, id)
		if err != nil {
			return res, fmt.Errorf("run experiment: %w", err)
		}
		for _, e := range evs {
			if e.Owner == a && e.Accepted && (e.Verb == jobstore.VerbResult || e.Verb == jobstore.VerbResultUnfenced) {
				res.StaleAccepted++
			}
		}
	}
	return res, nil
}
