package agent

import "context"

// PrepareForSleep runs what the agent does when the PC is about to sleep
// (sleep.go), without a sleep inhibitor.
func (a *Agent) PrepareForSleep(ctx context.Context) { a.prepareForSleep(ctx) }

// BeatNow makes the session send a heartbeat now.
func (a *Agent) BeatNow() { a.beatNow() }
