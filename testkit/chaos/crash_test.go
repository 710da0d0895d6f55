package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
	"github.com/edgeagent/edgeagent/uploader"
)

// crash is one crash test: a single agent (so the job can only be finished
// by its restarted process) and a single coordinator on PostgreSQL and
// MinIO, one job, and one kill -9 of the agent process at a chosen point,
// followed by a restart after downtime.
//
// The killed process is cut off from NATS and the storage at once, but its
// goroutines wind down out of sight and still reach the state directory:
// they model a process whose attempts to clean up after itself fail, as
// they do in a storage outage. The restart may come while they still run
// or after they ended.
type crash struct {
	t    *testing.T
	res  *Result
	h    *History
	job  jobstore.Job
	dead string        // the killed process
	tok  fencing.Token // the token it held
}

func runCrash(t *testing.T, seed int64, task protocol.Task, trigger, mode string, downtime time.Duration, opts Options) *crash {
	t.Helper()
	m := testenv.MinIO(t)
	opts.Store, opts.PostgresDSN = StorePostgres, testenv.Postgres(t)
	opts.S3 = &S3Target{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey}
	defer goleak.VerifyNone(t, leakOptions()...)
	plan := Plan{
		Seed:   seed,
		Shape:  Shape{Agents: 1, PhonesPerAgent: 1, Coordinators: 1, LeaseTTL: 2 * time.Second, MinJobs: 1, MaxJobs: 1, MinFaults: 1, MaxFaults: 1},
		Jobs:   []JobPlan{{ID: "crash-" + strings.ReplaceAll(t.Name(), "/", "-"), Task: task}},
		Faults: []Fault{{Kind: KindAgentKill, Trigger: trigger, Mode: mode, Duration: downtime}},
	}
	res := RunPlan(context.Background(), opts, plan)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	c := &crash{t: t, res: res, h: res.History}
	if !res.Report.OK() {
		var b strings.Builder
		c.h.Format(&b, res.Report)
		t.Fatalf("the crash broke the rules: %v\n%s", res.Report.Violations, b.String())
	}
	f := c.h.Faults[0]
	if f.Applied.IsZero() {
		t.Fatalf("the kill never happened: %s", f.Skipped)
	}
	c.dead, _, _ = strings.Cut(f.Detail, " ")
	c.job = c.h.Final.Jobs[plan.Jobs[0].ID]
	for _, op := range c.h.Ops {
		if op.Method == opClaim && op.Outcome == outOK && op.Lease.Owner == c.dead {
			c.tok = op.Lease
		}
	}
	if c.tok.JobID == "" {
		t.Fatalf("the killed process %s never held the job", c.dead)
	}
	t.Logf("killed %s holding %s: %s", c.dead, c.tok, f.Detail)
	return c
}

// acceptedResults counts the results the store accepted for the job.
func (c *crash) acceptedResults() []jobstore.WriteEvent {
	var out []jobstore.WriteEvent
	for _, e := range c.h.Final.Events[c.job.ID] {
		if e.Accepted && (e.Verb == jobstore.VerbResult || e.Verb == jobstore.VerbResultUnfenced) {
			out = append(out, e)
		}
	}
	return out
}

// finishedByNewGeneration checks that the job was reclaimed and finished by
// the restarted process under a later generation, accepted once.
func (c *crash) finishedByNewGeneration() {
	t := c.t
	if c.job.Status != jobstore.StatusSucceeded {
		t.Fatalf("job %s ended %s, want SUCCEEDED", c.job.ID, c.job.Status)
	}
	if c.job.CompletedBy == c.dead || c.job.Generation <= c.tok.Generation {
		t.Errorf("job finished by %s at generation %d; want the restarted process at a generation above %d", c.job.CompletedBy, c.job.Generation, c.tok.Generation)
	}
	if agentOf(c.job.CompletedBy) != agentOf(c.dead) {
		t.Errorf("job finished by %s, want the restarted process of %s", c.job.CompletedBy, agentOf(c.dead))
	}
	if acc := c.acceptedResults(); len(acc) != 1 {
		t.Errorf("%d results accepted, want exactly 1: %+v", len(acc), acc)
	}
	var reclaimed bool
	for _, e := range c.h.Final.Events[c.job.ID] {
		if e.Accepted && e.Verb == jobstore.VerbReclaim && e.Owner == c.dead && e.Generation == c.tok.Generation {
			reclaimed = true
		}
	}
	if !reclaimed {
		t.Errorf("the killed process's lease %s was never reclaimed", c.tok)
	}
}

