package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/protocol"
)

// effectView is an effect as printed with --json.
type effectView struct {
	Key        string `json:"key"`
	Kind       string `json:"kind"`
	State      string `json:"state"`
	JobID      string `json:"job_id"`
	Step       int    `json:"step,omitempty"`
	Op         string `json:"op,omitempty"`
	Owner      string `json:"owner"`
	Generation int64  `json:"generation"`
	// Evidence are the artifact keys that show what happened: those
	// recorded with the intent by generations that met it in doubt, then
	// the artifacts the reserving generation registered before it lost its
	// lease (the screenshot and UI dump after the step, the operation log).
	Evidence     []string        `json:"evidence"`
	Receipt      json.RawMessage `json:"receipt,omitempty"`
	Payload      json.RawMessage `json:"payload,omitempty"`
	Attempts     int             `json:"attempts,omitempty"`
	LastError    string          `json:"last_error,omitempty"`
	Reservations int             `json:"reservations,omitempty"`
	Resolution   string          `json:"resolution,omitempty"`
	Note         string          `json:"note,omitempty"`
	JobStatus    string          `json:"job_status,omitempty"`
	FailReason   string          `json:"job_fail_reason,omitempty"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
	DoneAt       *time.Time      `json:"done_at,omitempty"`
}

// newEffectView completes r with its evidence and its job's state.
func newEffectView(ctx context.Context, store jobstore.Store, r jobstore.EffectRecord) (effectView, error) {
	v := effectView{
		Key: r.Key, Kind: r.Kind, State: r.State, JobID: r.JobID, Step: r.Step, Op: r.Op, Owner: r.Owner,
		Generation: r.Generation, Evidence: append([]string{}, r.Evidence...), Receipt: r.Receipt, Payload: r.Payload,
		Attempts: r.Attempts, LastError: r.LastError, Reservations: r.Reservations, Resolution: r.Resolution,
		Note: r.Note, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if !r.DoneAt.IsZero() {
		t := r.DoneAt
		v.DoneAt = &t
	}
	if r.Kind == jobstore.EffectKindStep {
		arts, err := store.Artifacts(ctx, r.JobID, r.Generation)
		if err != nil {
			return effectView{}, err
		}
		for _, a := range arts {
			if !slices.Contains(v.Evidence, a.Key) {
				v.Evidence = append(v.Evidence, a.Key)
			}
		}
	}
	j, err := store.Get(ctx, r.JobID)
	if err != nil {
		return effectView{}, err
	}
	v.JobStatus, v.FailReason = j.Status, j.FailReason
	return v, nil
}

// effectCommands are "effect list|show|resolve".
func (m *mgmt) effectCommands() []*cli.Command {
	return []*cli.Command{m.effectListCommand(), m.effectShowCommand(), m.effectResolveCommand()}
}

// effectListCommand lists effects.
func (m *mgmt) effectListCommand() *cli.Command {
	var (
		state, job, kind string
		limit            int
	)
	return &cli.Command{
		Name:    "effect list",
		Summary: "list effect intents and outbox messages, oldest first, with the evidence of those in doubt",
		JSON:    true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			fs.StringVar(&state, "state", "", "only effects in these `states` (comma-separated: reserved, done, in_doubt, retry, pending)")
			fs.StringVar(&job, "job", "", "only effects of job `id`")
			fs.StringVar(&kind, "kind", "", "only effects of this `kind` (step or outbox)")
			fs.IntVar(&limit, "limit", 0, "at most `n` effects (0: all)")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			f := jobstore.EffectFilter{JobID: job, Kind: kind, Limit: limit}
			for _, st := range strings.Split(state, ",") {
				if st = strings.ToLower(strings.TrimSpace(st)); st != "" {
					switch st {
					case protocol.EffectReserved, protocol.EffectDone, protocol.EffectInDoubt, protocol.EffectRetry, protocol.EffectPending:
					default:
						return c.Usagef("unknown state %q", st)
					}
					f.States = append(f.States, st)
				}
			}
			if kind != "" && kind != jobstore.EffectKindStep && kind != jobstore.EffectKindOutbox {
				return c.Usagef("unknown kind %q", kind)
			}
			store, err := m.open(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			recs, err := store.ListEffects(ctx, f)
			if err != nil {
				return err
			}
			views := make([]effectView, 0, len(recs))
			for _, r := range recs {
				v, err := newEffectView(ctx, store, r)
				if err != nil {
					return err
				}
				views = append(views, v)
			}
			if c.JSON {
				return c.PrintJSON(views)
			}
			now := m.now()
			tw := c.Table()
			fmt.Fprintln(tw, "KEY\tKIND\tSTATE\tJOB\tSTEP\tHOLDER\tAGE\tNOTE")
			for _, v := range views {
				step := "-"
				if v.Step > 0 {
					step = fmt.Sprintf("%d (%s)", v.Step, v.Op)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s#g%d\t%s\t%s\n", v.Key, v.Kind, v.State, v.JobID, step, v.Owner, v.Generation,
					age(now, v.CreatedAt), v.note())
			}
			return tw.Flush()
		},
	}
}

// note says what a person may want to know about an effect at a glance.
func (v effectView) note() string {
	switch {
	case v.State == protocol.EffectInDoubt:
		return fmt.Sprintf("needs a decision: %d evidence; edgecoord effect show %s", len(v.Evidence), v.Key)
	case v.Kind == jobstore.EffectKindOutbox && v.State == protocol.EffectPending && v.LastError != "":
		return fmt.Sprintf("%d attempts, last: %s", v.Attempts, v.LastError)
	case v.Kind == jobstore.EffectKindOutbox && v.State == protocol.EffectPending:
		return fmt.Sprintf("%d attempts", v.Attempts)
	case v.Resolution != "":
		return "resolved " + v.Resolution + " by a person" + strings.TrimSuffix(": "+v.Note, ": ")
	}
	return ""
}

// effectShowCommand shows one effect with its evidence.
func (m *mgmt) effectShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "effect show",
		Summary:   "show an effect: its state, receipt, and the evidence captured so far",
		Args:      "KEY",
		CheckArgs: cli.ExactArgs(1, "KEY"),
		JSON:      true,
		Flags:     m.flags,
		Run: func(ctx context.Context, c *cli.Call) error {
			store, err := m.open(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			r, err := store.GetEffect(ctx, c.Args[0])
			if err != nil {
				return err
			}
			v, err := newEffectView(ctx, store, r)
			if err != nil {
				return err
			}
			if c.JSON {
				return c.PrintJSON(v)
			}
			return printEffect(c, v)
		},
	}
}

// printEffect prints effect show's text.
func printEffect(c *cli.Call, v effectView) error {
	w := c.Stdout
	fmt.Fprintf(w, "Effect %s\n", v.Key)
	tw := c.Table()
	fmt.Fprintf(tw, "  kind\t%s\n", v.Kind)
	fmt.Fprintf(tw, "  state\t%s\n", v.State)
	fmt.Fprintf(tw, "  job\t%s (%s%s)\n", v.JobID, v.JobStatus, strings.TrimSuffix(": "+v.FailReason, ": "))
	if v.Step > 0 {
		fmt.Fprintf(tw, "  step\t%d (%s)\n", v.Step, v.Op)
	}
	fmt.Fprintf(tw, "  holder\t%s generation %d\n", v.Owner, v.Generation)
	if v.Reservations > 1 {
		fmt.Fprintf(tw, "  reservations\t%d\n", v.Reservations)
	}
	if v.Attempts > 0 {
		fmt.Fprintf(tw, "  attempts\t%d\n", v.Attempts)
	}
	if v.LastError != "" {
		fmt.Fprintf(tw, "  last error\t%s\n", v.LastError)
	}
	if v.Resolution != "" {
		fmt.Fprintf(tw, "  resolution\t%s\n", v.Resolution)
	}
	if v.Note != "" {
		fmt.Fprintf(tw, "  note\t%s\n", v.Note)
	}
	if len(v.Receipt) > 0 {
		fmt.Fprintf(tw, "  receipt\t%s\n", v.Receipt)
	}
	fmt.Fprintf(tw, "  created\t%s\n", v.CreatedAt.Format(timeFormat))
	fmt.Fprintf(tw, "  updated\t%s\n", v.UpdatedAt.Format(timeFormat))
	if v.DoneAt != nil {
		fmt.Fprintf(tw, "  done\t%s\n", v.DoneAt.Format(timeFormat))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if v.Kind == jobstore.EffectKindStep {
		fmt.Fprintf(w, "\nEvidence:\n")
		if len(v.Evidence) == 0 {
			fmt.Fprintln(w, "  (none)")
		}
		for _, k := range v.Evidence {
			fmt.Fprintf(w, "  %s\n", k)
		}
	}
	if v.State == protocol.EffectInDoubt {
		fmt.Fprintf(w, "\nNobody knows whether this effect happened; it is not run again until a person decides:\n"+
			"  edgecoord effect resolve %s --done    it happened: later generations skip the step\n"+
			"  edgecoord effect resolve %s --retry   it did not happen: the next generation runs it\n", v.Key, v.Key)
	}
	return nil
}

// effectResolveCommand records a person's decision on an effect in doubt.
func (m *mgmt) effectResolveCommand() *cli.Command {
	var (
		done, retry bool
		note        string
	)
	return &cli.Command{
		Name:      "effect resolve",
		Summary:   "decide an effect in doubt: --done (it happened) or --retry (it did not); its job is queued again",
		Args:      "KEY",
		CheckArgs: cli.ExactArgs(1, "KEY"),
		JSON:      true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			fs.BoolVar(&done, "done", false, "the effect happened: later generations skip the step and reuse this decision as the receipt")
			fs.BoolVar(&retry, "retry", false, "the effect did not happen: the next generation reserves it again and runs the step")
			fs.StringVar(&note, "note", "", "what the decision rests on (`text`), kept with the effect")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			if done == retry {
				return c.Usagef("give exactly one of --done and --retry")
			}
			decision := jobstore.ResolveRetry
			if done {
				decision = jobstore.ResolveDone
			}
			store, err := m.open(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			r, requeued, err := store.ResolveEffect(ctx, c.Args[0], decision, note)
			if err != nil {
				return err
			}
			v, err := newEffectView(ctx, store, r)
			if err != nil {
				return err
			}
			if c.JSON {
				return c.PrintJSON(struct {
					effectView
					Requeued bool `json:"job_requeued"`
				}{v, requeued})
			}
			fmt.Fprintf(c.Stdout, "effect %s resolved %s", r.Key, decision)
			if requeued {
				fmt.Fprintf(c.Stdout, "; job %s queued again", r.JobID)
			}
			_, err = fmt.Fprintln(c.Stdout)
			return err
		},
	}
}
