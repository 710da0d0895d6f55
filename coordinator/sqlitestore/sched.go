package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// pickSQL picks the first job (by the given candidate condition and order)
// whose selector matches a free usable phone of owner ?1 among the phones
// ?2 (JSON), with the first such phone in serial order; the same rule as
// protocol.DeviceSelector.Matches. A job with effect steps
// (protocol.Task.HasEffects) is picked only when ?3 (the agent may take
// them) is true. The grant itself is a separate UPDATE that checks the
// job's state again; both run in one BEGIN IMMEDIATE transaction, so no
// other writer comes between them.
func pickSQL(cond, order string) string {
	return `
	WITH dev AS (
		SELECT json_extract(d.value, '$.serial') AS serial,
		       COALESCE(json_extract(d.value, '$.model'), '') AS model,
		       COALESCE(json_extract(d.value, '$.tags'), '[]') AS tags
		FROM json_each(?2) d
		WHERE json_extract(d.value, '$.serial') NOT IN (
			SELECT device_serial FROM jobs
			WHERE worker_id = ?1 AND status = 'IN_PROGRESS' AND device_serial IS NOT NULL)
	)
	SELECT id, lease_generation, COALESCE(worker_id, ''), serial FROM (
		SELECT j.id, j.lease_generation, j.worker_id, j.created_at, j.lease_expires_at, j.rowid AS rid, (
			SELECT dev.serial FROM dev
			WHERE COALESCE(json_extract(j.task, '$.device.serial'), '') IN ('', dev.serial)
			  AND COALESCE(json_extract(j.task, '$.device.model'), '') IN ('', dev.model)
			  AND NOT EXISTS (
				SELECT 1 FROM json_each(j.task, '$.device.tags') t
				WHERE t.value NOT IN (SELECT value FROM json_each(dev.tags)))
			ORDER BY dev.serial
			LIMIT 1) AS serial
		FROM jobs j
		WHERE ` + cond + `
		  AND (?3 OR NOT EXISTS (
			SELECT 1 FROM json_each(j.task, '$.steps') s WHERE json_type(s.value, '$.effect') = 'object'))
	) WHERE serial IS NOT NULL
	ORDER BY ` + order + `
	LIMIT 1`
}

var (
	pickQueuedSQL  = pickSQL(`j.status = 'QUEUED'`+` AND `+grantable, `created_at, rid`)
	pickExpiredSQL = pickSQL(`j.status = 'IN_PROGRESS' AND j.lease_expires_at <= `+now+` AND j.worker_id <> ?1`+` AND `+grantable, `lease_expires_at, id`)

	claimPickedSQL = `
	UPDATE jobs
	SET status = 'IN_PROGRESS',
	    lease_generation = lease_generation + 1,
	    worker_id = ?,
	    device_serial = ?,
	    lease_expires_at = ` + nowPlus + `,` + grantCounts + `,
	    updated_at = ` + now + `
	WHERE id = ? AND status = 'QUEUED'
	RETURNING lease_generation, lease_expires_at, task, deadline_at`

	takeOverPickedSQL = `
	UPDATE jobs
	SET lease_generation = lease_generation + 1,
	    worker_id = ?,
	    device_serial = ?,
	    lease_expires_at = ` + nowPlus + `,` + grantCounts + `,
	    attempt_ends = ` + attemptEnd(`'`+protocol.FailClassInfrastructure+`'`, `'`+protocol.CauseLeaseExpired+`'`, `NULL`) + `,
	    updated_at = ` + now + `
	WHERE id = ? AND lease_generation = ? AND worker_id = ? AND status = 'IN_PROGRESS'
	  AND lease_expires_at <= ` + now + `
	RETURNING lease_generation, lease_expires_at, task, deadline_at`
)

// canGrant reports whether c's agent may take one more job: it is neither
// draining nor registered under another boot, and holds fewer than c.Slots.
func canGrant(ctx context.Context, tx *sql.Tx, c sqlstore.Claim) (bool, error) {
	var ok bool
	err := tx.QueryRowContext(ctx, `
		SELECT NOT EXISTS (SELECT 1 FROM agents
			WHERE agent_id = ? AND (draining = 1 OR agent_draining = 1 OR boot_id <> ?))
		   AND (SELECT count(*) FROM jobs WHERE worker_id = ? AND status = 'IN_PROGRESS') < ?`,
		c.AgentID, c.BootID, c.Owner, c.Slots).Scan(&ok)
	return ok, err
}

