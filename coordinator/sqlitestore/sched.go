package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// devCTE is the free usable phones of owner ?1 among the phones ?2 (JSON);
// a phone without a platform is an Android phone (protocol.PlatformOf).
const devCTE = `
	dev AS (
		SELECT json_extract(d.value, '$.serial') AS serial,
		       COALESCE(NULLIF(json_extract(d.value, '$.platform'), ''), '` + protocol.PlatformAndroid + `') AS platform,
		       COALESCE(json_extract(d.value, '$.model'), '') AS model,
		       COALESCE(json_extract(d.value, '$.tags'), '[]') AS tags,
		       json_extract(d.value, '$.battery') AS battery,
		       json_extract(d.value, '$.temp_c') AS temp_c,
		       json_extract(d.value, '$.sdk') AS sdk,
		       json_extract(d.value, '$.screen_width') AS screen_width,
		       json_extract(d.value, '$.screen_height') AS screen_height,
		       json_extract(d.value, '$.ime') AS ime,
		       json_extract(d.value, '$.apps') AS apps,
		       COALESCE(json_extract(d.value, '$.projects'), '[]') AS projects,
		       COALESCE(json_extract(d.value, '$.projects_only'), 0) AS projects_only
		FROM json_each(?2) d
		WHERE json_extract(d.value, '$.serial') NOT IN (
			SELECT device_serial FROM jobs
			WHERE worker_id = ?1 AND status = 'IN_PROGRESS' AND device_serial IS NOT NULL)
	)`

// matchSerial is the first free phone in serial order whose fields satisfy
// the selector of job j, NULL when none does; the same rule as
// protocol.DeviceSelector.Matches, and whose projects allow j's
// (jobstore.DeviceProjects).
const matchSerial = `(
			SELECT dev.serial FROM dev
			WHERE COALESCE(json_extract(j.task, '$.device.serial'), '') IN ('', dev.serial)
			  AND COALESCE(json_extract(j.task, '$.device.model'), '') IN ('', dev.model)
			  AND COALESCE(json_extract(j.task, '$.device.platform'), '') IN ('', dev.platform)
			  AND NOT EXISTS (
				SELECT 1 FROM json_each(j.task, '$.device.tags') t
				WHERE t.value NOT IN (SELECT value FROM json_each(dev.tags)))
			  AND ` + factsMatch + `
			  AND ` + imeMatch + `
			  AND EXISTS (SELECT 1 FROM json_each(dev.projects) p WHERE p.value = j.project) = (dev.projects_only <> 0)
			ORDER BY dev.serial
			LIMIT 1)`

// factsMatch: the phone dev's facts are within the fact limits of job j's
// selector; a fact the phone does not know (NULL) fails a limit on it.
const factsMatch = `(json_extract(j.task, '$.device.min_battery') IS NULL OR dev.battery >= json_extract(j.task, '$.device.min_battery'))
			  AND (json_extract(j.task, '$.device.max_temp_c') IS NULL OR dev.temp_c <= json_extract(j.task, '$.device.max_temp_c'))
			  AND (json_extract(j.task, '$.device.min_sdk') IS NULL OR dev.sdk >= json_extract(j.task, '$.device.min_sdk'))
			  AND (json_extract(j.task, '$.device.max_sdk') IS NULL OR dev.sdk <= json_extract(j.task, '$.device.max_sdk'))
			  AND (json_extract(j.task, '$.device.min_screen_width') IS NULL OR dev.screen_width >= json_extract(j.task, '$.device.min_screen_width'))
			  AND (json_extract(j.task, '$.device.min_screen_height') IS NULL OR dev.screen_height >= json_extract(j.task, '$.device.min_screen_height'))
			  AND ` + appsMatch

// appsMatch: the phone dev has every app of job j's selector at a version
// its requirement allows: each of the task's app_keys (sqlstore.AppKey)
// holds for the phone's app (sqlstore.ClaimApp), comparing the version
// keys as text (BINARY: byte by byte). An app the phone does not list, a
// version that does not compare (NULL) or apps not known (dev.apps NULL)
// fail. The key's field is "name" or "code", written by
// sqlstore.PrepareSubmit.
const appsMatch = `NOT EXISTS (
			SELECT 1 FROM json_each(j.task, '$.app_keys') r
			WHERE NOT COALESCE((
				SELECT CASE json_extract(r.value, '$.op')
					WHEN '*' THEN 1
					WHEN '=' THEN json_extract(a.value, '$.' || json_extract(r.value, '$.field')) = json_extract(r.value, '$.key')
					WHEN '>' THEN json_extract(a.value, '$.' || json_extract(r.value, '$.field')) > json_extract(r.value, '$.key')
					WHEN '>=' THEN json_extract(a.value, '$.' || json_extract(r.value, '$.field')) >= json_extract(r.value, '$.key')
					WHEN '<' THEN json_extract(a.value, '$.' || json_extract(r.value, '$.field')) < json_extract(r.value, '$.key')
					WHEN '<=' THEN json_extract(a.value, '$.' || json_extract(r.value, '$.field')) <= json_extract(r.value, '$.key')
				END
				FROM json_each(dev.apps) a WHERE a.key = json_extract(r.value, '$.package')), 0))`

