// Package sqlstore holds what the SQL implementations of coordinator.Store
// (coordinator/pgstore on PostgreSQL, coordinator/sqlitestore on SQLite)
// share: the write_events verbs, versioned migrations read from embedded SQL
// files, job id and input checks, and the lab-only surface (Lab) that the
// stale-writer experiment and the benchmarks use.
package sqlstore
