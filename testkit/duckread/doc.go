// Package duckread reads the dataset's exports (docs/dataset.md) as a
// researcher's tools do, with DuckDB: a reader that shares no code with
// the coordinator's writers, so that what it finds in a Parquet or CSV
// file is what any other reader finds.
//
// Its tests alone import DuckDB (github.com/duckdb/duckdb-go/v2, which
// links DuckDB's C++ library through cgo, its Parquet reader built in):
// they start the real edgecoord on PostgreSQL (testkit/e2e), export a
// project's observations with `edgecoord observations export`, and check
// the files' column types, rows and provenance against the store. The
// shipped binaries never link DuckDB (testkit/deptest).
package duckread