// ClaimFor grants the oldest queued job matching a free phone of req.Owner.
func (s *Store) ClaimFor(ctx context.Context, req coordinator.ClaimRequest) (coordinator.Lease, error) {
	c, err := sqlstore.PrepareClaim(req)
	if err != nil {
		return coordinator.Lease{}, fmt.Errorf("claim job for %s: %w", req.Owner, err)
	}
	var l coordinator.Lease
	err = s.write(ctx, func(tx *sql.Tx) error {
		ok, err := canGrant(ctx, tx, c)
		if err != nil {
			return err
		}
		if !ok {
			return answer(coordinator.ErrNoJob)
		}
		var (
			id, prevOwner, serial string
			gen                   int64
		)
		err = tx.QueryRowContext(ctx, pickQueuedSQL, c.Owner, string(c.Devices), c.Effects).Scan(&id, &gen, &prevOwner, &serial)
		if errors.Is(err, sql.ErrNoRows) {
			return answer(coordinator.ErrNoJob)
		}
		if err != nil {
			return err
		}
		l, err = scanLease(tx.QueryRowContext(ctx, claimPickedSQL, c.Owner, serial, modifier(c.TTL), id), id, c.Owner)
		if err != nil {
			return err // the pick and the grant share the transaction: the row is there
		}
		l.Device = serial
		return record(ctx, tx, id, sqlstore.VerbClaim, c.Owner, l.Token.Generation, true)
	})
	if err != nil {
		return coordinator.Lease{}, fmt.Errorf("claim job for %s: %w", req.Owner, err)
	}
	return l, nil
}

// TakeOverExpired grants the longest-expired lease matching a free phone of
// req.Owner to it.
func (s *Store) TakeOverExpired(ctx context.Context, req coordinator.ClaimRequest) (coordinator.Lease, fencing.Token, error) {
	c, err := sqlstore.PrepareClaim(req)
	if err != nil {
		return coordinator.Lease{}, fencing.Token{}, fmt.Errorf("take over expired lease for %s: %w", req.Owner, err)
	}
	var (
		l   coordinator.Lease
		old fencing.Token
	)
	err = s.write(ctx, func(tx *sql.Tx) error {
		ok, err := canGrant(ctx, tx, c)
		if err != nil {
			return err
		}
		if !ok {
			return answer(coordinator.ErrNoJob)
		}
		var serial string
		err = tx.QueryRowContext(ctx, pickExpiredSQL, c.Owner, string(c.Devices), c.Effects).Scan(&old.JobID, &old.Generation, &old.Owner, &serial)
		if errors.Is(err, sql.ErrNoRows) {
			return answer(coordinator.ErrNoJob)
		}
		if err != nil {
			return err
		}
		l, err = scanLease(tx.QueryRowContext(ctx, takeOverPickedSQL, c.Owner, serial, modifier(c.TTL),
			old.JobID, old.Generation, old.Owner), old.JobID, c.Owner)
		if err != nil {
			return err
		}
		l.Device = serial
		if err := recordEnd(ctx, tx, old.JobID, sqlstore.VerbReclaim, old.Owner, old.Generation, true, sqlstore.DetailLeaseExpired,
			protocol.FailClassInfrastructure, protocol.CauseLeaseExpired); err != nil {
			return err
		}
		return recordDetail(ctx, tx, old.JobID, sqlstore.VerbReassign, c.Owner, l.Token.Generation, true, sqlstore.DetailLeaseExpired)
	})
	if err != nil {
		return coordinator.Lease{}, fencing.Token{}, fmt.Errorf("take over expired lease for %s: %w", req.Owner, err)
	}
	return l, old, nil
}

