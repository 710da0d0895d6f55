package capture

import (
	"context"
	"fmt"

	"github.com/edgeagent/edgeagent/protocol"
)

// SetBeforeAfter turns the screenshots around input steps on or off for
// the steps run from now on (RunnerOptions.BeforeAfter).
func (r *Runner) SetBeforeAfter(on bool) {
	r.mu.Lock()
	r.opts.BeforeAfter = on
	r.mu.Unlock()
}

// execStep runs s, with a screenshot before and after it when the runner
// takes them and s is an input step (protocol.BeforeAfterOps) of the task,
// not an evidence capture. The screenshots are the step's artifacts,
// named by protocol.BeforeAfterNames: they go into its op log line. A
// step that fails keeps neither: its error is what the job reports.
//
// A step protocol.Step.Validate refuses runs nothing, not even the
// screenshot before it, and fails with ErrInvalidStep and the message the
// coordinator gives at submit (the field, then what is wrong with it).
func (r *Runner) execStep(ctx context.Context, seq int, s protocol.Step, info StepInfo) ([]Artifact, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidStep, err)
	}
	r.mu.Lock()
	on := r.opts.BeforeAfter
	r.mu.Unlock()
	if !on || info.Evidence || !protocol.IsBeforeAfterOp(s.Op) {
		return r.exec(ctx, seq, s)
	}
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	beforeName, afterName := protocol.BeforeAfterNames(seq)
	shot := func(name string) ([]Artifact, error) {
		return r.capture(name, "", seq, ".png", ContentTypePNG, func() ([]byte, error) { return r.dev.Screenshot(ctx) })
	}
	drop := func(arts []Artifact) {
		for _, a := range arts {
			_ = a.Remove()
			r.unreserve(a.Name)
		}
	}
	before, err := shot(beforeName)
	if err != nil {
		return nil, fmt.Errorf("screenshot before the step (capture before_after): %w", err)
	}
	if _, err := r.exec(ctx, seq, s); err != nil {
		drop(before)
		return nil, err
	}
	after, err := shot(afterName)
	if err != nil {
		drop(before)
		return nil, fmt.Errorf("screenshot after the step (capture before_after): %w", err)
	}
	return append(before, after...), nil
}
