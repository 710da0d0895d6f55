// Package fencing defines the fencing token that every upload and result of a
// job carries, the sentinel error for a stale token, the token's encodings on
// NATS messages and in S3 object metadata, and the agent-side lease guard that
// cancels a job when its lease is lost.
package fencing