// AuthorizeUpload checks that tok is current and records the attempt with
// the object name as its detail.
func (s *Store) AuthorizeUpload(ctx context.Context, tok fencing.Token, name string) error {
	if err := protocol.ValidateArtifactName(name); err != nil {
		return fmt.Errorf("authorize upload of %s: %w", tok, err)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		var ok bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM jobs
			WHERE id = ? AND lease_generation = ? AND worker_id = ? AND status = 'IN_PROGRESS')`,
			tok.JobID, tok.Generation, tok.Owner).Scan(&ok); err != nil {
			return err
		}
		if err := recordDetail(ctx, tx, tok.JobID, sqlstore.VerbUpload, tok.Owner, tok.Generation, ok, name); err != nil {
			return err
		}
		if ok {
			return nil
		}
		return refusal(ctx, tx, tok.JobID)
	})
	if err != nil {
		return fmt.Errorf("authorize upload %s of %s: %w", name, tok, err)
	}
	return nil
}

// RecordRefused records an attempt refused before any fenced statement.
func (s *Store) RecordRefused(ctx context.Context, verb string, tok fencing.Token, detail string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		return recordDetail(ctx, tx, tok.JobID, verb, tok.Owner, tok.Generation, false, detail)
	})
	if err != nil {
		return fmt.Errorf("record refused %s of %s: %w", verb, tok, err)
	}
	return nil
}

var cancelSQL = `
	UPDATE jobs
	SET status = 'CANCELLED', fail_reason = ?, lease_expires_at = NULL, updated_at = ` + now + `
	WHERE id = ? AND status IN ('QUEUED', 'IN_PROGRESS')
	RETURNING id`

// Cancel ends a queued or in-progress job as CANCELLED with reason.
func (s *Store) Cancel(ctx context.Context, jobID, reason string) (fencing.Token, error) {
	var tok fencing.Token
	err := s.write(ctx, func(tx *sql.Tx) error {
		var (
			status string
			owner  sql.NullString
			gen    int64
		)
		err := tx.QueryRowContext(ctx, `SELECT status, worker_id, lease_generation FROM jobs WHERE id = ?`, jobID).Scan(&status, &owner, &gen)
		if errors.Is(err, sql.ErrNoRows) {
			return answer(coordinator.ErrNotFound)
		}
		if err != nil {
			return err
		}
		var id string
		err = tx.QueryRowContext(ctx, cancelSQL, reason, jobID).Scan(&id)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		accepted := err == nil
		taken := ""
		if status == coordinator.StatusInProgress {
			taken = owner.String
		}
		if err := recordDetail(ctx, tx, jobID, sqlstore.VerbCancel, taken, gen, accepted, reason); err != nil {
			return err
		}
		if !accepted {
			return answer(fmt.Errorf("already finished: %w", coordinator.ErrConflict))
		}
		if taken != "" {
			tok = fencing.Token{JobID: jobID, Owner: taken, Generation: gen}
		}
		return nil
	})
	if err != nil {
		return fencing.Token{}, fmt.Errorf("cancel job %s: %w", jobID, err)
	}
	return tok, nil
}

// ListJobs lists jobs oldest first.
func (s *Store) ListJobs(ctx context.Context, f coordinator.JobFilter) ([]coordinator.Job, error) {
	q := `SELECT ` + jobColumns + ` FROM jobs WHERE 1 = 1`
	var args []any
	if len(f.Statuses) > 0 {
		q += ` AND status IN (?` + strings.Repeat(`, ?`, len(f.Statuses)-1) + `)`
		for _, st := range f.Statuses {
			args = append(args, st)
		}
	}
	if f.AgentID != "" {
		q += ` AND substr(worker_id, 1, length(?) + 1) = ? || '/'`
		args = append(args, f.AgentID, f.AgentID)
	}
	q += ` ORDER BY created_at, rowid`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var out []coordinator.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}

// JobCounts counts jobs by status.
func (s *Store) JobCounts(ctx context.Context) (map[string]int64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT status, count(*) FROM jobs GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			st string
			n  int64
		)
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		out[st] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	return out, nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := errors.Join(s.r.PingContext(ctx), s.w.PingContext(ctx)); err != nil {
		return fmt.Errorf("ping sqlite: %w", err)
	}
	return nil
}
