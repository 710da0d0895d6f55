package jobstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"
)

// ErrUISessionNotFound: no dashboard session has that hash, or it expired.
var ErrUISessionNotFound = errors.New("dashboard session not found or expired")

// Dashboard actions recorded with who did them (docs/ui.md, "Actions").
const (
	UIActionDrain   = "drain"
	UIActionResume  = "resume"
	UIActionCancel  = "cancel"
	UIActionResolve = "resolve"
	// UIActionPauseSchedule and UIActionResumeSchedule: a schedule paused
	// or resumed (docs/schedules.md); Target is its id.
	UIActionPauseSchedule  = "pause_schedule"
	UIActionResumeSchedule = "resume_schedule"
)

// UISession is a dashboard login: an API token exchanged for a session
// cookie. Only the SHA-256 of the cookie's secret is stored.
type UISession struct {
	Hash      [sha256.Size]byte
	TokenID   int64
	CreatedAt time.Time // database clock
	ExpiresAt time.Time // database clock
}

// UIAction is an action taken on the dashboard, with the name of the API
// token of the person who took it.
type UIAction struct {
	ID        int64
	TokenName string
	Action    string // UIActionDrain, UIActionResume, UIActionCancel, UIActionResolve
	Target    string // the agent id, job id or effect key acted on
	JobID     string // the job concerned, "" for an agent
	Detail    string // the reason, the decision
	At        time.Time
}

// UIActionFilter selects recorded actions; zero fields select everything.
type UIActionFilter struct {
	Target string
	JobID  string
	Limit  int // the newest this many, oldest first; ≤ 0 means 100
}

// PhoneRef names one phone of one agent.
type PhoneRef struct {
	AgentID string
	Serial  string
}

// PhoneScreen is the newest image artifact registered by a job on a phone:
// the dashboard's thumbnail of it, kept by RegisterArtifact (migration 0009,
// table phone_screens).
type PhoneScreen struct {
	PhoneRef
	JobID       string
	Project     string
	Generation  int64
	Name        string
	ContentType string
	At          time.Time // when the artifact was registered (database clock)
}

// RunningJob is a job in progress as the fleet page shows it: which agent
// and phone run it.
type RunningJob struct {
	ID       string
	Project  string
	WorkerID string // <agent id>/<boot id>
	Device   string // the phone's serial, "" when none was named
}

// UIStore is what the web dashboard keeps (migration 0009): its login
// sessions and the actions taken on it, and the one query it needs beyond
// the API's. Both stores implement it.
type UIStore interface {
	// CreateUISession stores a session of the token tokenID that expires
	// ttl from now on the database clock, and deletes the expired ones.
	CreateUISession(ctx context.Context, hash [sha256.Size]byte, tokenID int64, ttl time.Duration) (UISession, error)
	// UISession returns the unexpired session with that hash and its API
	// token (revoked or not); ErrUISessionNotFound otherwise.
	UISession(ctx context.Context, hash [sha256.Size]byte) (UISession, APIToken, error)
	// DeleteUISession deletes the session with that hash, if any.
	DeleteUISession(ctx context.Context, hash [sha256.Size]byte) error
	// RecordUIAction records an action.
	RecordUIAction(ctx context.Context, a UIAction) error
	// UIActions lists the recorded actions f selects, oldest first.
	UIActions(ctx context.Context, f UIActionFilter) ([]UIAction, error)
	// PhoneScreens returns, for each of phones, the newest image artifact
	// registered by a job that ran on it (on that agent), when that job is
	// of projects (nil: every project) and still at the generation that
	// registered it. Phones without one, or whose newest one is of another
	// project or of a generation the job has left, are left out.
	PhoneScreens(ctx context.Context, phones []PhoneRef, projects []string) ([]PhoneScreen, error)
	// RunningJobs lists every job IN_PROGRESS, of every project, with only
	// the columns the fleet page needs (no task or result to decode).
	RunningJobs(ctx context.Context) ([]RunningJob, error)
	// FleetAgents is Agents for the fleet page: each agent's device list
	// is left undecoded, as stored (FleetAgent.DevicesJSON), so that the
	// dashboard decodes only the lists that changed since its last render
	// (coordinator/ui, DeviceMemo).
	FleetAgents(ctx context.Context) ([]FleetAgent, error)
}

// FleetAgent is an agent as FleetAgents reads it: Agent with Devices nil,
// and the stored JSON of its device list.
type FleetAgent struct {
	Agent
	DevicesJSON []byte
}
