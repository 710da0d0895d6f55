// Package coordinator is the VPS side of edgeagent: the agent-facing NATS
// service over a job store (the contract in package jobstore, implemented
// by pgstore and sqlitestore), the scheduler that hands queued jobs to
// agents with a free matching phone, the lease reaper, presigned uploads,
// metrics and health endpoints. The coordinator alone grants generations
// and checks them.
//
// Everything a coordinator decides from lives in the store: jobs and their
// leases, and the agent registry (sessions, phones, slots, drain flags,
// settings, last seen on the database clock). A Server keeps no state of its
// own, so several Servers sharing one PostgreSQL store and one NATS queue
// group are one coordinator: grants are single statements that skip rows
// another coordinator is granting (FOR UPDATE SKIP LOCKED) and are
// serialised per agent, so no agent exceeds its slots and no phone gets two
// jobs whichever coordinator granted them.
//
// NewDaemon builds the coordinator of a process from its config and a
// System (the opened store, a NATS dialer, a presigner): the presigner and
// the outbox the config describes, the NATS connection, and, in
// Daemon.Run, the metrics and health endpoint. `edgecoord serve`, the
// benchmarks, the chaos harness and the lab all build their coordinators
// with it; OpenStore opens the store the config names.
package coordinator
