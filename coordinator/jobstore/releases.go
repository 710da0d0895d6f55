package jobstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

// Releases of the agent binary and staged rollouts of them
// (docs/releases.md).

var (
	// ErrReleaseNotFound: no release of that version, OS and architecture.
	ErrReleaseNotFound = errors.New("release not found")
	// ErrReleaseConflict: a release of that version, OS and architecture is
	// recorded with another digest.
	ErrReleaseConflict = errors.New("release conflict")
	// ErrRolloutNotFound: no rollout with that id.
	ErrRolloutNotFound = errors.New("rollout not found")
	// ErrRolloutActive: another rollout is running or paused.
	ErrRolloutActive = errors.New("another rollout is active")
	// ErrRolloutState: the rollout is not in a state the change applies to.
	ErrRolloutState = errors.New("rollout state conflict")
)

// ReleaseRecord is a signed agent binary the operator added: its object is
// ReleaseObjectKey of it in the coordinator's bucket.
type ReleaseRecord struct {
	protocol.Release
	// AddedAt is when it was recorded, by the database clock.
	AddedAt time.Time `json:"added_at"`
	// AddedBy is the API token's name that added it.
	AddedBy string `json:"added_by"`
}

// ReleaseObjectKey is where a release's binary is in the bucket:
// releases/<version>/<os>-<arch>/edgeagent, .exe on Windows.
func ReleaseObjectKey(version, goos, goarch string) string {
	name := "edgeagent"
	if goos == "windows" {
		name += ".exe"
	}
	return "releases/" + version + "/" + goos + "-" + goarch + "/" + name
}

// CanonicalVersion is v in the form releases are recorded with (leading v).
func CanonicalVersion(v string) (string, error) {
	pv, err := protocol.ParseVersion(v)
	if err != nil {
		return "", err
	}
	return pv.String(), nil
}

// SameVersion reports whether a and b are the same release version; an
// agent version that is none (a dev build) is no release's.
func SameVersion(a, b string) bool {
	va, err1 := protocol.ParseVersion(a)
	vb, err2 := protocol.ParseVersion(b)
	return err1 == nil && err2 == nil && va.Compare(vb) == 0
}

// Limits of the release and rollout lists.
const (
	MaxReleaseList = 1000
	MaxRolloutList = 100
)

// AgentUpdate is the update state an agent last reported (hello or
// heartbeat), with the database time of the report.
type AgentUpdate struct {
	AgentID string `json:"agent_id"`
	protocol.UpdateStatus
	ReportedAt time.Time `json:"reported_at"`
}

// Bounds of what an agent reports of its update state: longer text is cut.
const (
	maxUpdateOutcome = 512
	maxUpdateField   = 64
)

var updateStates = map[string]bool{
	protocol.UpdateIdle: true, protocol.UpdateDraining: true, protocol.UpdateDownloading: true,
	protocol.UpdateRestarting: true, protocol.UpdateDone: true, protocol.UpdateRefused: true,
	protocol.UpdateFailed: true, protocol.UpdateRolledBack: true, protocol.UpdateOptedOut: true,
}

// CleanUpdateStatus checks the state an agent reports and cuts its text to
// the stored bounds.
func CleanUpdateStatus(st protocol.UpdateStatus) (protocol.UpdateStatus, error) {
	if !updateStates[st.State] {
		return st, fmt.Errorf("update.state: %.20q is not an update state", st.State)
	}
	st.Target = cutText(st.Target, maxUpdateField)
	st.RolloutID = cutText(st.RolloutID, maxUpdateField)
	st.Outcome = cutText(st.Outcome, maxUpdateOutcome)
	return st, nil
}

// cutText cuts s to at most n bytes of valid UTF-8.
func cutText(s string, n int) string {
	if len(s) <= n {
		return strings.ToValidUTF8(s, "")
	}
	return strings.ToValidUTF8(s[:n], "")
}

// Rollout states.
const (
	RolloutRunning   = "running"
	RolloutPaused    = "paused"
	RolloutAborted   = "aborted"
	RolloutCompleted = "completed"
)

// States of an agent in a rollout.
const (
	RolloutAgentUpdating = "updating" // told to update, not back yet
	RolloutAgentDone     = "done"     // said hello with the rollout's version
	RolloutAgentFailed   = "failed"   // refused, failed, rolled back or did not come back in time
)

