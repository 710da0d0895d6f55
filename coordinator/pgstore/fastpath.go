package pgstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
)

var (
	_ coordinator.ManifestCommitter = (*Store)(nil)
	_ coordinator.WorkCounter       = (*Store)(nil)
)

const manifestSQL = `SELECT key FROM artifacts WHERE job_id = $1 AND generation = $2 ORDER BY created_at, name`

// CommitManifest is Commit followed by the manifest, sent as one batch: one
// round trip, two statements. The fenced write is commitSQL itself; the
// manifest query runs after it with a snapshot of its own (READ
// COMMITTED), so it sees every artifact registered under the token,
// including one whose registration the write waited for.
func (s *Store) CommitManifest(ctx context.Context, tok fencing.Token, result json.RawMessage) ([]string, error) {
	if err := sqlstore.CheckResult(result); err != nil {
		return nil, fmt.Errorf("commit %s: %w", tok, err)
	}
	b := &pgx.Batch{}
	b.Queue(commitSQL, tok.JobID, tok.Generation, tok.Owner, nullJSON(result))
	b.Queue(manifestSQL, tok.JobID, tok.Generation)
	br := s.pool.SendBatch(ctx, b)
	var ok bool
	if err := br.QueryRow().Scan(&ok); err != nil {
		br.Close()
		return nil, fmt.Errorf("commit %s: %w", tok, err)
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, fmt.Errorf("commit %s: manifest: %w", tok, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("commit %s: manifest: %w", tok, err)
	}
	if !ok {
		return nil, s.refused(ctx, "commit", tok)
	}
	if keys == nil {
		keys = []string{}
	}
	return keys, nil
}

// QueuedJobs counts the queued jobs (partial index jobs_queued_oldest).
func (s *Store) QueuedJobs(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'QUEUED'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count queued jobs: %w", err)
	}
	return n, nil
}

// ExpiredLeases counts the in-progress jobs whose lease expired on the
// database clock (partial index jobs_in_progress_expiry: the clock is read
// once, in an InitPlan, so that it bounds the index scan).
func (s *Store) ExpiredLeases(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM jobs
		WHERE status = 'IN_PROGRESS' AND lease_expires_at <= (SELECT clock_timestamp())`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count expired leases: %w", err)
	}
	return n, nil
}

// InProgressByOwner counts the in-progress jobs of every owner (partial
// index jobs_in_progress_owner).
func (s *Store) InProgressByOwner(ctx context.Context) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT worker_id, count(*) FROM jobs WHERE status = 'IN_PROGRESS' GROUP BY worker_id`)
	if err != nil {
		return nil, fmt.Errorf("count jobs in progress: %w", err)
	}
	out := map[string]int{}
	var (
		owner *string
		n     int64
	)
	_, err = pgx.ForEachRow(rows, []any{&owner, &n}, func() error {
		if owner != nil {
			out[*owner] = int(n)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count jobs in progress: %w", err)
	}
	return out, nil
}
