package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/internal/natsconn"
	"github.com/edgeagent/edgeagent/protocol"
)

// mgmt is what the management commands share: the config file (the store
// to open and the NATS server for pushes to agents) and the output format.
// They talk to the database directly, so they work whether or not a
// coordinator runs, and to NATS only to push revokes and control commands.
type mgmt struct {
	app        *app
	configPath string
	json       bool
	cfg        *config.Coordinator
}

func (m *mgmt) flagSet(name string, w io.Writer, withJSON bool) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.StringVar(&m.configPath, "c", config.DefaultCoordinatorFile, "read the configuration from `file`")
	if withJSON {
		fs.BoolVar(&m.json, "json", false, "print JSON for scripts instead of a table")
	}
	return fs
}

// load reads the config file.
func (m *mgmt) load() error {
	cfg, err := config.LoadCoordinator(m.configPath)
	if err != nil {
		return reportLoadError(m.app.stderr, err)
	}
	m.cfg = cfg
	return nil
}

// open loads the config and opens the store.
func (m *mgmt) open(ctx context.Context) (coordinator.Store, error) {
	if err := m.load(); err != nil {
		return nil, err
	}
	return openStore(ctx, m.cfg)
}

// connect dials NATS with the coordinator's credentials and waits up to the
// request timeout for the connection.
func (m *mgmt) connect() (*nats.Conn, error) {
	nc, err := natsconn.Connect(m.cfg.NATS, natsconn.Options{
		Name: "edgecoord cli", InboxPrefix: coordinator.InboxPrefix, Log: zerolog.Nop(),
	})
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(m.cfg.NATS.RequestTimeout.Duration())
	for !nc.IsConnected() {
		if time.Now().After(deadline) {
			nc.Close()
			return nil, fmt.Errorf("connect nats: not connected after %s", m.cfg.NATS.RequestTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nc, nil
}

// push sends a control command to an agent, or says why it could not.
func (m *mgmt) push(ctx context.Context, agentID string, c protocol.Control) error {
	nc, err := m.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, m.cfg.NATS.RequestTimeout.Duration())
	defer cancel()
	_, err = coordinator.PushControl(ctx, nc, agentID, c)
	return err
}

// revoke publishes a revoke and flushes it to the server.
func (m *mgmt) revoke(tok fencing.Token, reason string) error {
	nc, err := m.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := coordinator.PublishRevoke(nc, tok, reason); err != nil {
		return err
	}
	return nc.FlushTimeout(m.cfg.NATS.RequestTimeout.Duration())
}

func (m *mgmt) printJSON(v any) error {
	enc := json.NewEncoder(m.app.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (m *mgmt) warn(format string, a ...any) {
	fmt.Fprintf(m.app.stderr, "warning: "+format+"\n", a...)
}

func (m *mgmt) table() *tabwriter.Writer { return tabwriter.NewWriter(m.app.stdout, 0, 4, 2, ' ', 0) }

// oneArg is a positional argument list of exactly one id.
type oneArg struct{ id string }

func (o *oneArg) argsUsage() string { return "ID" }
func (o *oneArg) setArgs(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("want one ID, got %d arguments", len(args))
	}
	o.id = args[0]
	return nil
}

// notFound reports a missing job or agent as a plain message.
func notFound(err error) bool {
	return errors.Is(err, coordinator.ErrNotFound) || errors.Is(err, coordinator.ErrAgentNotFound)
}

// migrateCommand applies pending schema migrations.
type migrateCommand struct{ mgmt }

func (c *migrateCommand) name() string { return "migrate" }
func (c *migrateCommand) summary() string {
	return "create or upgrade the store's schema and print its version"
}
func (c *migrateCommand) flags(w io.Writer) *flag.FlagSet {
	return c.flagSet(c.name(), w, false)
}

func (c *migrateCommand) run(ctx context.Context, _ *flag.FlagSet) error {
	store, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	v, ok := store.(interface {
		SchemaVersion(context.Context) (int64, error)
	})
	if !ok {
		return fmt.Errorf("migrate: store has no schema version")
	}
	n, err := v.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.app.stdout, "%s store at schema version %d\n", c.cfg.Store.Driver, n)
	return nil
}

// jobFile is a job as written in a file for job submit.
type jobFile struct {
	ID     string                  `yaml:"id"`
	Device protocol.DeviceSelector `yaml:"device"`
	Steps  []protocol.Step         `yaml:"steps"`
	// Interactive and IdleTimeoutMS mirror protocol.Task.
	Interactive   bool  `yaml:"interactive"`
	IdleTimeoutMS int64 `yaml:"idle_timeout_ms"`
}

// parseJobFile decodes a job file strictly (unknown keys are errors, with
// their line and column).
func parseJobFile(data []byte) (coordinator.JobSpec, error) {
	var f jobFile
	if err := yaml.UnmarshalWithOptions(data, &f, yaml.Strict(), yaml.DisallowUnknownField()); err != nil {
		return coordinator.JobSpec{}, err
	}
	task := protocol.Task{Device: f.Device, Steps: f.Steps, Interactive: f.Interactive, IdleTimeoutMS: f.IdleTimeoutMS}
	if err := coordinator.CheckSubmit(task); err != nil {
		return coordinator.JobSpec{}, err
	}
	return coordinator.JobSpec{ID: f.ID, Task: task}, nil
}

// jobSubmitCommand queues a job from a YAML (or JSON) file.
type jobSubmitCommand struct {
	mgmt
	file string
	id   string
}

func (c *jobSubmitCommand) name() string    { return "job submit" }
func (c *jobSubmitCommand) summary() string { return "queue a job described in a YAML or JSON file" }
func (c *jobSubmitCommand) flags(w io.Writer) *flag.FlagSet {
	fs := c.flagSet(c.name(), w, true)
	fs.StringVar(&c.file, "f", "", "the job `file` (- for standard input): id (optional), device {serial, model, tags}, steps")
	fs.StringVar(&c.id, "id", "", "job `id`, overriding the file's (default: the file's, else random)")
	return fs
}

func (c *jobSubmitCommand) run(ctx context.Context, _ *flag.FlagSet) error {
	if c.file == "" {
		fmt.Fprintf(c.app.stderr, "%s %s: -f is required\n", progName, c.name())
		return &exitError{exitUsage}
	}
	var (
		data []byte
		err  error
	)
	if c.file == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(c.file)
	}
	if err != nil {
		return fmt.Errorf("read job file: %w", err)
	}
	spec, err := parseJobFile(data)
	if err != nil {
		fmt.Fprintf(c.app.stderr, "%s: invalid job: %v\n", c.file, err)
		return &exitError{exitUsage}
	}
	if c.id != "" {
		spec.ID = c.id
	}
	store, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	j, err := store.Submit(ctx, spec)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(newJobView(j, ""))
	}
	fmt.Fprintf(c.app.stdout, "job %s queued (%s)\n", j.ID, coordinator.DescribeSelector(j.Task.Device))
	return nil
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
}

