// Package deptest holds the dependency tests: the shipped binaries edgeagent
// and edgecoord must not link the lab, the chaos harness, the benchmarks,
// the test servers, the fake phone, the linearizability checker or the
// embedded NATS server (docs/design.md, section 6); and the job stores
// (coordinator/pgstore, coordinator/sqlitestore) and their contract
// (coordinator/jobstore) must not link the NATS client, Prometheus,
// minio-go or package coordinator.
package deptest
