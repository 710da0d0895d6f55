package sqlitestore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
)

var _ jobstore.APIStore = (*Store)(nil)

const tokenColumns = sqlstore.TokenColumns

func scanToken(row sqlstore.Row) (jobstore.APIToken, error) { return sqlstore.ScanToken(row, times) }

// CreateAPIToken stores a token.
func (s *Store) CreateAPIToken(ctx context.Context, t jobstore.APIToken) (jobstore.APIToken, error) {
	var out jobstore.APIToken
	err := s.write(ctx, func(tx txn) error {
		var err error
		out, err = scanToken(tx.QueryRowContext(ctx, `
			INSERT INTO api_tokens (name, hash, projects, scopes) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO NOTHING
			RETURNING `+tokenColumns, t.Name, t.Hash[:], strings.Join(t.Projects, ","), strings.Join(t.Scopes, ",")))
		return err
	})
	return sqlstore.Found(out, err, jobstore.ErrTokenExists, "create api token %s", t.Name)
}

// APITokens lists every token by id.
func (s *Store) APITokens(ctx context.Context) ([]jobstore.APIToken, error) {
	rows, err := s.query(ctx, `SELECT `+tokenColumns+` FROM api_tokens ORDER BY id`)
	return sqlstore.List(rows, err, scanToken, "list api tokens")
}

// APITokenByHash returns the token with that hash and records its use, at
// most every few seconds so that a busy token does not write on every
// request.
func (s *Store) APITokenByHash(ctx context.Context, hash [sha256.Size]byte) (jobstore.APIToken, error) {
	t, err := scanToken(s.rc.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM api_tokens WHERE hash = ?`, hash[:]))
	if err != nil {
		return jobstore.APIToken{}, sqlstore.RowErr(err, jobstore.ErrTokenNotFound, "find api token")
	}
	if !t.Revoked() {
		// The use is recorded whether or not the caller's request is still
		// there: a client that goes away does not cancel it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqlstore.TokenUseTimeout)
		defer cancel()
		err := s.write(ctx, func(tx txn) error {
			_, err := tx.ExecContext(ctx, `UPDATE api_tokens SET last_used_at = `+now+`
				WHERE id = ? AND (last_used_at IS NULL OR last_used_at < strftime('%Y-%m-%d %H:%M:%f', 'now', '-5 seconds'))`, t.ID)
			return err
		})
		if err != nil {
			return jobstore.APIToken{}, fmt.Errorf("record api token use: %w", err)
		}
	}
	return t, nil
}

// RevokeAPIToken revokes a token by name, or by id.
func (s *Store) RevokeAPIToken(ctx context.Context, nameOrID string) (jobstore.APIToken, error) {
	id, err := strconv.ParseInt(nameOrID, 10, 64)
	if err != nil {
		id = -1
	}
	var t jobstore.APIToken
	err = s.write(ctx, func(tx txn) error {
		var err error
		t, err = scanToken(tx.QueryRowContext(ctx, `
			UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, `+now+`)
			 WHERE id = COALESCE((SELECT id FROM api_tokens WHERE name = ?), ?)
			RETURNING `+tokenColumns, nameOrID, id))
		return err
	})
	return sqlstore.Found(t, err, jobstore.ErrTokenNotFound, "revoke api token %s", nameOrID)
}

// Idempotent returns a stored submit.
func (s *Store) Idempotent(ctx context.Context, tokenID int64, key string) (jobstore.Idempotent, error) {
	return idempotent(ctx, s.rc, tokenID, key)
}

func idempotent(ctx context.Context, q querier, tokenID int64, key string) (jobstore.Idempotent, error) {
	rec, err := sqlstore.ScanIdempotent(q.QueryRowContext(ctx, `SELECT request_hash, reply, created_at FROM api_idempotency WHERE token_id = ? AND key = ?`,
		tokenID, key), times, tokenID, key)
	return sqlstore.Found(rec, err, jobstore.ErrNotFound, "find idempotent submit")
}

// insertJobs submits specs in tx, each with its submit event (the job's
// queued event), as Submit does.
func insertJobs(ctx context.Context, tx txn, specs []jobstore.JobSpec) ([]jobstore.Job, error) {
	jobs := make([]jobstore.Job, 0, len(specs))
	for _, spec := range specs {
		id, task, err := sqlstore.PrepareSubmit(spec)
		if err != nil {
			return nil, err
		}
		p := jobstore.Policy(spec)
		var notBefore any
		if !spec.NotBefore.IsZero() {
			notBefore = formatTime(spec.NotBefore)
		}
		var scheduleID, scheduledAt any
		if spec.ScheduleID != "" {
			scheduleID, scheduledAt = spec.ScheduleID, formatTime(spec.ScheduledAt)
		}
		j, err := scanJob(tx.QueryRowContext(ctx, `
			INSERT INTO jobs (id, status, task, project, priority, not_before, max_attempts, submitted_by, schedule_id, scheduled_at)
			VALUES (?, 'QUEUED', ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING
			RETURNING `+jobColumns, id, string(task), p.Project, p.Priority, notBefore, p.MaxAttempts, p.SubmittedBy, scheduleID, scheduledAt))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("submit job %s: id in use: %w", id, jobstore.ErrConflict)
		}
		if err != nil {
			return nil, fmt.Errorf("submit job %s: %w", id, err)
		}
		// The job's queued event, as Submit records it.
		if err := recordDetail(ctx, tx, id, jobstore.VerbSubmit, "", 0, true, p.SubmittedBy); err != nil {
			return nil, fmt.Errorf("submit job %s: %w", id, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// SubmitAll submits specs in one transaction.
func (s *Store) SubmitAll(ctx context.Context, specs []jobstore.JobSpec) ([]jobstore.Job, error) {
	var jobs []jobstore.Job
	err := s.write(ctx, func(tx txn) error {
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
	err := s.write(ctx, func(tx txn) error {
		stored, err := idempotent(ctx, tx, rec.TokenID, rec.Key)
		if err == nil {
			out = stored
			out.Replayed = true
			if stored.RequestHash != rec.RequestHash {
				return answer(fmt.Errorf("submit with idempotency key: %w", jobstore.ErrIdempotencyMismatch))
			}
			return nil
		}
		if !errors.Is(err, jobstore.ErrNotFound) {
			return err
		}
		jobs, err := insertJobs(ctx, tx, specs)
		if err != nil {
			return err
		}
		doc, err := reply(jobs)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO api_idempotency (token_id, key, request_hash, reply) VALUES (?, ?, ?, ?)`,
			rec.TokenID, rec.Key, rec.RequestHash, string(doc)); err != nil {
			return fmt.Errorf("store idempotent reply: %w", err)
		}
		out = rec
		out.Reply = doc
		return nil
	})
	return out, err
}

