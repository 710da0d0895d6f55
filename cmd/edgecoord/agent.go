package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/internal/agentstatus"
	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/protocol"
)

// agentCommands are "agent list|show|status|drain|resume|config".
func (m *mgmt) agentCommands() []*cli.Command {
	return []*cli.Command{
		m.agentListCommand(), m.agentShowCommand(), m.agentStatusCommand(),
		m.agentDrainCommand(true), m.agentDrainCommand(false), m.agentConfigCommand(),
	}
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

func newAgentView(a jobstore.Agent, running []jobstore.Job, offlineAfter time.Duration) agentView {
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
func (m *mgmt) agentListCommand() *cli.Command {
	return &cli.Command{
		Name:    "agent list",
		Summary: "list agents with their state, phones and running jobs",
		JSON:    true,
		Flags:   m.flags,
		Run: func(ctx context.Context, c *cli.Call) error {
			store, err := m.open(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			agents, err := store.Agents(ctx)
			if err != nil {
				return err
			}
			running, err := store.ListJobs(ctx, jobstore.JobFilter{Statuses: []string{jobstore.StatusInProgress}})
			if err != nil {
				return err
			}
			offline := m.cfg.Agents.OfflineAfter.Duration()
			views := make([]agentView, 0, len(agents))
			for _, a := range agents {
				views = append(views, newAgentView(a, running, offline))
			}
			if c.JSON {
				return c.PrintJSON(views)
			}
			tw := c.Table()
			fmt.Fprintln(tw, "ID\tSTATE\tDRAINING\tVERSION\tSLOTS\tRUNNING\tPHONES\tLAST SEEN")
			for _, v := range views {
				usable := 0
				for _, d := range v.Devices {
					if d.Ready() {
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
		},
	}
}

// agentShowCommand shows one agent.
func (m *mgmt) agentShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "agent show",
		Summary:   "show an agent: session, phones, running jobs and settings",
		Args:      "ID",
		CheckArgs: oneID,
		JSON:      true,
		Flags:     m.flags,
		Run: func(ctx context.Context, c *cli.Call) error {
			id := c.Args[0]
			store, err := m.open(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			a, err := store.GetAgent(ctx, id)
			if err != nil {
				return err
			}
			running, err := store.ListJobs(ctx, jobstore.JobFilter{Statuses: []string{jobstore.StatusInProgress}, AgentID: id})
			if err != nil {
				return err
			}
			v := newAgentView(a, running, m.cfg.Agents.OfflineAfter.Duration())
			if c.JSON {
				return c.PrintJSON(v)
			}
			return printAgent(c, v, running)
		},
	}
}

// printAgent prints agent show's text.
func printAgent(c *cli.Call, v agentView, running []jobstore.Job) error {
	w := c.Stdout
	fmt.Fprintf(w, "Agent %s\n", v.ID)
	tw := c.Table()
	fmt.Fprintf(tw, "  state\t%s\n", v.State)
	fmt.Fprintf(tw, "  draining\t%s\n", v.drainText())
	fmt.Fprintf(tw, "  owner\t%s\n", dash(v.Owner))
	fmt.Fprintf(tw, "  version\t%s\n", dash(v.Version))
	fmt.Fprintf(tw, "  slots\t%d\n", v.Slots)
	fmt.Fprintf(tw, "  capabilities\t%s\n", dash(strings.Join(v.Capabilities, ", ")))
	fmt.Fprintf(tw, "  coordinator\t%s\n", dash(v.CoordinatorID))
	if v.ConnectedAt != nil {
		fmt.Fprintf(tw, "  connected\t%s\n", v.ConnectedAt.Format(timeFormat))
	}
	if v.LastSeen != nil {
		fmt.Fprintf(tw, "  last seen\t%s (%s ago)\n", v.LastSeen.Format(timeFormat), (time.Duration(v.SeenAgoMS) * time.Millisecond).Round(time.Millisecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nPhones:\n")
	tw = c.Table()
	fmt.Fprintln(tw, "  SERIAL\tSTATE\tPLATFORM\tMODEL\tTAGS\tJOB")
	for _, d := range v.Devices {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", d.Serial, d.State, protocol.PlatformOf(d.Device), dash(d.Model), dash(strings.Join(d.Tags, ",")), dash(d.Job))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printPhoneNotes(w, v.Devices)
	printRecovery(w, v)
	fmt.Fprintf(w, "\nRunning jobs:\n")
	tw = c.Table()
	fmt.Fprintln(tw, "  ID\tGEN\tPHONE\tLEASE EXPIRES")
	for _, j := range running {
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\n", j.ID, j.Generation, dash(j.Device), j.LeaseExpiresAt.Format(timeFormat))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nSettings:\n")
	if len(v.Settings) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, k := range slices.Sorted(maps.Keys(v.Settings)) {
		fmt.Fprintf(w, "  %s=%s\n", k, v.Settings[k])
	}
	return nil
}

// agentStatusCommand asks a connected agent for its status document (the
// control command "status") and prints it as edgeagent status does.
func (m *mgmt) agentStatusCommand() *cli.Command {
	return &cli.Command{
		Name:      "agent status",
		Summary:   "ask a connected agent for its status document: connection, jobs, phones, recent stops and errors",
		Args:      "ID",
		CheckArgs: oneID,
		JSON:      true,
		JSONHelp:  "print the agent's status document as JSON",
		Flags:     m.flags,
		Run: func(ctx context.Context, c *cli.Call) error {
			id := c.Args[0]
			if err := m.load(c); err != nil {
				return err
			}
			raw, err := m.push(ctx, id, protocol.Control{Command: protocol.ControlStatus})
			if err != nil {
				return c.Failf("agent %s did not answer: %v\n(is it connected? edgecoord agent show %s says when it was last seen)", id, err, id)
			}
			var st protocol.AgentStatus
			if err := json.Unmarshal(raw, &st); err != nil {
				return fmt.Errorf("decode status of agent %s: %w", id, err)
			}
			if c.JSON {
				return c.PrintJSON(json.RawMessage(raw))
			}
			agentstatus.Render(c.Stdout, st, m.now())
			return nil
		},
	}
}

// agentDrainCommand drains (drain) or resumes an agent.
func (m *mgmt) agentDrainCommand(drain bool) *cli.Command {
	cmd := &cli.Command{
		Name:      "agent resume",
		Summary:   "give a drained agent jobs again",
		Args:      "ID",
		CheckArgs: oneID,
		Flags:     m.flags,
	}
	if drain {
		cmd.Name, cmd.Summary = "agent drain", "stop giving an agent new jobs; its running jobs go on"
	}
	cmd.Run = func(ctx context.Context, c *cli.Call) error {
		id := c.Args[0]
		store, err := m.open(ctx, c)
		if err != nil {
			return err
		}
		defer store.Close()
		// The store's flag is what the scheduler obeys, on every
		// coordinator, from now on; the push lets the agent show it and
		// stop taking jobs from anywhere.
		if _, err := store.SetAgentDraining(ctx, id, drain); err != nil {
			return err
		}
		ctl, state := protocol.ControlResume, "resumed"
		if drain {
			ctl, state = protocol.ControlDrain, "draining"
		}
		if _, err := m.push(ctx, id, protocol.Control{Command: ctl}); err != nil {
			c.Warnf("agent not told (%v); the coordinator holds it %s all the same", err, state)
		}
		_, err = fmt.Fprintf(c.Stdout, "agent %s %s\n", id, state)
		return err
	}
	return cmd
}

// settingsArgs are agent config's arguments: the agent and the settings to
// set (key=value) or remove (key=).
type settingsArgs struct {
	id    string
	set   map[string]string
	unset []string
}

func parseSettingsArgs(args []string) (settingsArgs, error) {
	if len(args) == 0 {
		return settingsArgs{}, fmt.Errorf("want an agent ID")
	}
	s := settingsArgs{id: args[0], set: map[string]string{}}
	for _, kv := range args[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return settingsArgs{}, fmt.Errorf("%q: want key=value", kv)
		}
		if v == "" {
			s.unset = append(s.unset, k)
		} else {
			s.set[k] = v
		}
	}
	return s, nil
}

// agentConfigCommand shows or changes an agent's runtime settings.
func (m *mgmt) agentConfigCommand() *cli.Command {
	return &cli.Command{
		Name:    "agent config",
		Summary: "show or change an agent's runtime settings (key=value; key= removes), pushed now and kept for its next hello",
		Args:    "ID [key=value ...]",
		CheckArgs: func(args []string) error {
			_, err := parseSettingsArgs(args)
			return err
		},
		JSON:  true,
		Flags: m.flags,
		Run: func(ctx context.Context, c *cli.Call) error {
			s, err := parseSettingsArgs(c.Args)
			if err != nil {
				return err
			}
			store, err := m.open(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			if len(s.set) == 0 && len(s.unset) == 0 {
				a, err := store.GetAgent(ctx, s.id)
				if err != nil {
					return err
				}
				return printSettings(c, a.Settings)
			}
			change := maps.Clone(s.set)
			for _, k := range s.unset {
				change[k] = "" // the agent removes a setting given empty
			}
			// The agent checks the settings: one it refuses is not kept, or
			// every later hello would carry it. One that cannot be told now
			// is kept and reaches it with its next hello reply.
			_, err = m.push(ctx, s.id, protocol.Control{Command: protocol.ControlConfig, Settings: change})
			var pe *protocol.Error
			switch {
			case errors.As(err, &pe) && pe.Code == protocol.CodeBadRequest:
				return c.Failf("agent %s refused the settings: %s", s.id, pe.Description)
			case err != nil:
				c.Warnf("agent not told now (%v); it gets the settings with its next hello", err)
			}
			a, err := store.SetAgentSettings(ctx, s.id, s.set, s.unset)
			if err != nil {
				return err
			}
			return printSettings(c, a.Settings)
		},
	}
}

func printSettings(c *cli.Call, s map[string]string) error {
	if s == nil {
		s = map[string]string{}
	}
	if c.JSON {
		return c.PrintJSON(s)
	}
	for _, k := range slices.Sorted(maps.Keys(s)) {
		fmt.Fprintf(c.Stdout, "%s=%s\n", k, s[k])
	}
	return nil
}