func newJobView(j coordinator.Job, waiting string) jobView {
	v := jobView{
		ID: j.ID, Status: j.Status, Generation: j.Generation, Owner: j.WorkerID, Device: j.Device,
		Selector: j.Task.Device, Waiting: waiting, CompletedBy: j.CompletedBy, FailReason: j.FailReason,
		Result: j.Result, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt,
	}
	if !j.LeaseExpiresAt.IsZero() {
		t := j.LeaseExpiresAt
		v.LeaseExpiresAt = &t
	}
	return v
}

// waitReasons explains every queued job of jobs.
func (m *mgmt) waitReasons(ctx context.Context, store coordinator.Store, jobs []coordinator.Job) (map[string]string, error) {
	out := map[string]string{}
	var queued []coordinator.Job
	for _, j := range jobs {
		if j.Status == coordinator.StatusQueued {
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
	running, err := store.ListJobs(ctx, coordinator.JobFilter{Statuses: []string{coordinator.StatusInProgress}})
	if err != nil {
		return nil, err
	}
	for _, j := range queued {
		out[j.ID] = coordinator.WaitReason(j.Task.Device, agents, running, m.cfg.Agents.OfflineAfter.Duration())
	}
	return out, nil
}

func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// jobListCommand lists jobs.
type jobListCommand struct {
	mgmt
	status string
	agent  string
	limit  int
}

func (c *jobListCommand) name() string { return "job list" }
func (c *jobListCommand) summary() string {
	return "list jobs, oldest first, with what each queued job waits for"
}
func (c *jobListCommand) flags(w io.Writer) *flag.FlagSet {
	fs := c.flagSet(c.name(), w, true)
	fs.StringVar(&c.status, "status", "", "only jobs in these `states` (comma-separated: queued, in_progress, succeeded, failed)")
	fs.StringVar(&c.agent, "agent", "", "only jobs held by agent `id`")
	fs.IntVar(&c.limit, "limit", 0, "at most `n` jobs (0: all)")
	return fs
}

func (c *jobListCommand) run(ctx context.Context, _ *flag.FlagSet) error {
	f := coordinator.JobFilter{AgentID: c.agent, Limit: c.limit}
	for _, st := range strings.Split(c.status, ",") {
		if st = strings.ToUpper(strings.TrimSpace(st)); st != "" {
			switch st {
			case coordinator.StatusQueued, coordinator.StatusInProgress, coordinator.StatusSucceeded, coordinator.StatusFailed:
			default:
				fmt.Fprintf(c.app.stderr, "%s %s: unknown status %q\n", progName, c.name(), st)
				return &exitError{exitUsage}
			}
			f.Statuses = append(f.Statuses, st)
		}
	}
	store, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	jobs, err := store.ListJobs(ctx, f)
	if err != nil {
		return err
	}
	waiting, err := c.waitReasons(ctx, store, jobs)
	if err != nil {
		return err
	}
	if c.json {
		views := make([]jobView, 0, len(jobs))
		for _, j := range jobs {
			views = append(views, newJobView(j, waiting[j.ID]))
		}
		return c.printJSON(views)
	}
	now := time.Now()
	tw := c.table()
	fmt.Fprintln(tw, "ID\tSTATUS\tGEN\tOWNER\tPHONE\tAGE\tNOTE")
	for _, j := range jobs {
		note := waiting[j.ID]
		if j.Status == coordinator.StatusFailed {
			note = j.FailReason
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", j.ID, j.Status, j.Generation, dash(j.WorkerID), dash(j.Device), age(now, j.CreatedAt), note)
	}
	return tw.Flush()
}

// generation is one grant of a job, rebuilt from its write events.
type generation struct {
	Generation int64     `json:"generation"`
	Owner      string    `json:"owner"`
	GrantedBy  string    `json:"granted_by"` // claim or reassign
	GrantedAt  time.Time `json:"granted_at"`
	Ended      string    `json:"ended,omitempty"` // succeeded, failed, released, reclaimed (why), reassigned, cancelled
	EndedAt    time.Time `json:"ended_at,omitzero"`
	Artifacts  []string  `json:"artifacts,omitempty"`
}

// generations rebuilds the history of grants from the accepted write
// events, oldest first.
func generations(evs []coordinator.WriteEvent) []generation {
	var out []generation
	end := func(gen int64, how string, at time.Time) {
		for i := range out {
			if out[i].Generation == gen && out[i].Ended == "" {
				out[i].Ended, out[i].EndedAt = how, at
			}
		}
	}
	for _, e := range evs {
		if !e.Accepted {
			continue
		}
		switch e.Verb {
		case "claim", "reassign":
			for i := range out {
				if out[i].Ended == "" {
					out[i].Ended, out[i].EndedAt = "reassigned", e.At
				}
			}
			out = append(out, generation{Generation: e.Generation, Owner: e.Owner, GrantedBy: e.Verb, GrantedAt: e.At})
		case "reclaim":
			end(e.Generation, "reclaimed: "+e.Detail, e.At)
		case "result":
			end(e.Generation, "succeeded", e.At)
		case "fail":
			end(e.Generation, "failed or released", e.At)
		case "cancel":
			end(e.Generation, "cancelled: "+e.Detail, e.At)
		}
	}
	return out
}

// jobShowCommand shows one job with its history.
type jobShowCommand struct {
	mgmt
	oneArg
}

func (c *jobShowCommand) name() string { return "job show" }
func (c *jobShowCommand) summary() string {
	return "show a job: its state, every generation and every recorded write attempt"
}
func (c *jobShowCommand) flags(w io.Writer) *flag.FlagSet { return c.flagSet(c.name(), w, true) }

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
}

func (c *jobShowCommand) run(ctx context.Context, _ *flag.FlagSet) error {
	store, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	j, err := store.Get(ctx, c.id)
	if err != nil {
		return err
	}
	evs, err := store.WriteEvents(ctx, c.id)
	if err != nil {
		return err
	}
	waiting, err := c.waitReasons(ctx, store, []coordinator.Job{j})
	if err != nil {
		return err
	}
	gens := generations(evs)
	for i := range gens {
		arts, err := store.Artifacts(ctx, j.ID, gens[i].Generation)
		if err != nil {
			return err
		}
		for _, a := range arts {
			gens[i].Artifacts = append(gens[i].Artifacts, a.Key)
		}
	}
	if c.json {
		views := make([]eventView, 0, len(evs))
		for _, e := range evs {
			views = append(views, eventView{ID: e.ID, At: e.At, Verb: e.Verb, Owner: e.Owner, Generation: e.Generation, Accepted: e.Accepted, Detail: e.Detail})
		}
		if gens == nil {
			gens = []generation{}
		}
		return c.printJSON(jobDetail{jobView: newJobView(j, waiting[j.ID]), Task: j.Task, Generations: gens, Events: views})
	}
	w := c.app.stdout
	fmt.Fprintf(w, "Job %s\n", j.ID)
	tw := c.table()
	fmt.Fprintf(tw, "  status\t%s\n", j.Status)
	if r := waiting[j.ID]; r != "" {
		fmt.Fprintf(tw, "  waiting\t%s\n", r)
	}
	fmt.Fprintf(tw, "  generation\t%d\n", j.Generation)
	fmt.Fprintf(tw, "  owner\t%s\n", dash(j.WorkerID))
	fmt.Fprintf(tw, "  phone\t%s (selector: %s)\n", dash(j.Device), coordinator.DescribeSelector(j.Task.Device))
	if !j.LeaseExpiresAt.IsZero() {
		fmt.Fprintf(tw, "  lease expires\t%s\n", j.LeaseExpiresAt.Format(time.RFC3339Nano))
	}
	fmt.Fprintf(tw, "  steps\t%d\n", len(j.Task.Steps))
	if j.CompletedBy != "" {
		fmt.Fprintf(tw, "  completed by\t%s\n", j.CompletedBy)
	}
	if j.FailReason != "" {
		fmt.Fprintf(tw, "  fail reason\t%s\n", j.FailReason)
	}
	if len(j.Result) > 0 {
		fmt.Fprintf(tw, "  result\t%s\n", j.Result)
	}
	fmt.Fprintf(tw, "  created\t%s\n", j.CreatedAt.Format(time.RFC3339Nano))
	fmt.Fprintf(tw, "  updated\t%s\n", j.UpdatedAt.Format(time.RFC3339Nano))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nGenerations:\n")
	tw = c.table()
	fmt.Fprintln(tw, "  GEN\tOWNER\tGRANTED BY\tGRANTED AT\tENDED\tARTIFACTS")
	for _, g := range gens {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%d\n", g.Generation, g.Owner, g.GrantedBy, g.GrantedAt.Format(time.RFC3339Nano), dash(g.Ended), len(g.Artifacts))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nWrite events:\n")
	tw = c.table()
	fmt.Fprintln(tw, "  AT\tVERB\tOWNER\tGEN\tACCEPTED\tDETAIL")
	for _, e := range evs {
		acc := "no"
		if e.Accepted {
			acc = "yes"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\n", e.At.Format(time.RFC3339Nano), e.Verb, dash(e.Owner), e.Generation, acc, e.Detail)
	}
	return tw.Flush()
}

// jobCancelCommand cancels a job and revokes its lease.
type jobCancelCommand struct {
	mgmt
	oneArg
	reason string
}

func (c *jobCancelCommand) name() string { return "job cancel" }
func (c *jobCancelCommand) summary() string {
	return "cancel a queued or running job; a running one's agent is sent a revoke"
}
func (c *jobCancelCommand) flags(w io.Writer) *flag.FlagSet {
	fs := c.flagSet(c.name(), w, false)
	fs.StringVar(&c.reason, "reason", "cancelled by operator", "the `reason` kept with the job")
	return fs
}

func (c *jobCancelCommand) run(ctx context.Context, _ *flag.FlagSet) error {
	store, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	tok, err := store.Cancel(ctx, c.id, c.reason)
	if err != nil {
		return err
	}
	if tok == (fencing.Token{}) {
		fmt.Fprintf(c.app.stdout, "job %s cancelled\n", c.id)
		return nil
	}
	// The token is stale in the store already; the revoke only makes the
	// agent stop sooner than its next fenced call.
	if err := c.revoke(tok, "cancelled: "+c.reason); err != nil {
		c.warn("revoke not sent (%v); the agent stops at its next fenced call", err)
	}
	fmt.Fprintf(c.app.stdout, "job %s cancelled; revoked %s\n", c.id, tok)
	return nil
}

// agentView is an agent as printed with --json.
type agentView struct {
	ID            string            `json:"id"`
	State         string            `json:"state"` // online, offline, never connected
	BootID        string            `json:"boot_id,omitempty"`
	Owner         string            `json:"owner,omitempty"`
	Version       string            `json:"version,omitempty"`
	Slots         int               `json:"slots"`
	Running       []string          `json:"running"`
	Draining      bool              `json:"draining"`       // by the operator
	AgentDraining bool              `json:"agent_draining"` // by the agent's own report
	Devices       []deviceView      `json:"devices"`
	Capabilities  []string          `json:"capabilities,omitempty"`
	Settings      map[string]string `json:"settings"`
	CoordinatorID string            `json:"coordinator_id,omitempty"`
	ConnectedAt   *time.Time        `json:"connected_at,omitempty"`
	LastSeen      *time.Time        `json:"last_seen,omitempty"`
	SeenAgoMS     int64             `json:"seen_ago_ms"`
}

type deviceView struct {
	protocol.Device
	Job string `json:"job,omitempty"` // the job counted against the phone
}

func newAgentView(a coordinator.Agent, running []coordinator.Job, offlineAfter time.Duration) agentView {
	v := agentView{
		ID: a.ID, BootID: a.BootID, Owner: a.Owner(), Version: a.Version, Slots: a.Slots, Draining: a.Draining,
		AgentDraining: a.AgentDraining, Capabilities: a.Capabilities, Settings: a.Settings, CoordinatorID: a.CoordinatorID,
		SeenAgoMS: a.SeenAgo.Milliseconds(), Running: []string{}, Devices: []deviceView{},
	}
	switch {
	case a.LastSeen.IsZero():
		v.State = "never connected"
	case a.Online(offlineAfter):
		v.State = "online"
	default:
		v.State = "offline"
	}
	if v.Settings == nil {
		v.Settings = map[string]string{}
	}
	if !a.ConnectedAt.IsZero() {
		t := a.ConnectedAt
		v.ConnectedAt = &t
	}
	if !a.LastSeen.IsZero() {
		t := a.LastSeen
		v.LastSeen = &t
	}
	onPhone := map[string]string{}
	for _, j := range running {
		if j.WorkerID == v.Owner && v.Owner != "" {
			v.Running = append(v.Running, j.ID)
			if j.Device != "" {
				onPhone[j.Device] = j.ID
			}
		}
	}
	for _, d := range a.Devices {
		v.Devices = append(v.Devices, deviceView{Device: d, Job: onPhone[d.Serial]})
	}
	return v
}

func (v agentView) drainText() string {
	switch {
	case v.Draining && v.AgentDraining:
		return "yes"
	case v.Draining:
		return "yes (not yet confirmed by the agent)"
	case v.AgentDraining:
		return "by the agent"
	}
	return "no"
}

// agentListCommand lists the registered agents.
type agentListCommand struct{ mgmt }

func (c *agentListCommand) name() string { return "agent list" }
func (c *agentListCommand) summary() string {
	return "list agents with their state, phones and running jobs"
}
func (c *agentListCommand) flags(w io.Writer) *flag.FlagSet { return c.flagSet(c.name(), w, true) }

func (c *agentListCommand) run(ctx context.Context, _ *flag.FlagSet) error {
	store, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	agents, err := store.Agents(ctx)
	if err != nil {
		return err
	}
	running, err := store.ListJobs(ctx, coordinator.JobFilter{Statuses: []string{coordinator.StatusInProgress}})
	if err != nil {
		return err
	}
	offline := c.cfg.Agents.OfflineAfter.Duration()
	views := make([]agentView, 0, len(agents))
	for _, a := range agents {
		views = append(views, newAgentView(a, running, offline))
	}
	if c.json {
		return c.printJSON(views)
	}
	tw := c.table()
	fmt.Fprintln(tw, "ID\tSTATE\tDRAINING\tVERSION\tSLOTS\tRUNNING\tPHONES\tLAST SEEN")
	for _, v := range views {
		usable := 0
		for _, d := range v.Devices {
			if d.State == protocol.DeviceReady {
				usable++
			}
		}
		seen := "-"
		if v.LastSeen != nil {
			seen = fmt.Sprintf("%s ago", (time.Duration(v.SeenAgoMS) * time.Millisecond).Round(time.Second))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d/%d usable\t%s\n", v.ID, v.State, v.drainText(), dash(v.Version),
			v.Slots, len(v.Running), usable, len(v.Devices), seen)
	}
	return tw.Flush()
}

// agentShowCommand shows one agent.
type agentShowCommand struct {
	mgmt
	oneArg
}

func (c *agentShowCommand) name() string { return "agent show" }
func (c *agentShowCommand) summary() string {
	return "show an agent: session, phones, running jobs and settings"
}
func (c *agentShowCommand) flags(w io.Writer) *flag.FlagSet { return c.flagSet(c.name(), w, true) }

func (c *agentShowCommand) run(ctx context.Context, _ *flag.FlagSet) error {
	store, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	a, err := store.GetAgent(ctx, c.id)
	if err != nil {
		return err
	}
	running, err := store.ListJobs(ctx, coordinator.JobFilter{Statuses: []string{coordinator.StatusInProgress}, AgentID: c.id})
	if err != nil {
		return err
	}
	v := newAgentView(a, running, c.cfg.Agents.OfflineAfter.Duration())
	if c.json {
		return c.printJSON(v)
	}
	w := c.app.stdout
	fmt.Fprintf(w, "Agent %s\n", v.ID)
	tw := c.table()
	fmt.Fprintf(tw, "  state\t%s\n", v.State)
	fmt.Fprintf(tw, "  draining\t%s\n", v.drainText())
	fmt.Fprintf(tw, "  owner\t%s\n", dash(v.Owner))
	fmt.Fprintf(tw, "  version\t%s\n", dash(v.Version))
	fmt.Fprintf(tw, "  slots\t%d\n", v.Slots)
	fmt.Fprintf(tw, "  capabilities\t%s\n", dash(strings.Join(v.Capabilities, ", ")))
	fmt.Fprintf(tw, "  coordinator\t%s\n", dash(v.CoordinatorID))
	if v.ConnectedAt != nil {
		fmt.Fprintf(tw, "  connected\t%s\n", v.ConnectedAt.Format(time.RFC3339Nano))
	}
	if v.LastSeen != nil {
		fmt.Fprintf(tw, "  last seen\t%s (%s ago)\n", v.LastSeen.Format(time.RFC3339Nano), (time.Duration(v.SeenAgoMS) * time.Millisecond).Round(time.Millisecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nPhones:\n")
	tw = c.table()
	fmt.Fprintln(tw, "  SERIAL\tSTATE\tMODEL\tTAGS\tJOB")
	for _, d := range v.Devices {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", d.Serial, d.State, dash(d.Model), dash(strings.Join(d.Tags, ",")), dash(d.Job))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nRunning jobs:\n")
	tw = c.table()
	fmt.Fprintln(tw, "  ID\tGEN\tPHONE\tLEASE EXPIRES")
	for _, j := range running {
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\n", j.ID, j.Generation, dash(j.Device), j.LeaseExpiresAt.Format(time.RFC3339Nano))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nSettings:\n")
	keys := make([]string, 0, len(v.Settings))
	for k := range v.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, k := range keys {
		fmt.Fprintf(w, "  %s=%s\n", k, v.Settings[k])
	}
	return nil
}

// agentDrainCommand drains or resumes an agent.
type agentDrainCommand struct {
	mgmt
	oneArg
	drain bool
}

func (c *agentDrainCommand) name() string {
	if c.drain {
		return "agent drain"
	}
	return "agent resume"
}
func (c *agentDrainCommand) summary() string {
	if c.drain {
		return "stop giving an agent new jobs; its running jobs go on"
	}
	return "give a drained agent jobs again"
}
func (c *agentDrainCommand) flags(w io.Writer) *flag.FlagSet { return c.flagSet(c.name(), w, false) }

func (c *agentDrainCommand) run(ctx context.Context, _ *flag.FlagSet) error {
	store, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	// The store's flag is what the scheduler obeys, on every coordinator,
	// from now on; the push lets the agent show it and stop taking jobs
	// from anywhere.
	if _, err := store.SetAgentDraining(ctx, c.id, c.drain); err != nil {
		return err
	}
	cmd, state := protocol.ControlResume, "resumed"
	if c.drain {
		cmd, state = protocol.ControlDrain, "draining"
	}
	if err := c.push(ctx, c.id, protocol.Control{Command: cmd}); err != nil {
		c.warn("agent not told (%v); the coordinator holds it %s all the same", err, state)
	}
	fmt.Fprintf(c.app.stdout, "agent %s %s\n", c.id, state)
	return nil
}

// agentConfigCommand changes an agent's runtime settings.
type agentConfigCommand struct {
	mgmt
	id    string
	set   map[string]string
	unset []string
}

func (c *agentConfigCommand) name() string { return "agent config" }
func (c *agentConfigCommand) summary() string {
	return "show or change an agent's runtime settings (key=value; key= removes), pushed now and kept for its next hello"
}
func (c *agentConfigCommand) flags(w io.Writer) *flag.FlagSet { return c.flagSet(c.name(), w, true) }
func (c *agentConfigCommand) argsUsage() string               { return "ID [key=value ...]" }

func (c *agentConfigCommand) setArgs(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("want an agent ID")
	}
	c.id, c.set, c.unset = args[0], map[string]string{}, nil
	for _, kv := range args[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q: want key=value", kv)
		}
		if v == "" {
			c.unset = append(c.unset, k)
		} else {
			c.set[k] = v
		}
	}
	return nil
}

func (c *agentConfigCommand) run(ctx context.Context, _ *flag.FlagSet) error {
	store, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	if len(c.set) == 0 && len(c.unset) == 0 {
		a, err := store.GetAgent(ctx, c.id)
		if err != nil {
			return err
		}
		return c.printSettings(a.Settings)
	}
	change := map[string]string{}
	for k, v := range c.set {
		change[k] = v
	}
	for _, k := range c.unset {
		change[k] = "" // the agent removes a setting given empty
	}
	// The agent checks the settings: one it refuses is not kept, or every
	// later hello would carry it. One that cannot be told now is kept and
	// reaches it with its next hello reply.
	err = c.push(ctx, c.id, protocol.Control{Command: protocol.ControlConfig, Settings: change})
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe) && pe.Code == protocol.CodeBadRequest:
		fmt.Fprintf(c.app.stderr, "%s: agent %s refused the settings: %s\n", progName, c.id, pe.Description)
		return &exitError{exitFailure}
	case err != nil:
		c.warn("agent not told now (%v); it gets the settings with its next hello", err)
	}
	a, err := store.SetAgentSettings(ctx, c.id, c.set, c.unset)
	if err != nil {
		return err
	}
	return c.printSettings(a.Settings)
}

func (c *agentConfigCommand) printSettings(s map[string]string) error {
	if s == nil {
		s = map[string]string{}
	}
	if c.json {
		return c.printJSON(s)
	}
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(c.app.stdout, "%s=%s\n", k, s[k])
	}
	return nil
}
