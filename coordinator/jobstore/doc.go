// Package jobstore is the contract of the coordinator's job store and its
// model: the Store interface and the optional ones beside it (APIStore,
// UIStore, EffectStore, EventStore, ProjectCounter, ManifestCommitter,
// WorkCounter, ObservationStore, ExportStore, ScheduleStore), the jobs,
// leases, agents, effects, events, observations and schedules they keep,
// the job statuses and store errors,
// the write_events verbs, and the failure/retry policy every store
// applies (PlanFailure, Retry).
//
// It is a leaf: it imports only the protocol's messages and the fencing
// tokens, never the coordinator, NATS, Prometheus or an object store, so the
// stores that implement it (coordinator/pgstore on PostgreSQL,
// coordinator/sqlitestore on SQLite, with the SQL they share in
// coordinator/sqlstore) import it and nothing of the service. The conformance
// suite both stores pass is coordinator/storetest; docs/design.md describes
// the store's schema and fenced writes.
package jobstore