func (c *crash) noOrphans() {
	if len(c.h.Final.Incomplete) > 0 {
		c.t.Errorf("multipart uploads left open after the restart: %v", c.h.Final.Incomplete)
	}
}

// TestCrashMidUpload kills the agent while it sends a part of a multipart
// upload (a 12 MiB screen recording in 5 MiB parts): the upload is left
// open in storage, the job's lease with the dead process. The restarted
// process aborts the upload its predecessor left (the spool's recovery),
// the coordinator reclaims the lease on its hello, and the job is finished
// under a new generation. The restart comes quickly (while the dead
// process's goroutines still try to abort the upload, in vain) or late
// (after they gave up; a restart slowed by a busy machine is the same):
// either way the spool record naming the upload must still be there.
func TestCrashMidUpload(t *testing.T) {
	for _, tc := range []struct {
		name     string
		downtime time.Duration
	}{
		{"quick restart", 300 * time.Millisecond},
		{"late restart", 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) { crashMidUpload(t, tc.downtime) })
	}
}

func crashMidUpload(t *testing.T, downtime time.Duration) {
	task := protocol.Task{Steps: []protocol.Step{
		{Op: protocol.OpRecordStart, Name: "screen"},
		{Op: protocol.OpWait, DurationMS: 20},
		{Op: protocol.OpRecordStop},
	}}
	c := runCrash(t, 9101, task, "part", "before", downtime, Options{RecordingSize: 12 << 20, PartSize: uploader.MinPartSize})
	var initiated, partsCut bool
	for _, s := range c.h.S3 {
		if s.Link != c.dead || s.Token.Generation != c.tok.Generation {
			continue
		}
		initiated = initiated || (s.Kind == s3Initiate && s.Status == 200)
		partsCut = partsCut || (s.Kind == s3Part && s.Status != 200)
	}
	if !initiated || !partsCut {
		t.Errorf("the kill did not land mid-upload (multipart started %v, a part cut %v)", initiated, partsCut)
	}
	c.finishedByNewGeneration()
	c.noOrphans()
	var recovered bool
	for _, n := range c.h.Notes {
		recovered = recovered || strings.Contains(n.What, "uploads of previous boots")
	}
	if !recovered {
		t.Error("the restarted process did not drop its predecessor's upload")
	}
	for _, o := range c.h.Final.Objects {
		if o.Token.Generation == c.tok.Generation {
			t.Errorf("object %s of the killed generation was completed", o.Key)
		}
	}
}

// TestCrashMidCommit kills the agent around its result: before the result
// leaves (the job is reclaimed and finished by a new generation), and after
// it left but before the answer came back (the result was accepted, the
// restarted process does not run the job again). Either way exactly one
// result is accepted.
func TestCrashMidCommit(t *testing.T) {
	task := protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "home"}, {Op: protocol.OpUIDump, Name: "home"}}}
	t.Run("before the result leaves", func(t *testing.T) {
		c := runCrash(t, 9102, task, "result", "before", 300*time.Millisecond, Options{})
		for _, op := range c.h.Ops {
			if op.Method == opCommit && op.Token == c.tok {
				t.Errorf("the killed process's result reached the store: %+v", op)
			}
		}
		c.finishedByNewGeneration()
		c.noOrphans()
	})
	t.Run("after the result left", func(t *testing.T) {
		c := runCrash(t, 9103, task, "result", "after", 300*time.Millisecond, Options{})
		if c.job.Status != jobstore.StatusSucceeded || c.job.CompletedBy != c.dead || c.job.Generation != c.tok.Generation {
			t.Fatalf("job ended %s g%d completed by %q; want SUCCEEDED by the killed process %s at g%d",
				c.job.Status, c.job.Generation, c.job.CompletedBy, c.dead, c.tok.Generation)
		}
		if acc := c.acceptedResults(); len(acc) != 1 {
			t.Errorf("%d results accepted, want exactly 1: %+v", len(acc), acc)
		}
		for _, f := range c.h.Frames {
			if f.Link == c.dead && f.Dir == ToClient && f.Accepted && !f.Sent.IsZero() {
				t.Error("the killed process got the answer to its result: the kill came too late")
			}
		}
		for _, op := range c.h.Ops {
			if op.JobID == c.job.ID && op.Outcome == outOK && (op.Method == opClaim || op.Method == opTakeover) && op.Lease.Owner != c.dead {
				t.Errorf("the job was granted again after its result was accepted: %+v", op)
			}
		}
		c.noOrphans()
	})
}
