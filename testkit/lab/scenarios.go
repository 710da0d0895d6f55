package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
)

// ScreenshotJob runs one screenshot job end to end through the coordinator,
// an agent and its simulated phone, and prints the artifacts with their
// stamps. It returns an error when the job does not succeed or an artifact
// lacks its stamps.
func ScreenshotJob(ctx context.Context, e *Env, w io.Writer) error {
	if _, err := e.StartAgent("lab-pc1", capture.NewSimulated(capture.SimOptions{Serial: "sim-pixel-1", Model: "Pixel 8"})); err != nil {
		return err
	}
	job, err := e.Store.Submit(ctx, jobstore.JobSpec{Task: protocol.Task{
		Device: protocol.DeviceSelector{Model: "Pixel 8"},
		Steps: []protocol.Step{
			{Op: protocol.OpLaunch, Package: "com.android.settings"},
			{Op: protocol.OpTap, X: 360, Y: 640},
			{Op: protocol.OpScreenshot, Name: "settings.png"},
			{Op: protocol.OpUIDump, Name: "settings.xml"},
		},
	}})
	if err != nil {
		return fmt.Errorf("submit job: %w", err)
	}
	fmt.Fprintf(w, "== 1. one screenshot job end to end\n")
	fmt.Fprintf(w, "submitted job %s: launch, tap, screenshot, ui_dump on a phone with model \"Pixel 8\"\n", job.ID)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	j, err := e.WaitJob(wctx, job.ID, func(j jobstore.Job) bool {
		return jobstore.Finished(j.Status)
	})
	if err != nil {
		return err
	}
	if j.Status != jobstore.StatusSucceeded {
		return fmt.Errorf("job %s %s: %s", j.ID, j.Status, j.FailReason)
	}
	fmt.Fprintf(w, "job %s %s in %v, generation %d, completed by %s\n", j.ID, j.Status, time.Since(start).Round(time.Millisecond), j.Generation, j.CompletedBy)
	objs, err := e.Up.List(ctx, "jobs/"+j.ID+"/")
	if err != nil {
		return fmt.Errorf("list artifacts: %w", err)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "key\tsize\tcontent type\tx-amz-meta-job-id\tx-amz-meta-owner\tx-amz-meta-generation")
	want := fencing.Token{JobID: j.ID, Owner: j.CompletedBy, Generation: j.Generation}
	for _, o := range objs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", o.Key, o.Size, o.ContentType, o.Metadata[fencing.MetaJobID], o.Metadata[fencing.MetaOwner], o.Metadata[fencing.MetaGeneration])
		if o.Token != want {
			tw.Flush()
			return fmt.Errorf("object %s carries stamps %v, want %v", o.Key, o.Token, want)
		}
	}
	tw.Flush()
	arts, err := e.Store.Artifacts(ctx, j.ID, j.Generation)
	if err != nil {
		return err
	}
	// The screenshot, the UI dump, manifest.json and oplog.jsonl.
	if len(arts) != len(objs) || len(objs) != 4 {
		return fmt.Errorf("job %s: %d objects stored, %d registered, want 4 each", j.ID, len(objs), len(arts))
	}
	fmt.Fprintf(w, "%d artifacts stored and registered under generation %d\n\n", len(arts), j.Generation)
	return nil
}

// StaleRow is one case of the stale-worker experiment, counted from the
// store after the run.
type StaleRow struct {
	Case         string
	Jobs         int
	BAccepted    int // NEW-B results accepted
	AAccepted    int // late OLD-A writes accepted
	ARejected    int // late OLD-A writes refused
	FinalNew     int // jobs whose stored result is NEW-B
	FinalOld     int // jobs whose stored result is OLD-A
	Overwritten  int // jobs where an accepted OLD-A came after NEW-B
	DupAccepted  int // jobs with more than one accepted result write
	Took         time.Duration
	RejectCodes  map[int]int // protocol error codes A received
	AcceptedByID map[string]int
}

