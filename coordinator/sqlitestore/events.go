package sqlitestore

import (
	"context"
	"fmt"
	"strings"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
)

var _ jobstore.EventStore = (*Store)(nil)

// eventSelect reads write_events rows with what their job says about them
// (docs/api.md, "Events"): ended is 1 on the last accepted row of an ending
// verb of a finished job.
var eventSelect = `
	SELECT w.id, w.job_id, w.verb, w.owner, w.generation, w.accepted, w.at, w.detail,
	       j.id IS NOT NULL, COALESCE(j.project, ''), COALESCE(j.status, ''), COALESCE(j.lease_generation, 0),
	       COALESCE(j.device_serial, ''), COALESCE(j.fail_reason, ''), COALESCE(a.size, -1),
	       COALESCE(j.status NOT IN ('QUEUED', 'IN_PROGRESS') AND w.accepted
	         AND w.verb NOT IN ` + sqlstore.NonEventVerbs + ` AND w.verb NOT IN ` + sqlstore.NonEndingVerbs + `
	         AND NOT EXISTS (SELECT 1 FROM write_events e
	                         WHERE e.job_id = w.job_id AND e.id > w.id AND e.accepted
	                           AND e.verb NOT IN ` + sqlstore.NonEventVerbs + ` AND e.verb NOT IN ` + sqlstore.NonEndingVerbs + `), 0)
	FROM write_events w
	LEFT JOIN jobs j ON j.id = w.job_id
	LEFT JOIN artifacts a ON w.verb = 'artifact' AND a.job_id = w.job_id AND a.generation = w.generation AND a.name = w.detail
	WHERE w.id > ? AND (? <= 0 OR w.id <= ?)`

// Events lists job events oldest first as q selects them.
func (s *Store) Events(ctx context.Context, q jobstore.EventQuery) ([]jobstore.Event, error) {
	if q.All && (q.JobID != "" || q.Projects != nil) {
		return nil, fmt.Errorf("list events: all rows cannot be filtered by job or project")
	}
	query := eventSelect
	args := []any{q.AfterID, q.UpTo, q.UpTo}
	if !q.All {
		query += ` AND w.accepted AND w.verb NOT IN ` + sqlstore.NonEventVerbs + ` AND j.id IS NOT NULL`
	}
	if q.JobID != "" {
		query += ` AND w.job_id = ?`
		args = append(args, q.JobID)
	}
	if q.Projects != nil {
		if len(q.Projects) == 0 {
			query += ` AND 0`
		} else {
			query += ` AND j.project IN (?` + strings.Repeat(", ?", len(q.Projects)-1) + `)`
			for _, p := range q.Projects {
				args = append(args, p)
			}
		}
	}
	query += ` ORDER BY w.id LIMIT ?`
	args = append(args, sqlstore.EventLimit(q))
	rows, err := s.query(ctx, query, args...)
	return sqlstore.List(rows, err, func(r sqlstore.Row) (jobstore.Event, error) { return sqlstore.ScanEvent(r, times) }, "list events")
}

// LastEventID returns the highest write_events id, 0 when none.
func (s *Store) LastEventID(ctx context.Context) (int64, error) {
	return sqlstore.Int(s.rc.QueryRowContext(ctx, `SELECT COALESCE(max(id), 0) FROM write_events`), "read last event id")
}

// RecordEvent records e, accepted, and returns its id.
func (s *Store) RecordEvent(ctx context.Context, e jobstore.JobEvent) (int64, error) {
	if err := jobstore.CheckJobEvent(e); err != nil {
		return 0, fmt.Errorf("record event: %w", err)
	}
	var id int64
	err := s.write(ctx, func(tx txn) error {
		return tx.QueryRowContext(ctx, `
			INSERT INTO write_events (job_id, verb, owner, generation, accepted, detail)
			SELECT ?1, ?2, ?3, ?4, 1, ?5 WHERE EXISTS (SELECT 1 FROM jobs WHERE id = ?1)
			RETURNING id`, e.JobID, e.Verb, e.Owner, e.Generation, e.Detail).Scan(&id)
	})
	return sqlstore.Found(id, err, jobstore.ErrNotFound, "record %s event of job %s", e.Verb, e.JobID)
}

// publishEndSQL writes the outbox message of an end event: job, generation,
// owner, status, reason and the artifacts of that generation.
const publishEndSQL = `
	INSERT INTO effects (key, kind, state, job_id, owner, generation, payload)
	SELECT ?4, 'outbox', 'pending', j.id, ?3, ?2,
	       json_object(
	           'key', ?4, 'event', ?6, 'job_id', j.id, 'generation', ?2, 'owner', ?3,
	           'status', j.status, 'reason', ?7,
	           'manifest', json((SELECT json_group_array(key) FROM (
	               SELECT key FROM artifacts WHERE job_id = ?1 AND generation = ?2 ORDER BY created_at, rowid))))
	FROM jobs j WHERE j.id = ?1 AND j.status = ?5
	ON CONFLICT (key) DO NOTHING`

// PublishEnd writes the outbox message of an end event, once.
func (s *Store) PublishEnd(ctx context.Context, e jobstore.Event, key string) (bool, error) {
	var n int64
	err := s.write(ctx, func(tx txn) error {
		r, err := tx.ExecContext(ctx, publishEndSQL, e.JobID, e.Generation, e.Owner, key, e.Status,
			jobstore.OutboxEndEvent(e.Status), e.Reason)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("publish end of job %s: %w", e.JobID, err)
	}
	return n == 1, nil
}
