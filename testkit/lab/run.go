package lab

import (
	"context"
	"fmt"
	"io"
)

// RunAll runs the default scenarios and prints what happened: one
// screenshot job end to end, then the stale-worker experiment unfenced and
// fenced side by side. It fails when the fenced case lets any stale write
// through.
func RunAll(ctx context.Context, opts Options, w io.Writer) error {
	e, err := Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "edgelab: NATS %s, SQLite store, in-process S3 %s, coordinator lease TTL %v\n\n", e.NATS.ClientURL(), e.S3.Endpoint, e.opts.LeaseTTL)
	err = ScreenshotJob(ctx, e, w)
	if cerr := e.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("screenshot job: %w", err)
	}
	// The experiment runs on a system of its own, with no agent whose
	// scheduler could take its jobs.
	if e, err = Start(ctx, opts); err != nil {
		return err
	}
	defer e.Close()
	const jobs = 20
	fmt.Fprintf(w, "== 2. the stale worker: %d jobs claimed by A (g1), reassigned to B (g2), B commits NEW-B, then A's late OLD-A arrives\n", jobs)
	unfenced, err := StaleWorker(ctx, e, jobs, false)
	if err != nil {
		return fmt.Errorf("stale worker, unfenced: %w", err)
	}
	fenced, err := StaleWorker(ctx, e, jobs, true)
	if err != nil {
		return fmt.Errorf("stale worker, fenced: %w", err)
	}
	PrintStaleTable(w, unfenced, fenced)
	fmt.Fprintln(w, "unfenced: A's late write goes through an UPDATE without the token (demonstration only, no protocol verb reaches it)")
	fmt.Fprintln(w, "fenced:   A's late write is a real `result` request over NATS; the coordinator's fenced UPDATE refuses it with 409")
	if err := fenced.Check(); err != nil {
		return err
	}
	if err := e.Close(); err != nil {
		return err
	}
	return nil
}
