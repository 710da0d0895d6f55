package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/internal/cli"
)

// rolloutCommands are "rollout start", "status", "pause", "resume" and
// "abort": staged rollouts of a release to the agents (docs/releases.md),
// through the HTTP API.
func (m *mgmt) rolloutCommands() []*cli.Command {
	return []*cli.Command{m.rolloutStartCommand(), m.rolloutStatusCommand(),
		m.rolloutChangeCommand("pause", "pause the active rollout (or rollout ID): no agent is told to update until it is resumed"),
		m.rolloutChangeCommand("resume", "resume a paused rollout; the failures so far no longer count towards --max-failures"),
		m.rolloutChangeCommand("abort", "abort the active rollout (or rollout ID) for good; updated agents stay updated")}
}

func (m *mgmt) rolloutStartCommand() *cli.Command {
	var (
		ac  apiClientFlags
		req api.RolloutRequest
	)
	return &cli.Command{
		Name:      "rollout start",
		Summary:   "start a staged rollout of a stored release to the agents",
		Args:      "VERSION",
		CheckArgs: cli.ExactArgs(1, "VERSION"),
		JSON:      true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			ac.define(fs)
			req = api.RolloutRequest{}
			fs.StringVar(&req.Agents, "agents", "", "the agents to update: `ids` or shell patterns such as pc-*, comma-separated (default every agent)")
			fs.Func("steps", "the share of the agents updated by the end of each `step`, ascending to 100% (default 5%,25%,100%)", func(s string) error {
				steps, err := jobstore.ParseRolloutSteps(s)
				req.Steps = steps
				return err
			})
			fs.IntVar(&req.MaxFailures, "max-failures", 0, "pause the rollout once this many agents failed to update (default 0: never)")
			fs.BoolVar(&req.AllowDowngrade, "allow-downgrade", false, "also move agents on a newer version back to this one")
			fs.Func("timeout", "how long an agent has to come back with the version once told to update (default 15m)", func(s string) error {
				d, err := time.ParseDuration(s)
				if err != nil {
					return fmt.Errorf("%q is not a duration such as 15m", s)
				}
				req.Timeout = d.String()
				return nil
			})
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			v, err := jobstore.CanonicalVersion(c.Args[0])
			if err != nil {
				return c.Usagef("VERSION: %v", err)
			}
			req.Version = v
			if _, err := jobstore.ParseAgentSelector(req.Agents); err != nil {
				return c.Usagef("--%v", err)
			}
			var ro jobstore.Rollout
			if err := m.apiDo(ctx, c, &ac, "POST", "/api/v1/rollouts", req, &ro); err != nil {
				return err
			}
			if c.JSON {
				return c.PrintJSON(ro)
			}
			fmt.Fprintf(c.Stderr, "rollout of %s started in steps %s; follow it with edgecoord rollout status\n", ro.Version, jobstore.FormatRolloutSteps(ro.Steps))
			_, err = fmt.Fprintln(c.Stdout, ro.ID)
			return err
		},
	}
}

// errNoRollout: there is no rollout to show or change.
var errNoRollout = errors.New("no rollout")

// rolloutID is the rollout a command names, else the newest (active,
// with active).
func (m *mgmt) rolloutID(ctx context.Context, c *cli.Call, ac *apiClientFlags, active bool) (string, error) {
	if len(c.Args) == 1 {
		if err := jobstore.CheckRolloutID(c.Args[0]); err != nil {
			return "", c.Usagef("ID: %v", err)
		}
		return c.Args[0], nil
	}
	var list api.RolloutList
	if err := m.apiGet(ctx, c, ac, "/api/v1/rollouts", &list); err != nil {
		return "", err
	}
	for _, r := range list.Rollouts {
		if !active || r.Active() {
			return r.ID, nil
		}
	}
	if active {
		return "", c.Failf("%s: %v is running or paused", c.Name, errNoRollout)
	}
	return "", c.Failf("%s: %v was started yet (edgecoord rollout start VERSION)", c.Name, errNoRollout)
}

var maxOneID = func(args []string) error {
	if len(args) > 1 {
		return fmt.Errorf("want at most one ID, got %d arguments", len(args))
	}
	return nil
}

func (m *mgmt) rolloutStatusCommand() *cli.Command {
	var ac apiClientFlags
	return &cli.Command{
		Name:      "rollout status",
		Summary:   "show a rollout (default the newest) and every agent's version, update state and last outcome",
		Args:      "[ID]",
		CheckArgs: maxOneID,
		JSON:      true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			ac.define(fs)
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			id, err := m.rolloutID(ctx, c, &ac, false)
			if err != nil {
				return err
			}
			var v api.RolloutView
			if err := m.apiGet(ctx, c, &ac, "/api/v1/rollouts/"+url.PathEscape(id), &v); err != nil {
				return err
			}
			if c.JSON {
				return c.PrintJSON(v)
			}
			fmt.Fprintf(c.Stdout, "rollout %s of %s: %s, step %d of %d (%d%% of %d agents)\n", v.ID, v.Version, v.State,
				v.Step+1, len(v.Steps), v.Steps[v.Step], v.Eligible)
			if v.Reason != "" {
				fmt.Fprintf(c.Stdout, "%s\n", v.Reason)
			}
			fmt.Fprintf(c.Stdout, "agents: %s; steps %s; max failures %d\n\n", dash(v.Agents), jobstore.FormatRolloutSteps(v.Steps), v.MaxFailures)
			tw := c.Table()
			fmt.Fprintln(tw, "AGENT\tVERSION\tSTATUS\tUPDATE STATE\tLAST OUTCOME")
			for _, a := range v.AgentStates {
				state := "-"
				if a.Update != nil {
					state = a.Update.State
				}
				online := ""
				if !a.Online {
					online = " (offline)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.ID+online, dash(a.Version), a.Status, state, dash(a.LastOutcome))
			}
			return tw.Flush()
		},
	}
}

func (m *mgmt) rolloutChangeCommand(verb, summary string) *cli.Command {
	var ac apiClientFlags
	return &cli.Command{
		Name:      "rollout " + verb,
		Summary:   summary,
		Args:      "[ID]",
		CheckArgs: maxOneID,
		JSON:      true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			ac.define(fs)
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			id, err := m.rolloutID(ctx, c, &ac, true)
			if err != nil {
				return err
			}
			var ro jobstore.Rollout
			if err := m.apiDo(ctx, c, &ac, "POST", "/api/v1/rollouts/"+url.PathEscape(id)+"/"+verb, nil, &ro); err != nil {
				return err
			}
			if c.JSON {
				return c.PrintJSON(ro)
			}
			_, err = fmt.Fprintf(c.Stdout, "rollout %s of %s: %s at step %s of %s\n", ro.ID, ro.Version, ro.State,
				strconv.Itoa(ro.Step+1), strconv.Itoa(len(ro.Steps)))
			return err
		},
	}
}