// Rollout is a staged update of the agents matching Agents to Version.
type Rollout struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	// Agents selects the agents (ParseAgentSelector); "" all of them.
	Agents string `json:"agents"`
	// Steps are the shares of the agents updated by the end of each step,
	// in percent, ascending, the last 100.
	Steps []int `json:"steps"`
	// MaxFailures pauses the rollout once that many agents failed since it
	// started or was last resumed; 0 never.
	MaxFailures    int  `json:"max_failures"`
	AllowDowngrade bool `json:"allow_downgrade"`
	// TimeoutMS is how long an agent has to come back with the version
	// once told to update.
	TimeoutMS int64  `json:"timeout_ms"`
	State     string `json:"state"`
	// Step is the index in Steps of the step under way.
	Step int `json:"step"`
	// Reason says why the rollout is paused, aborted or completed.
	Reason string `json:"reason,omitempty"`
	// FailureBase is the failures counted when it was last resumed.
	FailureBase int       `json:"failure_base"`
	CreatedBy   string    `json:"created_by"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Active reports whether the rollout is running or paused.
func (r Rollout) Active() bool { return r.State == RolloutRunning || r.State == RolloutPaused }

// Timeout is TimeoutMS as a duration.
func (r Rollout) Timeout() time.Duration { return time.Duration(r.TimeoutMS) * time.Millisecond }

// Bounds of a rollout.
const (
	MaxRolloutSteps    = 10
	MaxRolloutFailures = 100000
	MinRolloutTimeout  = time.Second
	MaxRolloutTimeout  = 7 * 24 * time.Hour
	maxRolloutReason   = 1024
)

// Validate checks a rollout to create; errors start with the field's name.
func (r Rollout) Validate() error {
	if err := CheckRolloutID(r.ID); err != nil {
		return err
	}
	if v, err := CanonicalVersion(r.Version); err != nil {
		return fmt.Errorf("version: %w", err)
	} else if v != r.Version {
		return fmt.Errorf("version: %q: write it as %s", r.Version, v)
	}
	if _, err := ParseAgentSelector(r.Agents); err != nil {
		return err
	}
	if err := CheckRolloutSteps(r.Steps); err != nil {
		return err
	}
	if r.MaxFailures < 0 || r.MaxFailures > MaxRolloutFailures {
		return fmt.Errorf("max_failures: %d, want 0 (never pause) to %d", r.MaxFailures, MaxRolloutFailures)
	}
	if t := r.Timeout(); t < MinRolloutTimeout || t > MaxRolloutTimeout {
		return fmt.Errorf("timeout: %s, want %s to %s", t, MinRolloutTimeout, MaxRolloutTimeout)
	}
	return nil
}

// CheckRolloutID checks a rollout id: 1 to 64 of [A-Za-z0-9._-].
func CheckRolloutID(id string) error {
	if id == "" || len(id) > 64 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
		return fmt.Errorf("id: %.70q is not a rollout id (1 to 64 of A-Z a-z 0-9 . _ -)", id)
	}
	return nil
}

// CheckRolloutSteps checks the steps of a rollout.
func CheckRolloutSteps(steps []int) error {
	if len(steps) == 0 || len(steps) > MaxRolloutSteps {
		return fmt.Errorf("steps: %d steps, want 1 to %d", len(steps), MaxRolloutSteps)
	}
	prev := 0
	for i, p := range steps {
		if p <= prev || p > 100 {
			return fmt.Errorf("steps[%d]: %d%%: want ascending shares from 1%% to 100%%", i, p)
		}
		prev = p
	}
	if prev != 100 {
		return fmt.Errorf("steps: the last step is %d%%, want 100%%", prev)
	}
	return nil
}

// ParseRolloutSteps reads steps written as 5%,25%,100% (the % optional).
func ParseRolloutSteps(s string) ([]int, error) {
	var out []int
	for i, f := range strings.Split(s, ",") {
		if i >= MaxRolloutSteps {
			return nil, fmt.Errorf("steps: more than %d steps", MaxRolloutSteps)
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(f), "%"))
		if err != nil {
			return nil, fmt.Errorf("steps[%d]: %.20q is not a share in percent such as 25%%", i, f)
		}
		out = append(out, n)
	}
	return out, CheckRolloutSteps(out)
}

// FormatRolloutSteps writes steps as 5%,25%,100%.
func FormatRolloutSteps(steps []int) string {
	parts := make([]string, len(steps))
	for i, p := range steps {
		parts[i] = strconv.Itoa(p) + "%"
	}
	return strings.Join(parts, ",")
}

// StepTarget is how many of n agents a step of pct percent covers: at
// least one while there is any.
func StepTarget(pct, n int) int {
	return min(n, int(math.Ceil(float64(pct)*float64(n)/100)))
}

// Bounds of an agent selector.
const (
	maxSelectorLen      = 1024
	maxSelectorPatterns = 64
)

// ParseAgentSelector reads the agents a rollout selects: agent ids or
// shell patterns (pc-*, lab-?), comma-separated; "" selects every agent.
func ParseAgentSelector(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	if len(s) > maxSelectorLen {
		return nil, fmt.Errorf("agents: %d characters, at most %d", len(s), maxSelectorLen)
	}
	pats := strings.Split(s, ",")
	if len(pats) > maxSelectorPatterns {
		return nil, fmt.Errorf("agents: %d patterns, at most %d", len(pats), maxSelectorPatterns)
	}
	for i, p := range pats {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, fmt.Errorf("agents: pattern %d is empty", i+1)
		}
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("agents: %.70q is not an agent id or pattern: %v", p, err)
		}
		pats[i] = p
	}
	return pats, nil
}

// SelectorMatches reports whether agent id matches the patterns of
// ParseAgentSelector (none: every agent).
func SelectorMatches(pats []string, id string) bool {
	if len(pats) == 0 {
		return true
	}
	for _, p := range pats {
		if ok, _ := path.Match(p, id); ok {
			return true
		}
	}
	return false
}

// RolloutAgent is an agent a rollout told to update, and how it went.
type RolloutAgent struct {
	RolloutID string    `json:"rollout_id"`
	AgentID   string    `json:"agent_id"`
	Step      int       `json:"step"`
	State     string    `json:"state"`
	Outcome   string    `json:"outcome,omitempty"`
	SentAt    time.Time `json:"sent_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
}

