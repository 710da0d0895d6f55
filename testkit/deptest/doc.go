// Package deptest holds the dependency test: the shipped binaries edgeagent
// and edgecoord must not link the lab, the chaos harness, the benchmarks,
// the test servers, the fake phone, the linearizability checker or the
// embedded NATS server (docs/design.md, section 6).
package deptest
