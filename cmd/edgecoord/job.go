package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/protocol"
)

// jobCommands are "job submit|list|show|cancel".
func (m *mgmt) jobCommands() []*cli.Command {
	return []*cli.Command{m.jobSubmitCommand(), m.jobListCommand(), m.jobShowCommand(), m.jobCancelCommand()}
}

// parseJobFile decodes a job file strictly (unknown keys are errors, with
// their line and column). Its keys are those of POST /api/v1/jobs
// (api.JobRequest): id, device, steps, interactive, idle_timeout_ms,
// capture, logcat, timeout, project, priority, not_before, max_attempts, fan_out.
func parseJobFile(data []byte) (api.JobRequest, error) {
	var f api.JobRequest
	if err := api.ParseJobFile(data, &f); err != nil {
		return api.JobRequest{}, err
	}
	return f, nil
}

// jobSubmitCommand queues a job from a YAML (or JSON) file.
func (m *mgmt) jobSubmitCommand() *cli.Command {
	var file, id string
	return &cli.Command{
		Name:    "job submit",
		Summary: "queue a job described in a YAML or JSON file",
		JSON:    true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			fs.StringVar(&file, "f", "", "the job `file` (- for standard input): id (optional), device {serial, model, tags}, steps")
			fs.StringVar(&id, "id", "", "job `id`, overriding the file's (default: the file's, else random)")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			if file == "" {
				return c.Usagef("-f is required")
			}
			data, err := readFile(file)
			if err != nil {
				return fmt.Errorf("read job file: %w", err)
			}
			req, err := parseJobFile(data)
			if err != nil {
				fmt.Fprintf(c.Stderr, "%s: invalid job: %v\n", file, err)
				return cli.Exit(cli.ExitUsage)
			}
			if err := req.Check(); err != nil {
				fmt.Fprintf(c.Stderr, "%s: invalid job: %v\n", file, err)
				return cli.Exit(cli.ExitUsage)
			}
			if id != "" {
				req.ID = id
				if err := req.Check(); err != nil {
					fmt.Fprintf(c.Stderr, "-id: invalid job: %v\n", err)
					return cli.Exit(cli.ExitUsage)
				}
			}
			store, err := m.open(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			batch, err := api.Submit(ctx, store, req, api.SubmitOptions{SubmittedBy: "cli", Jobs: m.cfg.Jobs, OfflineAfter: m.cfg.Agents.OfflineAfter.Duration(),
				Phones: coordinator.NewPhoneRule(m.cfg.ProjectPhones())})
			var se *api.SubmitError
			if errors.As(err, &se) {
				fmt.Fprintf(c.Stderr, "%s: invalid job: %v\n", file, err)
				return cli.Exit(cli.ExitUsage)
			}
			if err != nil {
				return err
			}
			if batch.ID != "" {
				return printBatch(c, batch)
			}
			j := batch.Jobs[0]
			if c.JSON {
				return c.PrintJSON(newJobView(j, ""))
			}
			_, err = fmt.Fprintf(c.Stdout, "job %s queued (%s)\n", j.ID, coordinator.DescribeSelector(j.Task.Device))
			return err
		},
	}
}

