package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// JobGetter reads a job: a jobstore.Store.
type JobGetter interface {
	Get(ctx context.Context, jobID string) (jobstore.Job, error)
}

// ErrWaitTimeout: the job did not reach an end state within the timeout.
var ErrWaitTimeout = errors.New("job not finished within the timeout")

// Waiter waits for jobs to end (the long-poll GET /api/v1/jobs/{id}?wait=,
// edgecoord job wait) on the broker's events: a waiter costs the store one
// read of the job when it starts and one per event of its job, never a poll.
type Waiter struct {
	Broker *Broker
	Jobs   JobGetter
}

// Wait returns nil when the job is in an end state (jobstore.Finished),
// at once or within timeout; ErrWaitTimeout when the timeout passes first;
// an error wrapping jobstore.ErrNotFound for an unknown job.
func (w *Waiter) Wait(ctx context.Context, jobID string, timeout time.Duration) error {
	_, err := w.WaitJob(ctx, jobID, timeout)
	return err
}

// WaitJob is Wait that also returns the job as last read.
func (w *Waiter) WaitJob(ctx context.Context, jobID string, timeout time.Duration) (jobstore.Job, error) {
	if timeout < 0 {
		return jobstore.Job{}, fmt.Errorf("wait for job %s: timeout %s is negative", jobID, timeout)
	}
	// Subscribe before reading the job, so that an end between the two
	// comes as an event.
	sub, err := w.Broker.Subscribe(ctx, Filter{JobID: jobID})
	if err != nil {
		return jobstore.Job{}, fmt.Errorf("wait for job %s: %w", jobID, err)
	}
	defer func() { sub.Close() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		j, err := w.Jobs.Get(ctx, jobID)
		if err != nil {
			return jobstore.Job{}, err
		}
		if jobstore.Finished(j.Status) {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-timer.C:
			return j, ErrWaitTimeout
		case <-sub.Ready():
			if _, open := sub.Take(); !open {
				if !sub.Lagged() {
					return j, fmt.Errorf("wait for job %s: %w", jobID, ErrBrokerStopped)
				}
				if sub, err = w.Broker.Subscribe(ctx, Filter{JobID: jobID}); err != nil {
					return j, fmt.Errorf("wait for job %s: %w", jobID, err)
				}
			}
		}
	}
}