// RecordAPIDenial counts a refused request in its token's row of its kind
// and minute.
func (s *Store) RecordAPIDenial(ctx context.Context, d jobstore.APIDenial) error {
	err := s.write(ctx, func(tx txn) error {
		_, err := tx.ExecContext(ctx, `
			INSERT INTO api_denials (token_name, kind, window_start, count, method, route, job_id, project, at)
			SELECT ?, ?, substr(n.t, 1, 16) || ':00.000', 1, ?, ?, ?, ?, n.t FROM (SELECT strftime('%Y-%m-%d %H:%M:%f', 'now') AS t) n
			WHERE true
			ON CONFLICT (token_name, kind, window_start) DO UPDATE SET count = count + 1,
				method = excluded.method, route = excluded.route, job_id = excluded.job_id, project = excluded.project, at = excluded.at`,
			d.TokenName, jobstore.DenialKind(d), d.Method, d.Route, d.JobID, d.Project)
		return err
	})
	if err != nil {
		return fmt.Errorf("record api denial: %w", err)
	}
	return nil
}

// APIDenials lists the rows of refusals, oldest first.
func (s *Store) APIDenials(ctx context.Context) ([]jobstore.APIDenial, error) {
	rows, err := s.query(ctx, `SELECT `+sqlstore.DenialColumns+` FROM api_denials ORDER BY id`)
	return sqlstore.List(rows, err, func(r sqlstore.Row) (jobstore.APIDenial, error) { return sqlstore.ScanDenial(r, times) }, "list api denials")
}

// ListJobPage lists jobs newest first from a cursor (the jobs' rowid, in
// insertion order since jobs are never deleted). A copy made with VACUUM
// INTO may number the rows anew: cursors are for paging now, not for
// keeping.
func (s *Store) ListJobPage(ctx context.Context, f jobstore.JobPageFilter) (jobstore.JobPage, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q := `SELECT ` + jobColumns + `, rowid FROM jobs WHERE 1 = 1`
	var args []any
	in := func(col string, vals []string) {
		if len(vals) == 0 {
			q += ` AND 0`
			return
		}
		q += ` AND ` + col + ` IN (?` + strings.Repeat(`, ?`, len(vals)-1) + `)`
		for _, v := range vals {
			args = append(args, v)
		}
	}
	if f.Projects != nil {
		in("project", f.Projects)
	}
	if len(f.Statuses) > 0 {
		in("status", f.Statuses)
	}
	if f.AgentID != "" {
		q += ` AND substr(worker_id, 1, length(?) + 1) = ? || '/'`
		args = append(args, f.AgentID, f.AgentID)
	}
	if f.Phone != "" {
		q += ` AND (device_serial = ? OR json_extract(task, '$.device.serial') = ?)`
		args = append(args, f.Phone, f.Phone)
	}
	if f.After > 0 {
		q += ` AND rowid < ?`
		args = append(args, f.After)
	}
	q += ` ORDER BY rowid DESC LIMIT ?`
	args = append(args, limit+1)
	rows, err := s.rc.QueryContext(ctx, q, args...)
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
