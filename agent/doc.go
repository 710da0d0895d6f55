// Package agent is the daemon core: the connection to the coordinator, the
// job runner, the lease keeper and the one stop path every lost lease goes
// through.
//
// An Agent says hello to the coordinator (again after every NATS reconnect
// and whenever its session was lost), keeps heartbeats going and runs the
// jobs it is assigned, each on one phone under a fencing.Guard. A job runs
// no step before its first renewal is accepted; it renews at a third of the
// TTL with jitter; before every side effect it checks its lease, and its
// fenced requests are published only while the lease is held, under a lock
// its stop takes. A revoke, a 409 on any call, the self-fence deadline (on
// the monotonic clock and, for suspends, the wall clock), a control cancel
// and shutdown all end in job.stop: the job's context is cancelled, its
// local processes are killed with their process group (package procs), the
// upload in flight is aborted, nothing more is sent, Options.OnStop runs for
// its token and the stop is recorded and logged with job_id, owner and
// generation.
//
// Shutdown drains (no new jobs; running ones finish or are released with a
// fenced fail so the coordinator reassigns them at once); cancelling Run's
// context stops everything at once. The coordinator can drain, resume,
// cancel, ask for status and change runtime settings (kept in the state
// directory) with control commands, and run single steps of a running job
// with the step verb (interactive jobs). StatusHandler serves /metrics,
// /healthz, /readyz and /status on a loopback address; LockStateDir keeps
// one agent per state directory.
//
// NewDaemon builds the whole agent of a process from its config and a
// System of dependencies (NATS dialer, phones, storage hooks, clock,
// logger, metrics registry), each defaulting to what the config describes:
// the state directory's lock, the upload spool in front of the bucket or of
// presigned PUTs (its generation dropped on every stop, previous boots'
// entries recovered at start), the phones, the status endpoint and the NATS
// connection. Daemon.Run drains when its context is cancelled and stops at
// once when its hard-stop channel is closed. `edgeagent run`, the chaos
// harness, the benchmarks and the lab all build their agents with it.
package agent
