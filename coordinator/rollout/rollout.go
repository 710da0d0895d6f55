// Package rollout is the coordinator's rollout loop (docs/releases.md):
// every interval it moves the running rollout through its steps, telling
// the agents of each step to update (protocol.ControlUpdate) and judging
// them by the version they say hello with and the update state they
// report. Every change goes through the store conditionally (an agent is
// claimed once, a step advanced once, a rollout paused once), so any
// number of coordinators may run the loop at once.
package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// DefaultInterval is the time between two passes.
const DefaultInterval = time.Second

// maxPresign is the longest validity of a presigned URL (seven days).
const maxPresign = 7 * 24 * time.Hour

// Options configure a Loop.
type Options struct {
	// Store must implement jobstore.ReleaseStore.
	Store jobstore.Store
	// PresignGet presigns a download of a key of the bucket; nil: no
	// storage, and every order fails.
	PresignGet func(ctx context.Context, key string, expiry time.Duration) (string, error)
	// PresignExpiry is the shortest validity of a download URL; it lasts
	// as long as the rollout's timeout when that is longer.
	PresignExpiry time.Duration
	// Push sends a control command to an agent and waits for its answer.
	Push func(ctx context.Context, agentID string, c protocol.Control) error
	// OfflineAfter judges which agents are online.
	OfflineAfter time.Duration
	// Interval is the time between two passes; default DefaultInterval.
	Interval time.Duration
	Log      zerolog.Logger
}

// Loop moves rollouts on.
type Loop struct {
	o  Options
	rs jobstore.ReleaseStore
}

