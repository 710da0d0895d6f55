// Package uploader puts a job's artifacts into S3-compatible storage (MinIO in
// production) stamped with the job's fencing token.
//
// Every object lands at jobs/<job_id>/g<generation>/<name>, carries the token
// as user metadata (x-amz-meta-job-id, x-amz-meta-owner,
// x-amz-meta-generation) plus x-amz-meta-sha256 of its content, and is written
// with If-None-Match: * so an existing object is never overwritten: on the
// PUT of a small body, and on both the start and the completion of a
// multipart upload, so that no other writer can slip in between. A
// precondition failure on an object that already holds the same content and
// stamps is a success (a retry whose first attempt landed); anything else is
// ErrExists.
//
// The SHA-256 is known before the first byte is sent: declared by the caller,
// or computed in a first pass over a file or a seekable body (a body that
// cannot seek is kept in memory when it fits in one part, and spooled to a
// temp file otherwise). The content is checked against it as it is sent, and
// nothing is committed on a mismatch.
//
// Bodies are then read once, sequentially, into at most Parallelism buffers
// of PartSize bytes; bodies longer than one part go up as a multipart upload
// whose parts are sent in parallel. Cancelling the context aborts the request
// in flight and the multipart upload, so nothing half-written stays behind;
// the error carries the context's cause (for example fencing.ErrRevoked).
package uploader
