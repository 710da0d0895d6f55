package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule"
	"github.com/edgeagent/edgeagent/internal/cli"
)

// scheduleCommands are "schedule create|list|show|pause|resume|delete|backfill"
// (docs/schedules.md).
func (m *mgmt) scheduleCommands() []*cli.Command {
	return []*cli.Command{
		m.scheduleCreateCommand(), m.scheduleListCommand(), m.scheduleShowCommand(),
		m.schedulePauseCommand(true), m.schedulePauseCommand(false), m.scheduleDeleteCommand(), m.scheduleBackfillCommand(),
	}
}

// scheduleStore opens the store's schedules.
func (m *mgmt) scheduleStore(ctx context.Context, c *cli.Call) (jobstore.Store, jobstore.ScheduleStore, error) {
	store, err := m.open(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	ss, ok := store.(jobstore.ScheduleStore)
	if !ok {
		store.Close()
		return nil, nil, fmt.Errorf("the store %T keeps no schedules", store)
	}
	return store, ss, nil
}

// readFile reads the file named by -f (a job or schedule file), - for
// standard input, which it reads up to 16 MiB.
func readFile(file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(io.LimitReader(os.Stdin, 16<<20))
	}
	return os.ReadFile(file)
}

// scheduleCreateCommand stores a schedule from a YAML (or JSON) file.
func (m *mgmt) scheduleCreateCommand() *cli.Command {
	var file string
	return &cli.Command{
		Name:    "schedule create",
		Summary: "store a schedule described in a YAML or JSON file: cron (with time_zone) or every, and the job it fires",
		JSON:    true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			fs.StringVar(&file, "f", "", "the schedule `file` (- for standard input): cron and time_zone or every, jitter, overlap, catch_up, end, job")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			if file == "" {
				return c.Usagef("-f is required")
			}
			data, err := readFile(file)
			if err != nil {
				return fmt.Errorf("read schedule file: %w", err)
			}
			var req api.ScheduleRequest
			if err := api.ParseScheduleFile(data, &req); err != nil {
				fmt.Fprintf(c.Stderr, "%s: invalid schedule: %v\n", file, err)
				return cli.Exit(cli.ExitUsage)
			}
			if err := m.load(c); err != nil {
				return err
			}
			lim := schedule.Limits{MinEvery: m.cfg.Schedules.MinEvery.Duration()}
			o := api.SubmitOptions{SubmittedBy: "cli", Jobs: m.cfg.Jobs}
			if _, _, err := req.Check(o, lim); err != nil {
				fmt.Fprintf(c.Stderr, "%s: invalid schedule: %v\n", file, err)
				return cli.Exit(cli.ExitUsage)
			}
			store, _, err := m.scheduleStore(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			sc, err := api.CreateSchedule(ctx, store, req, o, lim)
			var se *api.SubmitError
			if errors.As(err, &se) {
				fmt.Fprintf(c.Stderr, "%s: invalid schedule: %v\n", file, err)
				return cli.Exit(cli.ExitUsage)
			}
			if err != nil {
				return err
			}
			v, err := api.NewScheduleView(sc, nil)
			if err != nil {
				return err
			}
			if c.JSON {
				return c.PrintJSON(v)
			}
			next := "none"
			if len(v.Next) > 0 {
				next = v.Next[0].Local
			}
			_, err = fmt.Fprintf(c.Stdout, "schedule %s created (project %s); first slot %s\n", sc.ID, sc.Project, next)
			return err
		},
	}
}

// scheduleListCommand lists schedules.
func (m *mgmt) scheduleListCommand() *cli.Command {
	var project string
	return &cli.Command{
		Name:    "schedule list",
		Summary: "list schedules with their next fire time",
		JSON:    true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			fs.StringVar(&project, "project", "", "only schedules of project `name`")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			var f jobstore.ScheduleFilter
			if project != "" {
				if err := jobstore.CheckProject(project); err != nil {
					return c.Usagef("--project: %v", err)
				}
				f.Projects = []string{project}
			}
			store, ss, err := m.scheduleStore(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			list, err := ss.Schedules(ctx, f)
			if err != nil {
				return err
			}
			views := make([]api.ScheduleView, 0, len(list))
			for _, sc := range list {
				v, err := api.NewScheduleView(sc, nil)
				if err != nil {
					return err
				}
				views = append(views, v)
			}
			if c.JSON {
				return c.PrintJSON(views)
			}
			tw := c.Table()
			fmt.Fprintln(tw, "ID\tPROJECT\tWHEN\tOVERLAP\tSTATE\tNEXT")
			for _, v := range views {
				next := "-"
				if len(v.Next) > 0 {
					next = v.Next[0].Local
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.ID, v.Project, v.When(), cmp.Or(v.Schedule.Overlap, schedule.OverlapSkip), v.State(), next)
			}
			return tw.Flush()
		},
	}
}