// imeMatch: the phone dev can type job j's text: it is not known to lack
// the input method (ime 0), or j has no text step beyond printable ASCII
// (protocol.Task.NeedsIME; GLOB compares code points).
const imeMatch = `(dev.ime IS NOT 0 OR NOT EXISTS (
			SELECT 1 FROM json_each(j.task, '$.steps') s
			WHERE json_extract(s.value, '$.op') = '` + protocol.OpText + `'
			  AND json_extract(s.value, '$.text') GLOB '*[^ -~]*'))`

// canRun: job j has no effect steps (protocol.Task.HasEffects) or ?3 (the
// agent may take them) is true.
const canRun = `(?3 OR NOT EXISTS (
			SELECT 1 FROM json_each(j.task, '$.steps') s WHERE json_type(s.value, '$.effect') = 'object'))`

// projectLimit is the limit of the project p: its entry in ?4 (JSON object
// by project) or else ?5; 0 means none.
func projectLimit(p string) string {
	return `COALESCE((SELECT l.value FROM json_each(?4) l WHERE l.key = ` + p + `), ?5)`
}

// running counts the in-progress jobs of the project p (from an index on
// project and status).
func running(p string) string {
	return `(SELECT count(*) FROM jobs r WHERE r.project = ` + p + ` AND r.status = 'IN_PROGRESS')`
}

// due: the job j's not_before, if any, has passed on the database clock.
const due = `(j.not_before IS NULL OR j.not_before <= ` + now + `)`

// pickQueuedSQL picks the first due queued job (its not_before passed on
// the database clock), highest priority first and oldest first within one
// priority, whose selector matches a free usable phone of owner ?1 among
// the phones ?2 and that the agent may run (canRun), with the first such
// phone in serial order, within the project limits ?4 and ?5. It walks the
// projects that have queued jobs (qp: one descent of jobs_queued_project
// each), drops those whose in-progress jobs reach their limit, takes the
// first candidate of each other project (one index scan each, stopping at
// the first match) and picks the first of these: a project at its limit is
// skipped as a whole, however many jobs it has queued. The grant itself is
// a separate UPDATE that checks the job's state again; both run in one
// BEGIN IMMEDIATE transaction, so no other writer (of any agent or
// coordinator) comes between the count and the grant.
var pickQueuedSQL = `
	WITH RECURSIVE` + devCTE + `, qp(project) AS (
		SELECT (SELECT project FROM jobs WHERE status = 'QUEUED' ORDER BY project LIMIT 1)
		UNION ALL
		SELECT (SELECT q.project FROM jobs q WHERE q.status = 'QUEUED' AND q.project > qp.project
		        ORDER BY q.project LIMIT 1)
		FROM qp WHERE qp.project IS NOT NULL
	), open(project) AS (
		SELECT project FROM qp
		WHERE project IS NOT NULL
		  AND (` + projectLimit(`qp.project`) + ` <= 0 OR ` + running(`qp.project`) + ` < ` + projectLimit(`qp.project`) + `)
	), cand(id) AS (
		SELECT (SELECT j.id FROM jobs j
		        WHERE j.status = 'QUEUED' AND j.project = open.project
		          AND ` + due + `
		          AND ` + grantable + `
		          AND ` + canRun + `
		          AND ` + matchSerial + ` IS NOT NULL
		        ORDER BY j.priority DESC, j.created_at, j.rowid
		        LIMIT 1)
		FROM open
	)
	SELECT j.id, j.lease_generation, COALESCE(j.worker_id, ''), ` + matchSerial + `
	FROM cand JOIN jobs j ON j.id = cand.id
	ORDER BY j.priority DESC, j.created_at, j.rowid
	LIMIT 1`

// pickExpiredSQL picks the longest-expired lease of another owner than ?1
// whose job matches a free usable phone and that the agent may run, like
// pickQueuedSQL, skipping jobs of a project with more in-progress jobs
// than its limit (the job itself is one of them).
var pickExpiredSQL = `
	WITH` + devCTE + `
	SELECT id, lease_generation, COALESCE(worker_id, ''), serial FROM (
		SELECT j.id, j.lease_generation, j.worker_id, j.lease_expires_at, ` + matchSerial + ` AS serial
		FROM jobs j
		WHERE j.status = 'IN_PROGRESS' AND j.lease_expires_at <= ` + now + ` AND j.worker_id <> ?1
		  AND ` + canRun + `
		  AND (` + projectLimit(`j.project`) + ` <= 0 OR ` + running(`j.project`) + ` <= ` + projectLimit(`j.project`) + `)
		  AND ` + grantable + `
	) WHERE serial IS NOT NULL
	ORDER BY lease_expires_at, id
	LIMIT 1`