// StaleWorker reproduces the stale-writer experiment of docs/design.md
// (section 2): jobs claimed by agent A (generation 1) are reassigned to
// agent B (generation 2); B commits NEW-B through the coordinator; then A's
// late OLD-A results arrive. In the unfenced case they go through a
// demonstration-only UPDATE without the token, which no protocol verb can
// reach; in the fenced case through the real path: A's `result` request over
// NATS, answered by the coordinator's fenced UPDATE. Every figure is read
// back from the store.
func StaleWorker(ctx context.Context, e *Env, jobs int, fenced bool) (StaleRow, error) {
	row := StaleRow{Case: "unfenced", Jobs: jobs, RejectCodes: map[int]int{}}
	if fenced {
		row.Case = "fenced"
	}
	run := sqlstore.NewJobID()[:8]
	ownerA := fencing.Owner("lab-stale-a", run)
	ownerB := fencing.Owner("lab-stale-b", run)
	ncA, err := e.Conn("stale worker A", "lab-stale-a")
	if err != nil {
		return row, err
	}
	ncB, err := e.Conn("new worker B", "lab-stale-b")
	if err != nil {
		return row, err
	}
	newRes, _ := json.Marshal(map[string]string{"value": sqlstore.ResultNew})
	oldRes, _ := json.Marshal(map[string]string{"value": sqlstore.ResultOld})
	task := protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot}}}
	var ids []string
	start := time.Now()
	for i := range jobs {
		id := fmt.Sprintf("stale-%s-%s-%02d", row.Case, run, i)
		if _, err := e.Store.Submit(ctx, jobstore.JobSpec{ID: id, Task: task}); err != nil {
			return row, err
		}
		la, err := e.Store.Claim(ctx, id, ownerA, time.Minute)
		if err != nil {
			return row, err
		}
		// A's lease is lost (a stall, a sleep); the job goes to B.
		lb, err := e.Store.Reassign(ctx, id, ownerB, time.Minute)
		if err != nil {
			return row, err
		}
		if err := sendResult(ctx, ncB, "lab-stale-b", lb.Token, newRes); err != nil {
			return row, fmt.Errorf("commit NEW-B for %s: %w", id, err)
		}
		// A wakes up and delivers its late result.
		if fenced {
			err := sendResult(ctx, ncA, "lab-stale-a", la.Token, oldRes)
			var pe *protocol.Error
			switch {
			case errors.As(err, &pe):
				row.RejectCodes[pe.Code]++
			case err != nil:
				return row, fmt.Errorf("commit OLD-A for %s: %w", id, err)
			}
		} else if _, err := e.Store.UnfencedCommit(ctx, id, ownerA, oldRes); err != nil {
			return row, fmt.Errorf("unfenced OLD-A for %s: %w", id, err)
		}
		ids = append(ids, id)
	}
	row.Took = time.Since(start)
	for _, id := range ids {
		j, err := e.Store.Get(ctx, id)
		if err != nil {
			return row, err
		}
		var got struct{ Value string }
		_ = json.Unmarshal(j.Result, &got)
		switch got.Value {
		case sqlstore.ResultNew:
			row.FinalNew++
		case sqlstore.ResultOld:
			row.FinalOld++
		}
		evs, err := e.Store.WriteEvents(ctx, id)
		if err != nil {
			return row, err
		}
		accepted := 0
		sawNew := false
		for _, ev := range evs {
			if ev.Verb != jobstore.VerbResult && ev.Verb != jobstore.VerbResultUnfenced {
				continue
			}
			switch {
			case ev.Owner == ownerB && ev.Accepted:
				row.BAccepted++
				accepted++
				sawNew = true
			case ev.Owner == ownerA && ev.Accepted:
				row.AAccepted++
				accepted++
				if sawNew {
					row.Overwritten++
				}
			case ev.Owner == ownerA:
				row.ARejected++
			}
		}
		if accepted > 1 {
			row.DupAccepted++
		}
	}
	return row, nil
}

func sendResult(ctx context.Context, nc *nats.Conn, agentID string, tok fencing.Token, res json.RawMessage) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// A request that finds no coordinator subscribed yet (nats: no
	// responders) is sent again, as an agent does, until the deadline.
	for {
		err := natsrpc.Request(rctx, nc, protocol.CoordSubject(agentID, protocol.VerbResult), protocol.Result{Token: tok, Result: res}, &protocol.ResultReply{})
		if !errors.Is(err, nats.ErrNoResponders) || rctx.Err() != nil {
			return err
		}
		select {
		case <-rctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// PrintStaleTable prints the experiment's cases side by side.
func PrintStaleTable(w io.Writer, rows ...StaleRow) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tB accepted\tA accepted\tA rejected\tfinal NEW-B\tfinal OLD-A\toverwritten\tduplicate accepted writes\ttime\t")
	for _, r := range rows {
		n := r.Jobs
		fmt.Fprintf(tw, "%s\t%d/%d\t%d/%d\t%d/%d\t%d/%d\t%d/%d\t%d/%d\t%d/%d\t%v\t\n", r.Case,
			r.BAccepted, n, r.AAccepted, n, r.ARejected, n, r.FinalNew, n, r.FinalOld, n, r.Overwritten, n, r.DupAccepted, n,
			r.Took.Round(100*time.Microsecond))
	}
	tw.Flush()
}

// Check reports what is wrong with a fenced row: the fenced case must
// accept no stale write and keep every new result.
func (r StaleRow) Check() error {
	var p []string
	if r.AAccepted != 0 {
		p = append(p, fmt.Sprintf("%d stale writes accepted", r.AAccepted))
	}
	if r.ARejected != r.Jobs {
		p = append(p, fmt.Sprintf("%d of %d stale writes rejected", r.ARejected, r.Jobs))
	}
	if r.FinalNew != r.Jobs {
		p = append(p, fmt.Sprintf("%d of %d new results survived", r.FinalNew, r.Jobs))
	}
	if r.RejectCodes[protocol.CodeStale] != r.Jobs {
		p = append(p, fmt.Sprintf("stale worker got codes %v, want %d×409", r.RejectCodes, r.Jobs))
	}
	if len(p) > 0 {
		return fmt.Errorf("fenced case: %s", strings.Join(p, "; "))
	}
	return nil
}
