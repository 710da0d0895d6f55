// Package capture is the agent's boundary to the phones: the Device interface
// a job runs against (screenshot, UI dump, input, app launch, screen
// recording), an Inventory of the phones attached to this PC with one lock per
// phone so a phone runs one job at a time, a Runner that executes the steps
// of a protocol.Task on a Device and returns what each step captured as
// artifacts, and the OpLog, the per-job operation log that is itself uploaded
// as the oplog.jsonl artifact.
//
// Simulated is a deterministic in-memory phone for tests and the lab: its
// screenshots are real PNGs that change with its state, its UI dump is
// uiautomator XML, and it can be slowed down, made to fail, or unplugged.
//
// Every Device method takes a context and returns promptly once it is done,
// with an error that satisfies errors.Is(err, context.Canceled) (or
// DeadlineExceeded) and also wraps the context's cause, so a job stopped with
// fencing.ErrRevoked or fencing.ErrStale can be told apart.
package capture
