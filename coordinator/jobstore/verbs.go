package jobstore

// Verbs recorded in write_events. Every attempt of a fenced write or a grant
// is one row, accepted or not.
//
//   - claim, reassign: owner and generation of the grant (the new generation
//     when accepted, the job's current one when refused).
//   - reclaim: the token taken away (old owner, old generation).
//   - renew, upload, artifact, result, fail, observe: the token presented
//     (observe: observations a session recorded, RecordObservations).
//   - cancel: the token taken away (owner "" and the job's generation when
//     the job was queued).
//   - timeout: the token taken away by ExpireDeadlines (owner "" when the
//     job was queued), class job, cause deadline.
//
// The rows that end an attempt (fail, reclaim, timeout) carry its class
// (protocol.FailClass*) and cause (protocol.Cause*).
//   - result_unfenced: the lab-only UnfencedCommit; generation 0, since it
//     carries no token.
//
// A takeover of an expired lease (TakeOverExpired) is recorded as two rows of
// one statement: reclaim (the old token) and reassign (the new one). An
// attempt refused before it reached the store (a 403) is recorded under its
// verb, not accepted, with a detail saying why.
const (
	VerbClaim          = "claim"
	VerbReassign       = "reassign"
	VerbReclaim        = "reclaim"
	VerbRenew          = "renew"
	VerbArtifact       = "artifact"
	VerbResult         = "result"
	VerbFail           = "fail"
	VerbUpload         = "upload"
	VerbCancel         = "cancel"
	VerbTimeout        = "timeout"
	VerbResultUnfenced = "result_unfenced"
)

// Verbs recorded in write_events for effects.
//
//   - effect: an effect request of an agent (reserve, receipt, evidence),
//     fenced by the token presented, with the detail "<action> <key>: <state>"
//     ("refused" when the token was not current).
//   - resolve: a person's decision on an intent in doubt (edgecoord effect
//     resolve), recorded under the intent's job with owner "" and the job's
//     generation, detail "<key>: <decision>".
const (
	VerbEffect  = "effect"
	VerbResolve = "resolve"
)

// VerbObserve is recorded in write_events for every RecordObservations
// call: observations an AI session recorded under the token presented
// (ObservationStore), accepted or refused. It is no job event.
const VerbObserve = "observe"

// Verbs recorded in write_events that are job events but no fenced write:
// the submit of a job and a step of an interactive session.
const (
	VerbSubmit = "submit"
	VerbStep   = "step"
)

// NonEventVerbs are the write_events verbs that never make a job event:
// renewals, upload authorisations, effect requests, observations recorded
// by a session and the lab's unfenced write.
var NonEventVerbs = []string{VerbRenew, VerbUpload, VerbEffect, VerbObserve, VerbResultUnfenced}

// NonEndingVerbs are the event verbs that never end a job. Every other
// accepted verb (result, fail, cancel, reclaim and any verb a later version
// records) may: the last one of a finished job is its end event.
var NonEndingVerbs = []string{VerbSubmit, VerbClaim, VerbReassign, VerbArtifact, VerbStep, VerbResolve}

// Details recorded with write events.
const (
	DetailLeaseExpired   = "lease expired"
	DetailAgentRestarted = "agent restarted"
	DetailDeadline       = "deadline passed"
)