// printBatch prints the jobs of a fan-out.
func printBatch(c *cli.Call, b api.Batch) error {
	if c.JSON {
		views := make([]jobView, 0, len(b.Jobs))
		for _, j := range b.Jobs {
			views = append(views, newJobView(j, ""))
		}
		return c.PrintJSON(struct {
			Batch string    `json:"batch"`
			Jobs  []jobView `json:"jobs"`
		}{b.ID, views})
	}
	for _, j := range b.Jobs {
		if _, err := fmt.Fprintf(c.Stdout, "job %s queued (%s)\n", j.ID, coordinator.DescribeSelector(j.Task.Device)); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(c.Stdout, "batch %s: %d jobs, one per phone\n", b.ID, len(b.Jobs))
	return err
}

// jobView is a job as printed with --json.
type jobView struct {
	ID             string                  `json:"id"`
	Status         string                  `json:"status"`
	Generation     int64                   `json:"generation"`
	Owner          string                  `json:"owner,omitempty"`
	Device         string                  `json:"device,omitempty"`
	Selector       protocol.DeviceSelector `json:"selector"`
	Waiting        string                  `json:"waiting,omitempty"`
	LeaseExpiresAt *time.Time              `json:"lease_expires_at,omitempty"`
	CompletedBy    string                  `json:"completed_by,omitempty"`
	FailReason     string                  `json:"fail_reason,omitempty"`
	Result         json.RawMessage         `json:"result,omitempty"`
	CreatedAt      time.Time               `json:"created_at"`
	UpdatedAt      time.Time               `json:"updated_at"`
	Project        string                  `json:"project"`
	Priority       int                     `json:"priority"`
	Attempts       int                     `json:"attempts"`
	MaxAttempts    int                     `json:"max_attempts"`
	DeadlineAt     *time.Time              `json:"deadline_at,omitempty"`
	NotBefore      *time.Time              `json:"not_before,omitempty"`
	// AttemptEnds is why each attempt that ended without a result ended.
	AttemptEnds []jobstore.AttemptEnd `json:"attempt_ends"`
	// ScheduleID and ScheduledAt name the schedule and slot that fired the
	// job (docs/schedules.md).
	ScheduleID  string     `json:"schedule_id,omitempty"`
	ScheduledAt *time.Time `json:"scheduled_at,omitempty"`
}

func newJobView(j jobstore.Job, waiting string) jobView {
	v := jobView{
		ID: j.ID, Status: j.Status, Generation: j.Generation, Owner: j.WorkerID, Device: j.Device,
		Selector: j.Task.Device, Waiting: waiting, CompletedBy: j.CompletedBy, FailReason: j.FailReason,
		Result: j.Result, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt,
		Project: j.Project, Priority: j.Priority, Attempts: j.Attempts, MaxAttempts: j.MaxAttempts,
		AttemptEnds: j.AttemptEnds, ScheduleID: j.ScheduleID,
	}
	if !j.ScheduledAt.IsZero() {
		t := j.ScheduledAt
		v.ScheduledAt = &t
	}
	if v.AttemptEnds == nil {
		v.AttemptEnds = []jobstore.AttemptEnd{}
	}
	if !j.LeaseExpiresAt.IsZero() {
		t := j.LeaseExpiresAt
		v.LeaseExpiresAt = &t
	}
	if !j.DeadlineAt.IsZero() {
		t := j.DeadlineAt
		v.DeadlineAt = &t
	}
	if !j.NotBefore.IsZero() {
		t := j.NotBefore
		v.NotBefore = &t
	}
	return v
}

// statusNames lists the job states as the --status flag takes them.
func statusNames() string {
	names := make([]string, len(jobstore.Statuses))
	for i, st := range jobstore.Statuses {
		names[i] = strings.ToLower(st)
	}
	return strings.Join(names, ", ")
}

// waitReasons explains every queued job of jobs.
func (m *mgmt) waitReasons(ctx context.Context, store jobstore.Store, jobs []jobstore.Job) (map[string]string, error) {
	out := map[string]string{}
	var queued []jobstore.Job
	for _, j := range jobs {
		if j.Status == jobstore.StatusQueued {
			queued = append(queued, j)
		}
	}
	if len(queued) == 0 {
		return out, nil
	}
	agents, err := store.Agents(ctx)
	if err != nil {
		return nil, err
	}
	running, err := store.ListJobs(ctx, jobstore.JobFilter{Statuses: []string{jobstore.StatusInProgress}})
	if err != nil {
		return nil, err
	}
	for _, j := range queued {
		out[j.ID] = coordinator.WaitReasonFor(j.Task, agents, running, m.cfg.Agents.OfflineAfter.Duration())
	}
	return out, nil
}

// jobListCommand lists jobs.
func (m *mgmt) jobListCommand() *cli.Command {
	var (
		status, agent, project string
		limit                  int
	)
	return &cli.Command{
		Name:    "job list",
		Summary: "list jobs, oldest first, with what each queued job waits for",
		JSON:    true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			fs.StringVar(&status, "status", "", "only jobs in these `states` (comma-separated: "+statusNames()+")")
			fs.StringVar(&agent, "agent", "", "only jobs held by agent `id`")
			fs.StringVar(&project, "project", "", "only jobs of project `name`")
			fs.IntVar(&limit, "limit", 0, "at most `n` jobs (0: all)")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			if project != "" {
				if err := jobstore.CheckProject(project); err != nil {
					return c.Usagef("--project: %v", err)
				}
			}
			f := jobstore.JobFilter{AgentID: agent, Project: project, Limit: limit}
			for _, st := range strings.Split(status, ",") {
				if st = strings.ToUpper(strings.TrimSpace(st)); st != "" {
					if !slices.Contains(jobstore.Statuses, st) {
						return c.Usagef("unknown status %q (want one of %s)", strings.ToLower(st), statusNames())
					}
					f.Statuses = append(f.Statuses, st)
				}
			}
			store, err := m.open(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			jobs, err := store.ListJobs(ctx, f)
			if err != nil {
				return err
			}
			waiting, err := m.waitReasons(ctx, store, jobs)
			if err != nil {
				return err
			}
			if c.JSON {
				views := make([]jobView, 0, len(jobs))
				for _, j := range jobs {
					views = append(views, newJobView(j, waiting[j.ID]))
				}
				return c.PrintJSON(views)
			}
			now := m.now()
			tw := c.Table()
			fmt.Fprintln(tw, "ID\tSTATUS\tGEN\tOWNER\tPHONE\tAGE\tNOTE")
			for _, j := range jobs {
				note := waiting[j.ID]
				if jobstore.Finished(j.Status) && j.Status != jobstore.StatusSucceeded {
					note = j.FailReason
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", j.ID, j.Status, j.Generation, dash(j.WorkerID), dash(j.Device), age(now, j.CreatedAt), note)
			}
			return tw.Flush()
		},
	}
}

// generation is one grant of a job, rebuilt from its write events.
type generation struct {
	Generation int64     `json:"generation"`
	Owner      string    `json:"owner"`
	GrantedBy  string    `json:"granted_by"` // claim or reassign
	GrantedAt  time.Time `json:"granted_at"`
	Ended      string    `json:"ended,omitempty"` // succeeded, failed (class cause), reclaimed (why), timed out, reassigned, cancelled
	EndedAt    time.Time `json:"ended_at,omitzero"`
	Artifacts  []string  `json:"artifacts,omitempty"`
}

// generations is api.Generations as job show prints it: the end of each
// grant with why (the reclaim's or cancel's detail, the failure's class
// and cause).
func generations(evs []jobstore.WriteEvent) []generation {
	var out []generation
	for _, g := range api.Generations(evs) {
		v := generation{Generation: g.Generation, Owner: g.Owner, GrantedBy: g.GrantedBy, GrantedAt: g.GrantedAt, Ended: g.Ended}
		if g.EndedAt != nil {
			v.EndedAt = *g.EndedAt
		}
		switch g.Ended {
		case "reclaimed", "cancelled":
			v.Ended = g.Ended + ": " + g.Detail
		case "failed":
			v.Ended = strings.TrimSpace("failed: " + g.Class + " " + g.Cause)
		}
		out = append(out, v)
	}
	return out
}

// jobDetail is job show's --json document.
type jobDetail struct {
	jobView
	Task        protocol.Task `json:"task"`
	Generations []generation  `json:"generations"`
	Events      []eventView   `json:"write_events"`
}

// eventView is one write attempt as printed with --json.
type eventView struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Verb       string    `json:"verb"`
	Owner      string    `json:"owner"`
	Generation int64     `json:"generation"`
	Accepted   bool      `json:"accepted"`
	Detail     string    `json:"detail,omitempty"`
	Class      string    `json:"class,omitempty"`
	Cause      string    `json:"cause,omitempty"`
}

// jobShowCommand shows one job with its history.
func (m *mgmt) jobShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "job show",
		Summary:   "show a job: its state, every generation and every recorded write attempt",
		Args:      "ID",
		CheckArgs: oneID,
		JSON:      true,
		Flags:     m.flags,
		Run: func(ctx context.Context, c *cli.Call) error {
			store, err := m.open(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			d, err := m.jobDetail(ctx, store, c.Args[0])
			if err != nil {
				return err
			}
			if c.JSON {
				return c.PrintJSON(d)
			}
			return printJob(c, d)
		},
	}
}

