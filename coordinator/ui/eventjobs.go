package ui

import (
	"context"
	"sync"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// eventJobsKept is how many events' jobs eventJobs keeps: more than the
// broker hands out in one poll, so that every stream of the dashboard
// finds the events it is handed.
const eventJobsKept = 2048

// eventJobs shares the read of an event's job among the dashboard's live
// streams (/ui/events): the job is read once per event, by the first
// stream that sends it, whatever the number of streams (docs/ui.md,
// "Live updates").
type eventJobs struct {
	mu    sync.Mutex
	m     map[int64]*eventJob
	order []int64 // event ids, oldest first
}

type eventJob struct {
	done chan struct{}
	job  jobstore.Job
	err  error
}

// get returns the job of event id, read by read the first time.
func (c *eventJobs) get(ctx context.Context, id int64, read func(context.Context) (jobstore.Job, error)) (jobstore.Job, error) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[int64]*eventJob{}
	}
	e, ok := c.m[id]
	if !ok {
		e = &eventJob{done: make(chan struct{})}
		c.m[id] = e
		c.order = append(c.order, id)
		if len(c.order) > eventJobsKept {
			delete(c.m, c.order[0])
			c.order = c.order[1:]
		}
	}
	c.mu.Unlock()
	if !ok {
		e.job, e.err = read(ctx)
		if e.err != nil {
			c.mu.Lock()
			if c.m[id] == e {
				delete(c.m, id) // the next stream reads again
			}
			c.mu.Unlock()
		}
		close(e.done)
		return e.job, e.err
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return jobstore.Job{}, ctx.Err()
	}
	if e.err != nil {
		return read(ctx) // the first reader failed (its client may have gone)
	}
	return e.job, nil
}
