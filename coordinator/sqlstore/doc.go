// Package sqlstore holds what the SQL implementations of jobstore.Store
// (coordinator/pgstore on PostgreSQL, coordinator/sqlitestore on SQLite)
// share: the scanners of jobs, leases, agents, API tokens, effects, write
// and job events, artifacts and the dashboard's rows over one Scan(...any)
// row, each dialect handing in its time codec (Times); the one-row read's
// not-found mapping (Found, RowErr) and the many-row read's end (List, Read,
// Collect); versioned migrations
// read from embedded SQL files, job id and input checks, and the lab-only
// surface (Lab) that the stale-writer experiment and the benchmarks use.
// The fenced writes stay in each store: one statement with a data-modifying
// CTE on PostgreSQL, a BEGIN IMMEDIATE transaction on SQLite.
package sqlstore