// RolloutChange moves a rollout from one of From to To, with the reason.
type RolloutChange struct {
	ID     string
	From   []string
	To     string
	Reason string
	// ResetFailures counts the failures so far as the base of max_failures
	// (a resume).
	ResetFailures bool
}

// CutReason bounds a stored reason or outcome.
func CutReason(s string) string { return cutText(s, maxRolloutReason) }

// ReleaseStore keeps releases, the update states agents report and
// rollouts. Stores implement it beside Store; the conformance suite
// (coordinator/storetest) checks both.
type ReleaseStore interface {
	// AddRelease records r (AddedAt by the database clock) and returns it
	// with created true. The same version, OS and architecture recorded
	// with the same digest is returned as recorded with created false;
	// with another digest, ErrReleaseConflict.
	AddRelease(ctx context.Context, r ReleaseRecord) (rec ReleaseRecord, created bool, err error)
	// GetRelease returns a release; ErrReleaseNotFound otherwise.
	GetRelease(ctx context.Context, version, goos, goarch string) (ReleaseRecord, error)
	// ListReleases lists releases newest first, at most MaxReleaseList.
	ListReleases(ctx context.Context) ([]ReleaseRecord, error)

	// SetAgentUpdate records the update state an agent reported
	// (CleanUpdateStatus first).
	SetAgentUpdate(ctx context.Context, agentID string, st protocol.UpdateStatus) error
	// AgentUpdates returns the last update state of every agent that
	// reported one.
	AgentUpdates(ctx context.Context) ([]AgentUpdate, error)

	// CreateRollout records r in state running at step 0 (the times by
	// the database clock); ErrRolloutActive while another is running or
	// paused, ErrConflict when the id is taken.
	CreateRollout(ctx context.Context, r Rollout) (Rollout, error)
	// GetRollout returns a rollout; ErrRolloutNotFound otherwise.
	GetRollout(ctx context.Context, id string) (Rollout, error)
	// ListRollouts lists rollouts newest first, at most MaxRolloutList;
	// with active, only the running and paused ones.
	ListRollouts(ctx context.Context, active bool) ([]Rollout, error)
	// ChangeRollout applies c when the rollout's state is one of c.From;
	// ErrRolloutState otherwise, ErrRolloutNotFound for an unknown id.
	ChangeRollout(ctx context.Context, c RolloutChange) (Rollout, error)
	// AdvanceRollout moves a running rollout at step on to the next step,
	// or completes it after its last; ErrRolloutState when it is not
	// running at step (another coordinator moved it).
	AdvanceRollout(ctx context.Context, id string, step int) (Rollout, error)

	// RolloutAgents lists the agents a rollout told to update.
	RolloutAgents(ctx context.Context, id string) ([]RolloutAgent, error)
	// StartRolloutAgent records that a.AgentID is told to update in step
	// a.Step (state updating, SentAt by the database clock) when the
	// rollout is running at that step, the agent is not recorded yet and
	// the rollout has fewer than limit agents: the claim that makes one
	// coordinator, not several, send the order. false otherwise.
	StartRolloutAgent(ctx context.Context, a RolloutAgent, limit int) (bool, error)
	// EndRolloutAgent sets an updating agent to a.State (done or failed)
	// with a.Outcome; false when it is not updating.
	EndRolloutAgent(ctx context.Context, a RolloutAgent) (bool, error)
}
