package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
)

var _ jobstore.APIStore = (*Store)(nil)

const tokenColumns = sqlstore.TokenColumns

func scanToken(row sqlstore.Row) (jobstore.APIToken, error) { return sqlstore.ScanToken(row, times) }

// CreateAPIToken stores a token.
func (s *Store) CreateAPIToken(ctx context.Context, t jobstore.APIToken) (jobstore.APIToken, error) {
	out, err := scanToken(s.pool.QueryRow(ctx, `
		INSERT INTO api_tokens (name, hash, projects, scopes) VALUES ($1, $2, $3, $4)
		ON CONFLICT (name) DO NOTHING
		RETURNING `+tokenColumns, t.Name, t.Hash[:], strings.Join(t.Projects, ","), strings.Join(t.Scopes, ",")))
	return sqlstore.Found(out, err, jobstore.ErrTokenExists, "create api token %s", t.Name)
}

// APITokens lists every token by id.
func (s *Store) APITokens(ctx context.Context) ([]jobstore.APIToken, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenColumns+` FROM api_tokens ORDER BY id`)
	return sqlstore.List(rows, err, scanToken, "list api tokens")
}

// APITokenByHash returns the token with that hash and records its use, at
// most every few seconds so that a busy token does not write on every
// request.
//
// The statement runs whether or not the caller's request is still there:
// a client that goes away does not cancel the record of its token's use.
func (s *Store) APITokenByHash(ctx context.Context, hash [sha256.Size]byte) (jobstore.APIToken, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqlstore.TokenUseTimeout)
	defer cancel()
	t, err := scanToken(s.pool.QueryRow(ctx, `
		WITH used AS (
			UPDATE api_tokens SET last_used_at = clock_timestamp()
			 WHERE hash = $1 AND revoked_at IS NULL
			   AND (last_used_at IS NULL OR last_used_at < clock_timestamp() - interval '5 seconds')
		)
		SELECT `+tokenColumns+` FROM api_tokens WHERE hash = $1`, hash[:]))
	return sqlstore.Found(t, err, jobstore.ErrTokenNotFound, "find api token")
}

// RevokeAPIToken revokes a token by name, or by id.
func (s *Store) RevokeAPIToken(ctx context.Context, nameOrID string) (jobstore.APIToken, error) {
	id, err := strconv.ParseInt(nameOrID, 10, 64)
	if err != nil {
		id = -1
	}
	t, err := scanToken(s.pool.QueryRow(ctx, `
		UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, clock_timestamp())
		 WHERE id = COALESCE((SELECT id FROM api_tokens WHERE name = $1), $2)
		RETURNING `+tokenColumns, nameOrID, id))
	return sqlstore.Found(t, err, jobstore.ErrTokenNotFound, "revoke api token %s", nameOrID)
}

// Idempotent returns a stored submit.
func (s *Store) Idempotent(ctx context.Context, tokenID int64, key string) (jobstore.Idempotent, error) {
	return idempotent(ctx, s.pool, tokenID, key)
}

func idempotent(ctx context.Context, q querier, tokenID int64, key string) (jobstore.Idempotent, error) {
	rec, err := sqlstore.ScanIdempotent(q.QueryRow(ctx, `SELECT request_hash, reply, created_at FROM api_idempotency WHERE token_id = $1 AND key = $2`,
		tokenID, key), times, tokenID, key)
	return sqlstore.Found(rec, err, jobstore.ErrNotFound, "find idempotent submit")
}