var (
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

// canGrantSQL is true when the agent (first argument) is neither draining
// nor registered under another boot than the second, and the owner (third)
// holds fewer in-progress jobs than the fourth.
const canGrantSQL = `
		SELECT NOT EXISTS (SELECT 1 FROM agents
			WHERE agent_id = ? AND (draining = 1 OR agent_draining = 1 OR boot_id <> ?))
		   AND (SELECT count(*) FROM jobs WHERE worker_id = ? AND status = 'IN_PROGRESS') < ?`

// canGrant reports whether c's agent may take one more job: it is neither
// draining nor registered under another boot, and holds fewer than c.Slots.
func (s *Store) canGrant(ctx context.Context, tx txn, c sqlstore.Claim) (bool, error) {
	var ok bool
	err := tx.QueryRowContext(ctx, canGrantSQL, c.AgentID, c.BootID, c.Owner, c.Slots).Scan(&ok)
	return ok, err
}

// ClaimFor grants the first due queued job, highest priority first, oldest
// first within one priority, matching a free phone of req.Owner, within
// the project limits.
func (s *Store) ClaimFor(ctx context.Context, req jobstore.ClaimRequest) (jobstore.Lease, error) {
	c, err := sqlstore.PrepareClaim(req)
	if err != nil {
		return jobstore.Lease{}, fmt.Errorf("claim job for %s: %w", req.Owner, err)
	}
	var l jobstore.Lease
	err = s.write(ctx, func(tx txn) error {
		ok, err := s.canGrant(ctx, tx, c)
		if err != nil {
			return err
		}
		if !ok {
			return answer(jobstore.ErrNoJob)
		}
		var (
			id, prevOwner, serial string
			gen                   int64
		)
		err = tx.QueryRowContext(ctx, pickQueuedSQL, c.Owner, string(c.Devices), c.Effects, string(c.Limits), c.DefaultLimit).Scan(&id, &gen, &prevOwner, &serial)
		if errors.Is(err, sql.ErrNoRows) {
			return answer(jobstore.ErrNoJob)
		}
		if err != nil {
			return err
		}
		l, err = scanLease(tx.QueryRowContext(ctx, claimPickedSQL, c.Owner, serial, modifier(c.TTL), id), id, c.Owner)
		if err != nil {
			return err // the pick and the grant share the transaction: the row is there
		}
		l.Device = serial
		return record(ctx, tx, id, jobstore.VerbClaim, c.Owner, l.Token.Generation, true)
	})
	if err != nil {
		return jobstore.Lease{}, fmt.Errorf("claim job for %s: %w", req.Owner, err)
	}
	return l, nil
}

// TakeOverExpired grants the longest-expired lease matching a free phone of
// req.Owner to it.
func (s *Store) TakeOverExpired(ctx context.Context, req jobstore.ClaimRequest) (jobstore.Lease, fencing.Token, error) {
	c, err := sqlstore.PrepareClaim(req)
	if err != nil {
		return jobstore.Lease{}, fencing.Token{}, fmt.Errorf("take over expired lease for %s: %w", req.Owner, err)
	}
	var (
		l   jobstore.Lease
		old fencing.Token
	)
	err = s.write(ctx, func(tx txn) error {
		ok, err := s.canGrant(ctx, tx, c)
		if err != nil {
			return err
		}
		if !ok {
			return answer(jobstore.ErrNoJob)
		}
		var serial string
		err = tx.QueryRowContext(ctx, pickExpiredSQL, c.Owner, string(c.Devices), c.Effects, string(c.Limits), c.DefaultLimit).Scan(&old.JobID, &old.Generation, &old.Owner, &serial)
		if errors.Is(err, sql.ErrNoRows) {
			return answer(jobstore.ErrNoJob)
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
		if err := recordEnd(ctx, tx, old.JobID, jobstore.VerbReclaim, old.Owner, old.Generation, true, jobstore.DetailLeaseExpired,
			protocol.FailClassInfrastructure, protocol.CauseLeaseExpired); err != nil {
			return err
		}
		return recordDetail(ctx, tx, old.JobID, jobstore.VerbReassign, c.Owner, l.Token.Generation, true, jobstore.DetailLeaseExpired)
	})
	if err != nil {
		return jobstore.Lease{}, fencing.Token{}, fmt.Errorf("take over expired lease for %s: %w", req.Owner, err)
	}
	return l, old, nil
}

// AuthorizeUpload checks that tok is current and records the attempt with
// the object name as its detail.
func (s *Store) AuthorizeUpload(ctx context.Context, tok fencing.Token, name string) error {
	if err := protocol.ValidateArtifactName(name); err != nil {
		return fmt.Errorf("authorize upload of %s: %w", tok, err)
	}
	err := s.write(ctx, func(tx txn) error {
		var ok bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM jobs
			WHERE id = ? AND lease_generation = ? AND worker_id = ? AND status = 'IN_PROGRESS')`,
			tok.JobID, tok.Generation, tok.Owner).Scan(&ok); err != nil {
			return err
		}
		if err := recordDetail(ctx, tx, tok.JobID, jobstore.VerbUpload, tok.Owner, tok.Generation, ok, name); err != nil {
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

// RecordRefused counts an attempt refused before any fenced statement in
// its agent's row of its verb and minute.
func (s *Store) RecordRefused(ctx context.Context, agentID, verb string, tok fencing.Token, detail string) error {
	err := s.write(ctx, func(tx txn) error {
		_, err := tx.ExecContext(ctx, `
			INSERT INTO agent_refusals (agent_id, verb, window_start, count, job_id, owner, generation, detail, at)
			SELECT ?, ?, substr(n.t, 1, 16) || ':00.000', 1, ?, ?, ?, ?, n.t FROM (SELECT strftime('%Y-%m-%d %H:%M:%f', 'now') AS t) n
			WHERE true
			ON CONFLICT (agent_id, verb, window_start) DO UPDATE SET count = count + 1,
				job_id = excluded.job_id, owner = excluded.owner, generation = excluded.generation, detail = excluded.detail, at = excluded.at`,
			agentID, verb, tok.JobID, tok.Owner, tok.Generation, detail)
		return err
	})
	if err != nil {
		return fmt.Errorf("record refused %s of %s: %w", verb, tok, err)
	}
	return nil
}

// AgentRefusals lists the rows of refused agent requests, oldest first.
func (s *Store) AgentRefusals(ctx context.Context) ([]jobstore.AgentRefusal, error) {
	rows, err := s.query(ctx, `SELECT `+sqlstore.RefusalColumns+` FROM agent_refusals ORDER BY id`)
	return sqlstore.List(rows, err, func(r sqlstore.Row) (jobstore.AgentRefusal, error) { return sqlstore.ScanRefusal(r, times) }, "list agent refusals")
}

var cancelSQL = `
	UPDATE jobs
	SET status = 'CANCELLED', fail_reason = ?, lease_expires_at = NULL, updated_at = ` + now + `
	WHERE id = ? AND status IN ('QUEUED', 'IN_PROGRESS')
	RETURNING id`

// Cancel ends a queued or in-progress job as CANCELLED with reason.
func (s *Store) Cancel(ctx context.Context, jobID, reason string) (fencing.Token, error) {
	var tok fencing.Token
	err := s.write(ctx, func(tx txn) error {
		var (
			status string
			owner  sql.NullString
			gen    int64
		)
		err := tx.QueryRowContext(ctx, `SELECT status, worker_id, lease_generation FROM jobs WHERE id = ?`, jobID).Scan(&status, &owner, &gen)
		if errors.Is(err, sql.ErrNoRows) {
			return answer(jobstore.ErrNotFound)
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
		if status == jobstore.StatusInProgress {
			taken = owner.String
		}
		if err := recordDetail(ctx, tx, jobID, jobstore.VerbCancel, taken, gen, accepted, reason); err != nil {
			return err
		}
		if !accepted {
			return answer(fmt.Errorf("already finished: %w", jobstore.ErrConflict))
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
func (s *Store) ListJobs(ctx context.Context, f jobstore.JobFilter) ([]jobstore.Job, error) {
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
	if f.Project != "" {
		q += ` AND project = ?`
		args = append(args, f.Project)
	}
	q += ` ORDER BY created_at, rowid`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.query(ctx, q, args...)
	return sqlstore.List(rows, err, scanJob, "list jobs")
}

// JobCounts counts jobs by status.
func (s *Store) JobCounts(ctx context.Context) (map[string]int64, error) {
	rows, err := s.query(ctx, `SELECT status, count(*) FROM jobs GROUP BY status`)
	return sqlstore.Read(rows, err, sqlstore.Counts, "count jobs")
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := errors.Join(s.r.PingContext(ctx), s.w.PingContext(ctx)); err != nil {
		return fmt.Errorf("ping sqlite: %w", err)
	}
	return nil
}
