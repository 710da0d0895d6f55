// Package sqlitestore is the SQLite implementation of jobstore.Store, the
// embedded default, through modernc.org/sqlite (no cgo).
//
// The database runs in WAL mode (synchronous=NORMAL) with a busy timeout;
// commits never checkpoint, a checkpointer of the store's does it beside
// the writes (checkpoint.go). All writes go through
// one connection and each is a BEGIN IMMEDIATE transaction, so writers never
// interleave; reads use a separate pool. As on PostgreSQL, every fenced write
// is one statement whose WHERE clause checks the token (job id, generation,
// owner, status IN_PROGRESS); its write_events row is inserted in the same
// transaction. Lease expiry is judged by SQLite's own clock
// (strftime('%Y-%m-%d %H:%M:%f', 'now') inside the statement, millisecond
// resolution), never by a time passed in from Go.
//
// Open creates or upgrades the schema from the versioned SQL files embedded
// from migrations/, recorded in schema_migrations.
package sqlitestore