// New returns the loop of o.
func New(o Options) (*Loop, error) {
	rs, ok := o.Store.(jobstore.ReleaseStore)
	if !ok {
		return nil, fmt.Errorf("rollouts: the store %T keeps no releases", o.Store)
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	return &Loop{o: o, rs: rs}, nil
}

// Run runs a pass every interval until ctx ends; a failed pass is logged
// and the next one tries again.
func (l *Loop) Run(ctx context.Context) error {
	t := time.NewTicker(l.o.Interval)
	defer t.Stop()
	for {
		if err := l.Pass(ctx); err != nil && ctx.Err() == nil {
			l.o.Log.Warn().Err(err).Msg("move rollouts on")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pass moves every running rollout on by what its agents did.
func (l *Loop) Pass(ctx context.Context) error {
	active, err := l.rs.ListRollouts(ctx, true)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range active {
		errs = append(errs, l.evaluate(ctx, r))
	}
	return errors.Join(errs...)
}

// dbNow is the database clock when the store reads it, else the local one.
func (l *Loop) dbNow(ctx context.Context) (time.Time, error) {
	if es, ok := l.o.Store.(jobstore.ExportStore); ok {
		return es.DatabaseNow(ctx)
	}
	return time.Now(), nil
}

// evaluate ends the agents of r that came back or failed (also while r
// is paused); when r runs, it pauses r after its max failures, advances
// it when its step is done and otherwise tells more agents to update.
func (l *Loop) evaluate(ctx context.Context, r jobstore.Rollout) error {
	now, err := l.dbNow(ctx)
	if err != nil {
		return err
	}
	v, err := Read(ctx, l.o.Store, r, l.o.OfflineAfter)
	if err != nil {
		return err
	}
	failed := 0
	for i := range v.Agents {
		a := &v.Agents[i]
		if a.Order == nil {
			continue
		}
		if a.Order.State == jobstore.RolloutAgentUpdating {
			if state, outcome := settle(r, *a, now); state != "" {
				ended, err := l.rs.EndRolloutAgent(ctx, jobstore.RolloutAgent{RolloutID: r.ID, AgentID: a.ID, State: state, Outcome: outcome})
				if err != nil {
					return err
				}
				if ended {
					a.Order.State, a.Order.Outcome = state, outcome
					l.o.Log.Info().Str("rollout", r.ID).Str("agent_id", a.ID).Str("state", state).Str("outcome", outcome).Msg("rollout agent ended")
				}
			}
		}
		if a.Order.State == jobstore.RolloutAgentFailed {
			failed++
		}
	}
	if r.State != jobstore.RolloutRunning {
		return nil
	}
	if r.MaxFailures > 0 && failed-r.FailureBase >= r.MaxFailures {
		reason := fmt.Sprintf("paused: %d agents failed to update (max failures %d)", failed-r.FailureBase, r.MaxFailures)
		_, err := l.rs.ChangeRollout(ctx, jobstore.RolloutChange{ID: r.ID, From: []string{jobstore.RolloutRunning}, To: jobstore.RolloutPaused, Reason: reason})
		if errors.Is(err, jobstore.ErrRolloutState) {
			return nil
		}
		if err == nil {
			l.o.Log.Warn().Str("rollout", r.ID).Int("failed", failed).Msg("rollout paused: too many agents failed")
		}
		return err
	}
	want := jobstore.StepTarget(r.Steps[r.Step], v.Eligible)
	covered, updating, rows := 0, 0, 0
	for _, a := range v.Agents {
		if a.Order != nil {
			rows++
			if a.Order.State == jobstore.RolloutAgentUpdating {
				updating++
			}
		}
		if a.Eligible && (a.Order != nil || a.Current) {
			covered++
		}
	}
	if covered >= want {
		if updating > 0 {
			return nil
		}
		_, err := l.rs.AdvanceRollout(ctx, r.ID, r.Step)
		if errors.Is(err, jobstore.ErrRolloutState) {
			return nil
		}
		if err == nil {
			l.o.Log.Info().Str("rollout", r.ID).Int("step", r.Step+1).Int("of", len(r.Steps)).Msg("rollout step done")
		}
		return err
	}
	// The claims are bounded by the rollout's rows: those there are and
	// those the step still wants.
	limit := rows + want - covered
	for _, a := range v.Agents {
		if covered >= want || ctx.Err() != nil {
			break
		}
		if !a.Eligible || a.Current || a.Order != nil || !a.Online {
			continue
		}
		ok, err := l.rs.StartRolloutAgent(ctx, jobstore.RolloutAgent{RolloutID: r.ID, AgentID: a.ID, Step: r.Step}, limit)
		if err != nil {
			return err
		}
		if !ok {
			return nil // another coordinator claimed meanwhile, or the rollout moved
		}
		covered++
		if outcome := jobstore.CutReason(l.order(ctx, r, v.Releases, a)); outcome != "" {
			if _, err := l.rs.EndRolloutAgent(ctx, jobstore.RolloutAgent{RolloutID: r.ID, AgentID: a.ID, State: jobstore.RolloutAgentFailed, Outcome: outcome}); err != nil {
				return err
			}
			l.o.Log.Warn().Str("rollout", r.ID).Str("agent_id", a.ID).Str("outcome", outcome).Msg("rollout agent failed")
		}
	}
	return nil
}

// settle judges an updating agent at now: done once it said hello with
// the rollout's version, failed when it reports that the update failed or
// when it did not come back within the timeout; "" while it is under way.
func settle(r jobstore.Rollout, a Agent, now time.Time) (state, outcome string) {
	if a.Current {
		// Told to update on another version: it said hello with this one
		// since.
		return jobstore.RolloutAgentDone, "running " + r.Version
	}
	if u := a.Update; u != nil && u.ReportedAt.After(a.Order.SentAt) &&
		(u.RolloutID == r.ID || (u.RolloutID == "" && jobstore.SameVersion(u.Target, r.Version))) {
		switch u.State {
		case protocol.UpdateRefused, protocol.UpdateFailed, protocol.UpdateRolledBack:
			out := u.State
			if u.Outcome != "" {
				out += ": " + u.Outcome
			}
			return jobstore.RolloutAgentFailed, out
		}
	}
	if now.Sub(a.Order.SentAt) > r.Timeout() {
		return jobstore.RolloutAgentFailed, fmt.Sprintf("did not come back with %s within %s", r.Version, r.Timeout())
	}
	return "", ""
}

// order tells agent a to update to r's version; the outcome of a failure
// to do so, "" when the agent took the order.
func (l *Loop) order(ctx context.Context, r jobstore.Rollout, rels []jobstore.ReleaseRecord, a Agent) string {
	rel, why := pickRelease(rels, a.Capabilities)
	if why != "" {
		return why
	}
	if l.o.PresignGet == nil {
		return "this coordinator has no storage configured to hand out the binary"
	}
	valid := min(max(l.o.PresignExpiry, r.Timeout()), maxPresign)
	u, err := l.o.PresignGet(ctx, jobstore.ReleaseObjectKey(rel.Version, rel.OS, rel.Arch), valid)
	if err != nil {
		l.o.Log.Error().Err(err).Str("rollout", r.ID).Msg("presign a release download")
		return "the download could not be presigned"
	}
	ctl := protocol.Control{Command: protocol.ControlUpdate, Update: &protocol.UpdateOrder{
		Release: rel.Release, URL: u, AllowDowngrade: r.AllowDowngrade, RolloutID: r.ID}}
	if err := l.o.Push(ctx, a.ID, ctl); err != nil {
		return "the agent did not take the update order: " + err.Error()
	}
	l.o.Log.Info().Str("rollout", r.ID).Str("agent_id", a.ID).Str("version", rel.Version).Str("platform", rel.OS+"/"+rel.Arch).Msg("agent told to update")
	return ""
}

// pickRelease is the binary of the release for the platform an agent
// announced, or why there is none. An agent that announces none gets the
// one binary of a release that has only one.
func pickRelease(rels []jobstore.ReleaseRecord, caps []string) (jobstore.ReleaseRecord, string) {
	goos, goarch, ok := protocol.AgentPlatform(caps)
	if !ok {
		if len(rels) == 1 {
			return rels[0], ""
		}
		return jobstore.ReleaseRecord{}, fmt.Sprintf("the agent announces no platform (capability %sOS/ARCH) and the release has %d binaries", protocol.CapabilityPlatformPrefix, len(rels))
	}
	for _, rel := range rels {
		if rel.OS == goos && rel.Arch == goarch {
			return rel, ""
		}
	}
	return jobstore.ReleaseRecord{}, fmt.Sprintf("the release has no binary for %s/%s", goos, goarch)
}

// Agent is an agent as a rollout sees it.
type Agent struct {
	ID           string   `json:"id"`
	Version      string   `json:"version"`
	Online       bool     `json:"online"`
	Capabilities []string `json:"-"`
	// Selected: the rollout's selector matches it.
	Selected bool `json:"selected"`
	// Eligible: selected, not opted out and, unless the rollout allows a
	// downgrade, not on a newer version.
	Eligible bool `json:"eligible"`
	// Current: it runs the rollout's version.
	Current bool `json:"current"`
	// Lagging: selected, not on the version and opted out of updates.
	Lagging bool `json:"lagging"`
	// Newer: on a version after the rollout's (left alone unless the
	// rollout allows a downgrade).
	Newer bool `json:"newer"`
	// Update is the update state it last reported; nil: none.
	Update *jobstore.AgentUpdate `json:"update,omitempty"`
	// Order is the rollout's order to it; nil: not told yet.
	Order *jobstore.RolloutAgent `json:"order,omitempty"`
}

// Status is the display word of the agent in the rollout.
func (a Agent) Status() string {
	switch {
	case a.Order != nil:
		return a.Order.State
	case a.Current:
		return "current"
	case a.Lagging:
		return "lagging"
	case a.Newer:
		return "newer"
	case a.Eligible:
		return "pending"
	}
	return "not selected"
}

// LastOutcome is what happened last: the order's outcome, else the
// agent's own report.
func (a Agent) LastOutcome() string {
	if a.Order != nil && a.Order.Outcome != "" {
		return a.Order.Outcome
	}
	if a.Update != nil {
		return a.Update.Outcome
	}
	return ""
}

// View is a rollout with its agents.
type View struct {
	jobstore.Rollout
	// Agents are the selected agents and those it told to update, by id.
	Agents []Agent `json:"agents"`
	// Eligible counts the agents its steps are shares of.
	Eligible int `json:"eligible"`
	// Releases are the binaries of its version.
	Releases []jobstore.ReleaseRecord `json:"-"`
}

// Counts of a view's agents by Status.
func (v View) Counts() map[string]int {
	n := map[string]int{}
	for _, a := range v.Agents {
		n[a.Status()]++
	}
	return n
}

// Read reads rollout r with its agents from the store.
func Read(ctx context.Context, store jobstore.Store, r jobstore.Rollout, offlineAfter time.Duration) (View, error) {
	rs, ok := store.(jobstore.ReleaseStore)
	if !ok {
		return View{}, fmt.Errorf("rollouts: the store %T keeps no releases", store)
	}
	pats, err := jobstore.ParseAgentSelector(r.Agents)
	if err != nil {
		return View{}, err
	}
	target, err := protocol.ParseVersion(r.Version)
	if err != nil {
		return View{}, err
	}
	agents, err := store.Agents(ctx)
	if err != nil {
		return View{}, err
	}
	ups, err := rs.AgentUpdates(ctx)
	if err != nil {
		return View{}, err
	}
	orders, err := rs.RolloutAgents(ctx, r.ID)
	if err != nil {
		return View{}, err
	}
	all, err := rs.ListReleases(ctx)
	if err != nil {
		return View{}, err
	}
	v := View{Rollout: r}
	for _, rel := range all {
		if rel.Version == r.Version {
			v.Releases = append(v.Releases, rel)
		}
	}
	byID := map[string]*Agent{}
	for _, ag := range agents {
		a := Agent{ID: ag.ID, Version: ag.Version, Online: ag.Online(offlineAfter), Capabilities: ag.Capabilities,
			Selected: jobstore.SelectorMatches(pats, ag.ID)}
		if pv, err := protocol.ParseVersion(ag.Version); err == nil {
			c := pv.Compare(target)
			a.Current, a.Newer = c == 0, c > 0
		}
		v.Agents = append(v.Agents, a)
	}
	for i := range v.Agents {
		byID[v.Agents[i].ID] = &v.Agents[i]
	}
	for _, u := range ups {
		if a := byID[u.AgentID]; a != nil {
			a.Update = &u
		}
	}
	var gone []Agent // told to update, no longer registered
	for _, o := range orders {
		if a := byID[o.AgentID]; a != nil {
			a.Order = &o
		} else {
			gone = append(gone, Agent{ID: o.AgentID, Order: &o})
		}
	}
	v.Agents = append(v.Agents, gone...)
	out := v.Agents[:0]
	for _, a := range v.Agents {
		optedOut := a.Update != nil && a.Update.State == protocol.UpdateOptedOut
		a.Lagging = a.Selected && !a.Current && optedOut
		a.Eligible = a.Selected && !optedOut && (!a.Newer || r.AllowDowngrade)
		if a.Eligible {
			v.Eligible++
		}
		if a.Selected || a.Order != nil {
			out = append(out, a)
		}
	}
	v.Agents = out
	slices.SortFunc(v.Agents, func(a, b Agent) int { return strings.Compare(a.ID, b.ID) })
	return v, nil
}
