package jobstore

import (
	"context"
	"encoding/json"

	"github.com/edgeagent/edgeagent/fencing"
)

// ManifestCommitter is implemented by stores that accept a result and read
// back its manifest in one round trip to the database. The accepting write
// is Commit's, fenced the same way: one statement with the token in its
// WHERE clause that records the attempt in write_events. The manifest is
// read after it, so it holds every artifact registered under the token.
//
// A Store that wraps another hides it, and the Server then calls Commit and
// Artifacts instead.
type ManifestCommitter interface {
	// CommitManifest is Commit followed by the object keys of
	// Artifacts(tok.JobID, tok.Generation), in their order.
	CommitManifest(ctx context.Context, tok fencing.Token, result json.RawMessage) ([]string, error)
}

// WorkCounter is implemented by stores that can tell the scheduler and the
// reaper whether they have anything to do from their partial indexes,
// without reading every job. Without it the scheduler counts every job
// (JobCounts) on each pass, tries a grant for every agent, and the reaper
// tries a takeover for every agent on each sweep.
type WorkCounter interface {
	// QueuedJobs counts the queued jobs that may be granted now: none
	// waiting for its not_before (a retry's backoff, a schedule's jitter)
	// on the database clock.
	QueuedJobs(ctx context.Context) (int64, error)
	// ExpiredLeases counts the in-progress jobs whose lease expired on the
	// database clock.
	ExpiredLeases(ctx context.Context) (int64, error)
	// InProgressByOwner counts the in-progress jobs of every owner that
	// holds one.
	InProgressByOwner(ctx context.Context) (map[string]int, error)
}
