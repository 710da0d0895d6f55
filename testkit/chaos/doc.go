// Package chaos breaks a whole edgeagent system on purpose and checks what
// it did. A schedule runs several agents (real agent daemons with simulated
// phones, built by agent.NewDaemon as `edgeagent run` builds them), several
// coordinators (built by coordinator.NewDaemon) on one job store (SQLite or
// PostgreSQL), a NATS server and an S3 store, and injects a
// seeded random plan of faults: agent pauses longer than the lease, agent
// kill -9 and restart, coordinator restarts, NATS server restarts, store
// outages and lost store replies, storage outages, message delay,
// duplication and reordering, wall-clock jumps on agents, and operator
// reassignments. The same seed always gives the same plan; the interleaving
// of the running system is not reproducible.
//
// Every agent process talks to NATS through its own NATSLink, a proxy that
// reads the NATS client protocol and acts on whole messages, and to the
// storage through its own S3Link; both record what the agent sent and when.
// Every coordinator's store calls are recorded with their call and return
// times. Check verifies the history with a porcupine model of the fenced job
// register (calls whose outcome is unknown return at infinity) and with
// direct audits of the final store and storage state: at most one accepted
// result per job, the accepted result belongs to the job's final
// generation, the manifest's objects carry that generation's stamps, no side
// effect left an agent after it stopped the job, no job and no accepted
// result was lost, and every slot of the recurring schedules the run
// creates has one outcome, with catch-up firing only the latest slot due
// (recurring.go). A stall probe measures how long goroutines waited to run,
// so that the timing rules do not mistake an overloaded machine for a broken
// system. The harness is in harness*.go, one file per part of the system
// it runs (NATS, store, storage, coordinators, agents, workload).
// History.Format prints a failing schedule's history; RunMany runs
// many schedules and adds up their reports; docs/reliability.md describes
// the rules, the faults and their limits.
package chaos