// jobDetail reads a job with its history.
func (m *mgmt) jobDetail(ctx context.Context, store jobstore.Store, id string) (jobDetail, error) {
	j, err := store.Get(ctx, id)
	if err != nil {
		return jobDetail{}, err
	}
	evs, err := store.WriteEvents(ctx, id)
	if err != nil {
		return jobDetail{}, err
	}
	waiting, err := m.waitReasons(ctx, store, []jobstore.Job{j})
	if err != nil {
		return jobDetail{}, err
	}
	gens := generations(evs)
	for i := range gens {
		arts, err := store.Artifacts(ctx, j.ID, gens[i].Generation)
		if err != nil {
			return jobDetail{}, err
		}
		for _, a := range arts {
			gens[i].Artifacts = append(gens[i].Artifacts, a.Key)
		}
	}
	if gens == nil {
		gens = []generation{}
	}
	views := make([]eventView, 0, len(evs))
	for _, e := range evs {
		views = append(views, eventView{ID: e.ID, At: e.At, Verb: e.Verb, Owner: e.Owner, Generation: e.Generation, Accepted: e.Accepted,
			Detail: e.Detail, Class: e.Class, Cause: e.Cause})
	}
	return jobDetail{jobView: newJobView(j, waiting[j.ID]), Task: j.Task, Generations: gens, Events: views}, nil
}

