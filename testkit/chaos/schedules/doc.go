// Package schedules runs batches of seeded fault schedules in the test
// process, under the race detector when the tests run with -race: on
// PostgreSQL and MinIO, and on SQLite and the in-process S3 server
// (docs/reliability.md). It holds only tests.
package schedules
