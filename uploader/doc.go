// Package uploader puts a job's artifacts into S3-compatible storage (MinIO in
// production) stamped with the job's fencing token, and keeps them in an
// on-disk spool until storage has them.
//
// Every object lands at jobs/<job_id>/g<generation>/<name>, carries the token
// as user metadata (x-amz-meta-job-id, x-amz-meta-owner,
// x-amz-meta-generation) plus x-amz-meta-sha256 of its content and a content
// type (application/octet-stream when none is given), and is written with
// If-None-Match: * so an existing object is never overwritten: on a single
// PUT, and on both the start and the completion of a multipart upload, so
// that no other writer can slip in between. A precondition failure on an
// object that already holds the same content and stamps is a success (a
// retry whose first attempt landed and whose answer was lost); anything else
// is ErrExists.
//
// Two modes stand behind the Uploader interface. Direct mode (S3) uses
// minio-go with the agent's own, narrowly scoped credentials: small
// artifacts go up in one PUT, larger ones as multipart uploads whose parts
// stream from disk (a file, or any body that can seek, is read at offsets
// and never held in memory), Parallelism parts at a time. Presigned mode
// (Presigned) holds no storage credentials: the coordinator authorises each
// object through the fenced upload verb and presigns one PUT, whose headers
// are sent verbatim; it stores artifacts of up to 5 GiB.
//
// The SHA-256 is known before the first byte is sent: computed by the spool
// as it takes the artifact in, or in a first pass over a file or a seekable
// body, or declared by the caller for a stream, which is then checked as it
// is read. Nothing is committed on a mismatch. Each request's payload is
// covered by its signature over plain HTTP (the server checks it); over TLS,
// parts go as UNSIGNED-PAYLOAD, as minio-go sends them.
//
// Network failures and server errors (5xx, 408, 429) are retried with
// exponential backoff and jitter (RetryPolicy); what still fails is
// ErrUnavailable. The Spool keeps an artifact on disk and tries again while
// its context lives, continuing an interrupted multipart upload from the
// parts already stored (Resumable). Cancelling the context stops everything:
// the request in flight is cancelled, a multipart upload is aborted, the
// spool entry is removed, and the error carries the context's cause (for
// example fencing.ErrRevoked). An optional bandwidth limit applies to all
// uploads of an uploader; progress shows in Metrics, in Spool.Uploads and in
// the spool's log lines.
//
// docs/uploads.md describes the modes, the spool's layout, resumption and
// the limits.
package uploader
