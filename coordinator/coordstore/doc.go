// Package coordstore opens the coordinator's job store the config names:
// PostgreSQL (package pgstore) or SQLite (package sqlitestore). It is apart
// from package coordinator, whose Daemon takes the opened store in its
// System, because both stores import coordinator: the one place that picks
// a store by its driver cannot live there without an import cycle.
//
// `edgecoord serve` and the benchmarks' coordinator (edgelab bench
// coordinator) open their store with Open.
package coordstore