// insertJobs submits specs in tx, each with its submit event (the job's
// queued event), as Submit does.
func insertJobs(ctx context.Context, tx pgx.Tx, specs []jobstore.JobSpec) ([]jobstore.Job, error) {
	jobs := make([]jobstore.Job, 0, len(specs))
	for _, spec := range specs {
		id, task, err := sqlstore.PrepareSubmit(spec)
		if err != nil {
			return nil, err
		}
		p := jobstore.Policy(spec)
		var notBefore any
		if !spec.NotBefore.IsZero() {
			notBefore = spec.NotBefore
		}
		var scheduleID, scheduledAt any
		if spec.ScheduleID != "" {
			scheduleID, scheduledAt = spec.ScheduleID, spec.ScheduledAt
		}
		j, err := scanJob(tx.QueryRow(ctx, `
			WITH ins AS (
				INSERT INTO jobs (id, status, task, project, priority, not_before, max_attempts, submitted_by, schedule_id, scheduled_at)
				VALUES ($1, 'QUEUED', $2, $3, $4, $5, $6, $7, $8, $9)
				ON CONFLICT (id) DO NOTHING
				RETURNING `+jobColumns+`
			), ev AS (`+submitEventSQL+`)
			SELECT `+jobColumns+` FROM ins`, id, task, p.Project, p.Priority, notBefore, p.MaxAttempts, p.SubmittedBy, scheduleID, scheduledAt))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("submit job %s: id in use: %w", id, jobstore.ErrConflict)
		}
		if err != nil {
			return nil, fmt.Errorf("submit job %s: %w", id, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// SubmitAll submits specs in one transaction.
func (s *Store) SubmitAll(ctx context.Context, specs []jobstore.JobSpec) ([]jobstore.Job, error) {
	var jobs []jobstore.Job
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		jobs, err = insertJobs(ctx, tx, specs)
		return err
	})
	return jobs, err
}

// SubmitIdempotent submits specs and stores the reply under the key, or
// returns what the key stored.
func (s *Store) SubmitIdempotent(ctx context.Context, rec jobstore.Idempotent, specs []jobstore.JobSpec, reply func([]jobstore.Job) (json.RawMessage, error)) (jobstore.Idempotent, error) {
	var out jobstore.Idempotent
	fresh := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// A concurrent submit with the same key waits here until the
		// first one commits, then finds its row.
		tag, err := tx.Exec(ctx, `INSERT INTO api_idempotency (token_id, key, request_hash, reply)
			VALUES ($1, $2, $3, 'null') ON CONFLICT DO NOTHING`, rec.TokenID, rec.Key, rec.RequestHash)
		if err != nil {
			return fmt.Errorf("store idempotency key: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		fresh = true
		jobs, err := insertJobs(ctx, tx, specs)
		if err != nil {
			return err
		}
		doc, err := reply(jobs)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE api_idempotency SET reply = $3 WHERE token_id = $1 AND key = $2`,
			rec.TokenID, rec.Key, []byte(doc)); err != nil {
			return fmt.Errorf("store idempotent reply: %w", err)
		}
		out = rec
		out.Reply = doc
		return nil
	})
	if err != nil {
		return jobstore.Idempotent{}, err
	}
	if fresh {
		return out, nil
	}
	stored, err := s.Idempotent(ctx, rec.TokenID, rec.Key)
	if err != nil {
		return jobstore.Idempotent{}, err
	}
	stored.Replayed = true
	if stored.RequestHash != rec.RequestHash {
		return stored, fmt.Errorf("submit with idempotency key: %w", jobstore.ErrIdempotencyMismatch)
	}
	return stored, nil
}

// RecordAPIDenial counts a refused request in its token's row of its kind
// and minute.
func (s *Store) RecordAPIDenial(ctx context.Context, d jobstore.APIDenial) error {
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO api_denials (token_name, kind, window_start, count, method, route, job_id, project, at)
		SELECT $1, $2, date_trunc('minute', n.t), 1, $3, $4, $5, $6, n.t FROM (SELECT clock_timestamp() AS t) n
		ON CONFLICT (token_name, kind, window_start) DO UPDATE SET count = api_denials.count + 1,
			method = EXCLUDED.method, route = EXCLUDED.route, job_id = EXCLUDED.job_id, project = EXCLUDED.project, at = EXCLUDED.at`,
		d.TokenName, jobstore.DenialKind(d), d.Method, d.Route, d.JobID, d.Project); err != nil {
		return fmt.Errorf("record api denial: %w", err)
	}
	return nil
}

// APIDenials lists the rows of refusals, oldest first.
func (s *Store) APIDenials(ctx context.Context) ([]jobstore.APIDenial, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+sqlstore.DenialColumns+` FROM api_denials ORDER BY id`)
	return sqlstore.List(rows, err, func(r sqlstore.Row) (jobstore.APIDenial, error) { return sqlstore.ScanDenial(r, times) }, "list api denials")
}

// ListJobPage lists jobs newest first from a cursor (the jobs' seq).
func (s *Store) ListJobPage(ctx context.Context, f jobstore.JobPageFilter) (jobstore.JobPage, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	var projects, statuses []string
	if f.Projects != nil {
		projects = append([]string{}, f.Projects...)
	}
	if len(f.Statuses) > 0 {
		statuses = f.Statuses
	}
	var after any
	if f.After > 0 {
		after = f.After
	}
	rows, err := s.pool.Query(ctx, `SELECT `+jobColumns+`, seq FROM jobs
		WHERE ($1::text[] IS NULL OR project = ANY ($1))
		  AND ($2::text[] IS NULL OR status = ANY ($2))
		  AND ($3 = '' OR left(worker_id, length($3) + 1) = $3 || '/')
		  AND ($4 = '' OR device_serial = $4 OR task->'device'->>'serial' = $4)
		  AND ($5::bigint IS NULL OR seq < $5)
		ORDER BY seq DESC
		LIMIT $6`, projects, statuses, f.AgentID, f.Phone, after, limit+1)
	if err != nil {
		return jobstore.JobPage{}, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	page, err := sqlstore.JobPage(rows, times, limit)
	if err != nil {
		return jobstore.JobPage{}, fmt.Errorf("list jobs: %w", err)
	}
	return page, nil
}
