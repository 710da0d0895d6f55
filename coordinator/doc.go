// Package coordinator is the VPS side of edgeagent: the job store interface
// (implemented by pgstore and sqlitestore), the agent-facing NATS service,
// the scheduler that hands queued jobs to idle agents, and the lease reaper.
// The coordinator alone grants generations and checks them.
package coordinator
