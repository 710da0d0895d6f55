package protocol

import (
	"time"

	"github.com/edgeagent/edgeagent/fencing"
)

// VerbStep is the coordinator → agent verb that runs one step of a running
// job, on edge.v1.agent.<agent_id>.step.
const VerbStep = "step"

// StepRequest asks an agent to run one step of a running job, or to finish
// an interactive job. The agent runs it only while Token is the job's
// current token there.
type StepRequest struct {
	Token fencing.Token `json:"token"`
	// Step is the step to run; it may be left out (op "") when Finish is
	// set.
	Step Step `json:"step"`
	// Finish ends an interactive job after Step (if any): the agent uploads
	// the operation log and commits the result, then replies.
	Finish bool `json:"finish,omitempty"`
}

// Step outcomes.
const (
	OutcomeOK    = "ok"
	OutcomeError = "error"
)

// StepReply is the outcome of a StepRequest.
type StepReply struct {
	Seq        int     `json:"seq"` // 1-based step number within the job, as in the operation log
	Op         string  `json:"op,omitempty"`
	Outcome    string  `json:"outcome"` // ok or error
	Error      string  `json:"error,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	// Artifacts are the keys of the step's captures, uploaded and
	// registered under the token before the reply was sent.
	Artifacts []string `json:"artifacts,omitempty"`
	// Finished: the job's result was committed (Finish requests).
	Finished bool `json:"finished,omitempty"`
	// Manifest is the accepted result's manifest (Finish requests).
	Manifest []string `json:"manifest,omitempty"`
}

// AgentStatus is the reply to a control status command and the document
// served by the agent's local status endpoint. Fields may be added.
type AgentStatus struct {
	AgentID  string            `json:"agent_id"`
	BootID   string            `json:"boot_id"`
	Owner    string            `json:"owner"`
	Version  string            `json:"version"`
	Started  time.Time         `json:"started"`
	State    string            `json:"state"` // running, draining, shutting_down, stopped
	Slots    int               `json:"slots"`
	Free     int               `json:"free"`
	Settings map[string]string `json:"settings,omitempty"`

	Connection AgentConnection `json:"connection"`
	Jobs       []AgentJob      `json:"jobs"`
	Phones     []AgentPhone    `json:"phones"`
	Stops      []AgentStop     `json:"recent_stops,omitempty"`
	Errors     []AgentError    `json:"last_errors,omitempty"`
	// Update is the agent's self-update state (docs/updates.md), absent
	// when it has none.
	Update *UpdateStatus `json:"update,omitempty"`
}

// AgentConnection is the agent's view of its link to the coordinator.
type AgentConnection struct {
	NATSConnected bool      `json:"nats_connected"`
	Server        string    `json:"server,omitempty"` // URL without credentials
	HelloAccepted bool      `json:"hello_accepted"`
	CoordinatorID string    `json:"coordinator_id,omitempty"`
	LastHello     time.Time `json:"last_hello,omitzero"`
	LastHeartbeat time.Time `json:"last_heartbeat,omitzero"`
	LeaseTTLMS    int64     `json:"lease_ttl_ms,omitempty"`
	// ClockOffsetMS is the coordinator's clock minus the agent's, estimated
	// from the last hello (display only).
	ClockOffsetMS int64 `json:"clock_offset_ms"`
}

// AgentJob is a running job.
type AgentJob struct {
	Token       fencing.Token `json:"token"`
	Started     time.Time     `json:"started"`
	Step        int           `json:"step"`  // steps run so far
	Steps       int           `json:"steps"` // fixed steps of the task
	Current     string        `json:"current,omitempty"`
	Interactive bool          `json:"interactive,omitempty"`
	Phone       string        `json:"phone,omitempty"`
	Leased      bool          `json:"leased"` // the first renewal was accepted
	LeaseLeftMS int64         `json:"lease_left_ms"`
}

// AgentPhone is a phone and whether a job holds it.
type AgentPhone struct {
	Device
	Busy bool `json:"busy,omitempty"`
}

// AgentStop is one recorded stop of a job.
type AgentStop struct {
	Token    fencing.Token `json:"token"`
	Cause    string        `json:"cause"`
	At       time.Time     `json:"at"`
	CutShort string        `json:"cut_short,omitempty"`
}

// AgentError is a recent error the agent logged.
type AgentError struct {
	At    time.Time `json:"at"`
	What  string    `json:"what"`
	Error string    `json:"error"`
	JobID string    `json:"job_id,omitempty"`
}
