package capture

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// recordingEnder is a Recording that tells when the phone ended it on its
// own (screenrecord at its --time-limit, or a process that died).
type recordingEnder interface {
	// Ended is closed once the recording has ended on the phone.
	Ended() <-chan struct{}
}

// recChain is one recording of a task, made of segments: when the phone
// ends a segment at its time limit (180 s), the next one is started at
// once, until record_stop, up to RunnerOptions.RecordSegments segments
// (docs/capture.md, Recordings longer than 180 s). Between two segments
// the screen goes unrecorded for the time screenrecord takes to start
// (gap).
type recChain struct {
	r      *Runner
	max    int
	ctx    context.Context // bounds starting segments: the job's context
	cancel context.CancelFunc
	done   chan struct{} // closed by halt
	wg     sync.WaitGroup

	mu         sync.Mutex
	segs       []Recording
	halted     bool
	full       bool  // the last segment ended and max segments were reached
	restartErr error // starting the next segment failed
	gap        time.Duration
}

var _ Recording = (*recChain)(nil)

func (r *Runner) newRecChain(first Recording) *recChain {
	ctx, cancel := context.WithCancel(r.job)
	c := &recChain{r: r, max: r.opts.RecordSegments, ctx: ctx, cancel: cancel, done: make(chan struct{}), segs: []Recording{first}}
	c.wg.Go(c.watch)
	return c
}

// watch starts the next segment each time the current one ends on the
// phone, until halt.
func (c *recChain) watch() {
	for {
		c.mu.Lock()
		cur := c.segs[len(c.segs)-1]
		c.mu.Unlock()
		e, ok := cur.(recordingEnder)
		if !ok {
			return
		}
		select {
		case <-e.Ended():
		case <-c.done:
			return
		}
		ended := time.Now()
		c.mu.Lock()
		if c.halted {
			c.mu.Unlock()
			return
		}
		if c.max > 0 && len(c.segs) >= c.max {
			c.full = true
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		next, err := c.r.dev.StartRecording(c.ctx)
		c.mu.Lock()
		if err != nil {
			halted := c.ctx.Err() != nil
			if !halted {
				c.restartErr = err
			}
			c.mu.Unlock()
			if !halted {
				zerolog.Ctx(c.r.job).Warn().Str("serial", c.r.dev.Serial()).Err(err).Msg("start the next segment of a recording")
			}
			return
		}
		// Kept even when record_stop came meanwhile: it holds the screen
		// since the last segment ended.
		c.segs = append(c.segs, next)
		c.gap += time.Since(ended)
		halted := c.halted
		c.mu.Unlock()
		if halted {
			return
		}
	}
}

// halt stops chaining and returns the segments, in order.
func (c *recChain) halt() []Recording {
	c.mu.Lock()
	if !c.halted {
		c.halted = true
		close(c.done)
	}
	c.mu.Unlock()
	// A segment being started is waited for (it is bounded by the phone's
	// capture timeout and the job's context), so none is left running.
	c.wg.Wait()
	c.cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Recording(nil), c.segs...)
}

// Stop is not used: the runner stops a chain with stopChain, one artifact
// per segment.
func (c *recChain) Stop(ctx context.Context, w io.Writer) (int64, error) {
	return 0, fmt.Errorf("stop recording: a chained recording is stopped segment by segment")
}

// Abort aborts every segment.
func (c *recChain) Abort() {
	for _, s := range c.halt() {
		s.Abort()
	}
}

// stopChain stops the recording and returns its segments as artifacts: one
// segment is stored as name, several as <name>-1.mp4, <name>-2.mp4, … in
// order. The step's warning says when the recording was chained and when
// the phone cut it at its time limit before record_stop.
func (r *Runner) stopChain(ctx context.Context, c *recChain, name string) ([]Artifact, error) {
	segs := c.halt()
	c.mu.Lock()
	full, restartErr, gap := c.full, c.restartErr, c.gap
	c.mu.Unlock()
	base := name[:len(name)-len(".mp4")]
	var arts []Artifact
	fail := func(err error, from int) ([]Artifact, error) {
		for _, s := range segs[from:] {
			s.Abort()
		}
		for _, a := range arts {
			_ = a.Remove()
			r.unreserve(a.Name)
		}
		return nil, err
	}
	for i, s := range segs {
		n := name
		if len(segs) > 1 {
			var err error
			if n, err = r.reserve(fmt.Sprintf("%s-%d", base, i+1), "", 0, ".mp4"); err != nil {
				return fail(err, i)
			}
		}
		a, err := r.stopInto(ctx, s, n)
		if err != nil {
			if n != name {
				r.unreserve(n)
			}
			if len(segs) > 1 {
				err = fmt.Errorf("segment %d of %d: %w", i+1, len(segs), err)
			}
			return fail(err, i+1)
		}
		arts = append(arts, a)
	}
	if len(segs) > 1 {
		r.unreserve(name) // the segments carry the names
	}
	limit, cut := time.Duration(0), false
	if lr, ok := segs[len(segs)-1].(LimitedRecording); ok {
		limit, cut = lr.CutAtLimit()
	}
	var warn []string
	if len(segs) > 1 {
		names := make([]string, len(arts))
		for i, a := range arts {
			names[i] = a.Name
		}
		warn = append(warn, fmt.Sprintf("recording chained at the phone's time limit of %gs into %d segments (%s); about %s of screen between segments is not recorded",
			limit.Seconds(), len(segs), strings.Join(names, ", "), gap.Round(time.Millisecond)))
	}
	if cut {
		why := ""
		switch {
		case restartErr != nil:
			why = fmt.Sprintf(" (starting the next segment failed: %v)", restartErr)
		case full && c.max > 1:
			why = fmt.Sprintf(" (the recording has the most segments allowed, %d)", c.max)
		}
		warn = append(warn, fmt.Sprintf("recording cut at the phone's time limit of %gs: it ended before record_stop%s, later screen content is missing", limit.Seconds(), why))
	}
	r.warning = strings.Join(warn, "; ")
	return arts, nil
}