// printJob prints job show's text.
func printJob(c *cli.Call, d jobDetail) error {
	w := c.Stdout
	fmt.Fprintf(w, "Job %s\n", d.ID)
	tw := c.Table()
	fmt.Fprintf(tw, "  status\t%s\n", d.Status)
	if d.Waiting != "" {
		fmt.Fprintf(tw, "  waiting\t%s\n", d.Waiting)
	}
	fmt.Fprintf(tw, "  generation\t%d\n", d.Generation)
	fmt.Fprintf(tw, "  project\t%s\n", d.Project)
	fmt.Fprintf(tw, "  priority\t%d\n", d.Priority)
	fmt.Fprintf(tw, "  attempts\t%d of %d\n", d.Attempts, d.MaxAttempts)
	if d.Task.TimeoutMS > 0 {
		timeout := (time.Duration(d.Task.TimeoutMS) * time.Millisecond).String()
		if d.DeadlineAt != nil {
			fmt.Fprintf(tw, "  deadline\t%s (timeout %s)\n", d.DeadlineAt.Format(timeFormat), timeout)
		} else {
			fmt.Fprintf(tw, "  deadline\tat the first grant + %s\n", timeout)
		}
	}
	if d.NotBefore != nil {
		fmt.Fprintf(tw, "  not before\t%s\n", d.NotBefore.Format(timeFormat))
	}
	if d.ScheduleID != "" && d.ScheduledAt != nil {
		fmt.Fprintf(tw, "  schedule\t%s, slot %s\n", d.ScheduleID, d.ScheduledAt.Format(timeFormat))
	}
	fmt.Fprintf(tw, "  owner\t%s\n", dash(d.Owner))
	fmt.Fprintf(tw, "  phone\t%s (selector: %s)\n", dash(d.Device), coordinator.DescribeSelector(d.Selector))
	if d.LeaseExpiresAt != nil {
		fmt.Fprintf(tw, "  lease expires\t%s\n", d.LeaseExpiresAt.Format(timeFormat))
	}
	fmt.Fprintf(tw, "  steps\t%d\n", len(d.Task.Steps))
	if d.CompletedBy != "" {
		fmt.Fprintf(tw, "  completed by\t%s\n", d.CompletedBy)
	}
	if d.FailReason != "" {
		fmt.Fprintf(tw, "  fail reason\t%s\n", d.FailReason)
	}
	if len(d.Result) > 0 {
		fmt.Fprintf(tw, "  result\t%s\n", d.Result)
	}
	fmt.Fprintf(tw, "  created\t%s\n", d.CreatedAt.Format(timeFormat))
	fmt.Fprintf(tw, "  updated\t%s\n", d.UpdatedAt.Format(timeFormat))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nGenerations:\n")
	tw = c.Table()
	fmt.Fprintln(tw, "  GEN\tOWNER\tGRANTED BY\tGRANTED AT\tENDED\tARTIFACTS")
	for _, g := range d.Generations {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%d\n", g.Generation, g.Owner, g.GrantedBy, g.GrantedAt.Format(timeFormat), dash(g.Ended), len(g.Artifacts))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.AttemptEnds) > 0 {
		fmt.Fprintf(w, "\nAttempts that ended without a result:\n")
		tw = c.Table()
		fmt.Fprintln(tw, "  GEN\tCLASS\tCAUSE\tREASON")
		for _, a := range d.AttemptEnds {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", a.Generation, dash(a.Class), dash(a.Cause), a.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nWrite events:\n")
	tw = c.Table()
	fmt.Fprintln(tw, "  AT\tVERB\tOWNER\tGEN\tACCEPTED\tCAUSE\tDETAIL")
	for _, e := range d.Events {
		acc := "no"
		if e.Accepted {
			acc = "yes"
		}
		cause := strings.TrimSpace(e.Class + " " + e.Cause)
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\t%s\n", e.At.Format(timeFormat), e.Verb, dash(e.Owner), e.Generation, acc, dash(cause), e.Detail)
	}
	return tw.Flush()
}

// jobCancelCommand cancels a job and revokes its lease.
func (m *mgmt) jobCancelCommand() *cli.Command {
	var reason string
	return &cli.Command{
		Name:      "job cancel",
		Summary:   "cancel a queued or running job; a running one's agent is sent a revoke",
		Args:      "ID",
		CheckArgs: oneID,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			fs.StringVar(&reason, "reason", "cancelled by operator", "the `reason` kept with the job")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			id := c.Args[0]
			store, err := m.open(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			tok, err := store.Cancel(ctx, id, reason)
			if err != nil {
				return err
			}
			if tok == (fencing.Token{}) {
				_, err := fmt.Fprintf(c.Stdout, "job %s cancelled\n", id)
				return err
			}
			// The token is stale in the store already; the revoke only makes
			// the agent stop sooner than its next fenced call.
			if err := m.revoke(tok, "cancelled: "+reason); err != nil {
				c.Warnf("revoke not sent (%v); the agent stops at its next fenced call", err)
			}
			_, err = fmt.Fprintf(c.Stdout, "job %s cancelled; revoked %s\n", id, tok)
			return err
		},
	}
}
