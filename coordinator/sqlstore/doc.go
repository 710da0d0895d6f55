// Package sqlstore holds what the SQL implementations of jobstore.Store
// (coordinator/pgstore on PostgreSQL, coordinator/sqlitestore on SQLite)
// share: versioned migrations read from embedded SQL
// files, job id and input checks, and the lab-only surface (Lab) that the
// stale-writer experiment and the benchmarks use.
package sqlstore
