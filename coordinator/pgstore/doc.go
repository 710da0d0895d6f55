// Package pgstore is the PostgreSQL implementation of jobstore.Store,
// through pgx v5 (pgxpool).
//
// Every fenced write is one statement whose WHERE clause checks the token
// (job id, generation, owner, status IN_PROGRESS); the write_events row of the
// attempt is inserted by the same statement, through a data-modifying CTE, so
// an attempt is recorded exactly when it is decided. Lease expiry is judged by
// clock_timestamp() on the server. ClaimNext uses FOR UPDATE SKIP LOCKED, so
// several coordinators can claim from one database at once.
//
// Open creates or upgrades the schema from the versioned SQL files embedded
// from migrations/, recorded in schema_migrations, under an advisory lock so
// concurrent Opens are safe.
package pgstore
