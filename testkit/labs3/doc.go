// Package labs3 runs an in-process S3 server for edgelab, which must work
// with no external servers: gofakes3 with its in-memory backend, on a
// loopback port, with one bucket created.
//
// gofakes3 stores user metadata (x-amz-meta-*) and returns it on HEAD and GET,
// so artifacts can be listed with their fencing stamps. It honours
// If-None-Match: * on a single PUT but ignores it when a multipart upload is
// started or completed, and it stores multipart parts sent in the
// aws-chunked encoding (minio-go's default over plain HTTP) with the framing
// left in. The server here fronts it with both fixes: the If-None-Match check
// on every object write, serialised with the write itself, and aws-chunked
// decoding of every PUT, so that the lab behaves like MinIO where the
// fencing story depends on it.
package labs3