// scheduleShowCommand shows one schedule: its next five fire times and
// its latest slots with their outcome.
func (m *mgmt) scheduleShowCommand() *cli.Command {
	var slots int
	return &cli.Command{
		Name:      "schedule show",
		Summary:   "show a schedule: its next five fire times (in its time zone and UTC) and its latest slots with their outcome",
		Args:      "ID",
		CheckArgs: oneID,
		JSON:      true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			fs.IntVar(&slots, "slots", 20, "show the latest `n` slots")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			if slots < 1 || slots > 1000 {
				return c.Usagef("--slots: want 1 to 1000, got %d", slots)
			}
			store, ss, err := m.scheduleStore(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			sc, err := ss.GetSchedule(ctx, c.Args[0])
			if err != nil {
				return err
			}
			sl, err := ss.ScheduleSlots(ctx, sc.ID, slots)
			if err != nil {
				return err
			}
			v, err := api.NewScheduleView(sc, sl)
			if err != nil {
				return err
			}
			if c.JSON {
				return c.PrintJSON(v)
			}
			return printSchedule(c, v)
		},
	}
}

// printSchedule prints schedule show's text.
func printSchedule(c *cli.Call, v api.ScheduleView) error {
	w := c.Stdout
	fmt.Fprintf(w, "Schedule %s\n", v.ID)
	tw := c.Table()
	f := v.Schedule.Fields
	fmt.Fprintf(tw, "  state\t%s\n", v.State())
	fmt.Fprintf(tw, "  project\t%s\n", v.Project)
	fmt.Fprintf(tw, "  when\t%s\n", v.When())
	fmt.Fprintf(tw, "  overlap\t%s\n", cmp.Or(f.Overlap, schedule.OverlapSkip))
	fmt.Fprintf(tw, "  catch up\t%s\n", cmp.Or(f.CatchUp, schedule.DefaultCatchUp.String()))
	if f.Jitter != "" {
		fmt.Fprintf(tw, "  jitter\t%s\n", f.Jitter)
	}
	if !f.End.IsZero() {
		fmt.Fprintf(tw, "  end\t%s\n", f.End.UTC().Format(time.RFC3339))
	}
	if v.BufferedAt != nil {
		fmt.Fprintf(tw, "  buffered slot\t%s\n", v.BufferedAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "  created\t%s by %s\n", v.CreatedAt.Format(timeFormat), v.CreatedBy)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nNext fire times:\n")
	tw = c.Table()
	fmt.Fprintln(tw, "  LOCAL\tUTC")
	for _, n := range v.Next {
		fmt.Fprintf(tw, "  %s\t%s\n", n.Local, n.At.UTC().Format(time.RFC3339))
	}
	if len(v.Next) == 0 {
		fmt.Fprintf(tw, "  -\t-\n")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nLatest slots:\n")
	tw = c.Table()
	fmt.Fprintln(tw, "  SLOT (UTC)\tOUTCOME\tJOBS\tDETAIL")
	for _, s := range v.Slots {
		outcome := s.Outcome
		if s.Count > 1 && s.Through != nil {
			outcome = fmt.Sprintf("%s ×%d (to %s)", s.Outcome, s.Count, s.Through.UTC().Format(time.RFC3339))
		}
		jobs := "-"
		if len(s.Jobs) > 0 {
			jobs = strings.Join(s.Jobs, ",")
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", s.ScheduledAt.UTC().Format(time.RFC3339), outcome, jobs, s.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printSlotPhones(c, v.Slots)
}

// printSlotPhones prints the jobs of the slots that have any, phone by
// phone: whether each ran, how late, or that it missed its slot.
func printSlotPhones(c *cli.Call, slots []api.SlotView) error {
	header := false
	tw := c.Table()
	for _, s := range slots {
		for _, p := range s.Phones {
			if !header {
				fmt.Fprintf(c.Stdout, "\nPhones of the slots:\n")
				fmt.Fprintln(tw, "  SLOT (UTC)\tPHONE\tJOB\tSTATUS\tRAN")
				header = true
			}
			ran := "not yet"
			switch {
			case p.StartedAt != nil && p.LateSeconds != nil:
				ran = "late by " + (time.Duration(*p.LateSeconds * float64(time.Second))).Round(time.Millisecond).String()
			case p.StartedAt != nil:
				ran = "yes"
			}
			if p.Missed {
				ran = "missed (" + ran + ")"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", s.ScheduledAt.UTC().Format(time.RFC3339), dash(p.Phone), p.Job, p.Status, ran)
		}
	}
	return tw.Flush()
}

// schedulePauseCommand pauses or resumes a schedule.
func (m *mgmt) schedulePauseCommand(pause bool) *cli.Command {
	name, summary := "schedule resume", "resume a paused schedule: it fires again from the first slot after now"
	if pause {
		name, summary = "schedule pause", "pause a schedule: no slot fires or is recorded missed until it is resumed"
	}
	return &cli.Command{
		Name: name, Summary: summary, Args: "ID", CheckArgs: oneID, Flags: m.flags,
		Run: func(ctx context.Context, c *cli.Call) error {
			store, ss, err := m.scheduleStore(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			sc, err := ss.GetSchedule(ctx, c.Args[0])
			if err != nil {
				return err
			}
			sc, err = api.PauseSchedule(ctx, store, sc, pause)
			if err != nil {
				return err
			}
			if pause {
				_, err = fmt.Fprintf(c.Stdout, "schedule %s paused\n", sc.ID)
				return err
			}
			next := "none"
			if !sc.NextAt.IsZero() {
				next = sc.NextAt.UTC().Format(time.RFC3339)
			}
			_, err = fmt.Fprintf(c.Stdout, "schedule %s resumed; next slot %s\n", sc.ID, next)
			return err
		},
	}
}

// scheduleDeleteCommand deletes a schedule.
func (m *mgmt) scheduleDeleteCommand() *cli.Command {
	return &cli.Command{
		Name: "schedule delete", Summary: "delete a schedule and its slots; the jobs it queued stay",
		Args: "ID", CheckArgs: oneID, Flags: m.flags,
		Run: func(ctx context.Context, c *cli.Call) error {
			store, ss, err := m.scheduleStore(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			if err := ss.DeleteSchedule(ctx, c.Args[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.Stdout, "schedule %s deleted\n", c.Args[0])
			return err
		},
	}
}

// scheduleBackfillCommand fires the past slots of a range.
func (m *mgmt) scheduleBackfillCommand() *cli.Command {
	var from, to string
	return &cli.Command{
		Name:      "schedule backfill",
		Summary:   "fire every slot of a schedule from --from to --to (past slots, at most 100) that has no outcome yet",
		Args:      "ID",
		CheckArgs: oneID,
		JSON:      true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			fs.StringVar(&from, "from", "", "first `time` of the range (RFC 3339)")
			fs.StringVar(&to, "to", "", "last `time` of the range (RFC 3339)")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			var rng [2]time.Time
			for i, v := range []struct{ flag, value string }{{"--from", from}, {"--to", to}} {
				if v.value == "" {
					return c.Usagef("%s is required", v.flag)
				}
				t, err := time.Parse(time.RFC3339, v.value)
				if err != nil {
					return c.Usagef("%s: %q is not an RFC 3339 time such as 2026-12-01T00:00:00Z", v.flag, v.value)
				}
				rng[i] = t
			}
			store, ss, err := m.scheduleStore(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			sc, err := ss.GetSchedule(ctx, c.Args[0])
			if err != nil {
				return err
			}
			o := api.SubmitOptions{Jobs: m.cfg.Jobs, OfflineAfter: m.cfg.Agents.OfflineAfter.Duration(), Phones: coordinator.NewPhoneRule(m.cfg.ProjectPhones())}
			slots, err := api.Backfill(ctx, store, sc, rng[0], rng[1], o)
			var se *api.SubmitError
			if errors.As(err, &se) {
				return c.Usagef("--%s", se.Error())
			}
			if err != nil {
				return err
			}
			if c.JSON {
				return c.PrintJSON(api.BackfillReply{Slots: slots})
			}
			tw := c.Table()
			fmt.Fprintln(tw, "SLOT (UTC)\tOUTCOME\tJOBS")
			for _, s := range slots {
				outcome := s.Outcome
				if s.Taken {
					outcome = "kept: " + s.Detail
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", s.ScheduledAt.UTC().Format(time.RFC3339), outcome, dash(strings.Join(s.Jobs, ",")))
			}
			return tw.Flush()
		},
	}
}
