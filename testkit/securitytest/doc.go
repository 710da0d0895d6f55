// Package securitytest is the security suite: tests against the real parts
// (an embedded NATS server with per-agent permissions and TLS, PostgreSQL,
// MinIO, the edgeagent and edgecoord binaries) that each prove one defence
// of the threat model in docs/security.md. It holds tests only.
package securitytest
