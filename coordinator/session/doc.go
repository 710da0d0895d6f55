// Package session drives interactive jobs for a program that steers a phone
// turn by turn, typically an AI loop that looks at a screenshot and decides
// the next tap (docs/sessions.md).
//
// A Manager lives in the coordinator process. Opening a session submits an
// interactive job and waits for its grant; each step call sends the steps to
// the agent holding the job on the step verb (docs/protocol.md, step) with
// the job's current fencing token, and answers with each step's outcome and
// a presigned GET URL for every capture; closing finishes the job. The
// coordinator holds the token: callers name a session, never a generation.
//
// A session is bound to the grant it was opened on. When the job's lease
// moves (the agent died, the phone went away, an operator reassigned it),
// the next call answers with a *LostError naming the generation the session
// held and the last step that ran, and the session stays lost: its steps are
// never sent to another phone. The job is then cancelled, so that the phone
// it moved to is released.
//
// NewHandler serves the sessions over HTTP under /api/v1/sessions.
package session
