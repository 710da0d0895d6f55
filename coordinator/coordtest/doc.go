// Package coordtest holds a protocol-level test agent for coordinator tests:
// it speaks wire protocol v1 over NATS exactly as an agent must (hello,
// heartbeats, the first renewal before any work, renewals every TTL/3, a
// stop at once on revoke or 409) without phones or storage, and records
// every assign, revoke, control command and fenced reply. Behaviours such as
// a hung job that stops renewing, or a stale worker that writes late anyway,
// are chosen per job.
package coordtest
