package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
)

var (
	_ jobstore.ManifestCommitter = (*Store)(nil)
	_ jobstore.WorkCounter       = (*Store)(nil)
)

// CommitManifest is Commit and the manifest in one write transaction: the
// fenced UPDATE of commitSQL, its write_events row, and, when accepted, the
// artifacts registered under the token, read before any other writer can
// come in.
func (s *Store) CommitManifest(ctx context.Context, tok fencing.Token, result json.RawMessage) ([]string, error) {
	if err := sqlstore.CheckResult(result); err != nil {
		return nil, fmt.Errorf("commit %s: %w", tok, err)
	}
	var keys []string
	err := s.write(ctx, func(tx txn) error {
		keys = nil
		var id string
		err := tx.QueryRowContext(ctx, commitSQL, nullJSON(result), tok.Owner, tok.JobID, tok.Generation, tok.Owner).Scan(&id)
		accepted := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err := record(ctx, tx, tok.JobID, jobstore.VerbResult, tok.Owner, tok.Generation, accepted); err != nil {
			return err
		}
		if !accepted {
			return refusal(ctx, tx, tok.JobID)
		}
		keys, err = manifestKeys(ctx, tx, tok)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", tok, err)
	}
	return keys, nil
}

// manifestKeys reads the keys of the artifacts registered under tok, in
// the order they were registered: the manifest of an accepted result.
func manifestKeys(ctx context.Context, tx txn, tok fencing.Token) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT key FROM artifacts WHERE job_id = ? AND generation = ? ORDER BY created_at, rowid`,
		tok.JobID, tok.Generation)
	if err != nil {
		return nil, err
	}
	keys := []string{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, errors.Join(rows.Err(), rows.Close())
}

// QueuedJobs counts the queued jobs that are due: their not_before, if
// any, passed on the database clock (partial index jobs_queued_oldest).
func (s *Store) QueuedJobs(ctx context.Context) (int64, error) {
	return sqlstore.Int(s.rc.QueryRowContext(ctx, `SELECT count(*) FROM jobs j WHERE j.status = 'QUEUED' AND `+due), "count queued jobs")
}

// ExpiredLeases counts the in-progress jobs whose lease expired on the
// database clock (partial index jobs_in_progress_expiry).
func (s *Store) ExpiredLeases(ctx context.Context) (int64, error) {
	return sqlstore.Int(s.rc.QueryRowContext(ctx, `SELECT count(*) FROM jobs
		WHERE status = 'IN_PROGRESS' AND lease_expires_at <= `+now), "count expired leases")
}

// InProgressByOwner counts the in-progress jobs of every owner (partial
// index jobs_in_progress_owner).
func (s *Store) InProgressByOwner(ctx context.Context) (map[string]int, error) {
	rows, err := s.query(ctx, `SELECT worker_id, count(*) FROM jobs WHERE status = 'IN_PROGRESS' GROUP BY worker_id`)
	return sqlstore.Read(rows, err, sqlstore.OwnerCounts, "count jobs in progress")
}
