package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// claimCTEs are the common parts of ClaimFor and TakeOverExpired:
//
//	$1 owner, $2 ttl µs, $3 usable phones (JSON), $4 slots, $5 agent id, $6 boot id,
//	$7 whether the agent may take jobs with effect steps,
//	$8 project limits (JSON object by project), $9 default project limit
//
// (WITH RECURSIVE allows the walk over projects, qp, in claimForSQL.)
// agent_ok: the agent is not draining and not registered under another
// boot (an agent never seen is allowed); load: jobs the owner holds; dev:
// the phones holding none of them (a phone without a platform is an
// Android phone, protocol.PlatformOf). match(j) is the first free phone in
// serial order whose fields satisfy j's selector (protocol.DeviceSelector.Matches);
// The phone takes j only if its projects allow j's project
// (jobstore.DeviceProjects); canRun(j): the agent may run j (effect steps only with $7,
// protocol.Task.HasEffects).
const claimCTEs = `
	WITH RECURSIVE agent_ok AS (
		SELECT NOT EXISTS (SELECT 1 FROM agents
			WHERE agent_id = $5 AND (draining OR agent_draining OR boot_id <> $6)) AS ok
	), load AS (
		SELECT count(*) AS n FROM jobs WHERE worker_id = $1 AND status = 'IN_PROGRESS'
	), dev AS (
		SELECT d.serial, COALESCE(NULLIF(d.platform, ''), '` + protocol.PlatformAndroid + `') AS platform, COALESCE(d.model, '') AS model, COALESCE(d.tags, '[]'::jsonb) AS tags,
		       d.battery, d.temp_c, d.sdk, d.screen_width, d.screen_height, d.ime, d.apps,
		       COALESCE(d.projects, '[]'::jsonb) AS projects, COALESCE(d.projects_only, false) AS projects_only
		FROM jsonb_to_recordset($3::jsonb) AS d(serial text, platform text, model text, tags jsonb,
		       battery integer, temp_c double precision, sdk integer, screen_width integer, screen_height integer, ime boolean,
		       apps jsonb, projects jsonb, projects_only boolean)
		WHERE d.serial NOT IN (SELECT device_serial FROM jobs
			WHERE worker_id = $1 AND status = 'IN_PROGRESS' AND device_serial IS NOT NULL)
	)`

// factsMatch: the phone dev's facts are within the fact limits of job j's
// selector; a fact the phone does not know (NULL) fails a limit on it.
const factsMatch = `(j.task->'device'->'min_battery' IS NULL OR dev.battery >= (j.task->'device'->>'min_battery')::integer)
			  AND (j.task->'device'->'max_temp_c' IS NULL OR dev.temp_c <= (j.task->'device'->>'max_temp_c')::double precision)
			  AND (j.task->'device'->'min_sdk' IS NULL OR dev.sdk >= (j.task->'device'->>'min_sdk')::integer)
			  AND (j.task->'device'->'max_sdk' IS NULL OR dev.sdk <= (j.task->'device'->>'max_sdk')::integer)
			  AND (j.task->'device'->'min_screen_width' IS NULL OR dev.screen_width >= (j.task->'device'->>'min_screen_width')::integer)
			  AND (j.task->'device'->'min_screen_height' IS NULL OR dev.screen_height >= (j.task->'device'->>'min_screen_height')::integer)
			  AND ` + appsMatch

// appsMatch: the phone dev has every app of job j's selector at a version
// its requirement allows: each of the task's app_keys
// (sqlstore.AppKey) holds for the phone's app (sqlstore.ClaimApp),
// comparing the version keys byte by byte (COLLATE "C"). An app the phone
// does not list, a version that does not compare (NULL) or apps not known
// (dev.apps NULL) fail.
const appsMatch = `NOT EXISTS (
			SELECT 1 FROM jsonb_array_elements(COALESCE(j.task->'app_keys', '[]'::jsonb)) r
			WHERE NOT COALESCE(CASE r->>'op'
				WHEN '*' THEN dev.apps ? (r->>'package')
				WHEN '=' THEN (dev.apps->(r->>'package')->>(r->>'field')) COLLATE "C" = (r->>'key')
				WHEN '>' THEN (dev.apps->(r->>'package')->>(r->>'field')) COLLATE "C" > (r->>'key')
				WHEN '>=' THEN (dev.apps->(r->>'package')->>(r->>'field')) COLLATE "C" >= (r->>'key')
				WHEN '<' THEN (dev.apps->(r->>'package')->>(r->>'field')) COLLATE "C" < (r->>'key')
				WHEN '<=' THEN (dev.apps->(r->>'package')->>(r->>'field')) COLLATE "C" <= (r->>'key')
			END, false))`

// imeMatch: the phone dev can type job j's text: it is not known to lack
// the input method, or j has no text step beyond printable ASCII
// (protocol.Task.NeedsIME). A session's job may have no steps (null).
const imeMatch = `(dev.ime IS NOT false OR NOT EXISTS (
			SELECT 1 FROM jsonb_array_elements(CASE jsonb_typeof(j.task->'steps') WHEN 'array' THEN j.task->'steps' ELSE '[]'::jsonb END) s
			WHERE s->>'op' = '` + protocol.OpText + `' AND s->>'text' ~ '[^\x20-\x7e]'))`

const canRun = `($7::boolean OR NOT j.task->'steps' @> '[{"effect": {}}]'::jsonb)`

const matchLateral = `
		CROSS JOIN LATERAL (
			SELECT dev.serial FROM dev
			WHERE COALESCE(j.task->'device'->>'serial', '') IN ('', dev.serial)
			  AND COALESCE(j.task->'device'->>'model', '') IN ('', dev.model)
			  AND COALESCE(j.task->'device'->>'platform', '') IN ('', dev.platform)
			  AND dev.tags @> COALESCE(j.task->'device'->'tags', '[]'::jsonb)
			  AND ` + factsMatch + `
			  AND ` + imeMatch + `
			  AND (dev.projects ? j.project) = dev.projects_only
			ORDER BY dev.serial
			LIMIT 1
		) m`

// due: the job's not_before, if any, has passed on the database clock
// (read once).
const due = `(j.not_before IS NULL OR j.not_before <= (SELECT clock_timestamp()))`

// grantOrder is the order of the queue within one project: highest
// priority first, oldest first within one priority (index
// jobs_queued_project).
const grantOrder = `j.priority DESC, j.created_at, j.seq`

// projectLimit is the limit of the project p: $8 (JSON object by
// project) or else $9; 0 means none.
func projectLimit(p string) string {
	return `COALESCE(($8::jsonb ->> ` + p + `)::integer, $9::integer)`
}

// running counts the in-progress jobs of the project p (index
// jobs_in_progress_project).
func running(p string) string {
	return `(SELECT count(*) FROM jobs r WHERE r.project = ` + p + ` AND r.status = 'IN_PROGRESS')`
}

// claimForSQL grants the first due queued job, highest priority first and
// oldest first within one priority, matching a free phone, within the
// project limits $8 and $9. It walks the projects that have queued jobs
// (qp: one descent of jobs_queued_project each), drops those whose
// in-progress jobs reach their limit, takes the first candidate of each
// other project (one scan of jobs_queued_project each, which stops at the
// first match) and grants the first of these: a project at its limit is
// skipped as a whole, however many jobs it has queued. Each project's
// candidate is locked with SKIP LOCKED, so a grant running at the same
// moment (another agent, another coordinator) takes the project's next
// job instead. Under limits the caller holds sqlstore.ProjectLockKey, so
// the counts include every grant before.
var claimForSQL = claimCTEs + `, qp AS (
		(SELECT project FROM jobs WHERE status = 'QUEUED' ORDER BY project LIMIT 1)
		UNION ALL
		SELECT (SELECT q.project FROM jobs q WHERE q.status = 'QUEUED' AND q.project > qp.project
		        ORDER BY q.project LIMIT 1)
		FROM qp WHERE qp.project IS NOT NULL
	), open AS (
		SELECT qp.project FROM qp
		WHERE qp.project IS NOT NULL AND (SELECT ok FROM agent_ok) AND (SELECT n FROM load) < $4
		  AND (` + projectLimit(`qp.project`) + ` <= 0
		       OR ` + running(`qp.project`) + ` < ` + projectLimit(`qp.project`) + `)
	), cand AS (
		SELECT c.* FROM open CROSS JOIN LATERAL (
			SELECT j.id, j.priority, j.created_at, j.seq, m.serial FROM jobs j` + matchLateral + `
			WHERE j.status = 'QUEUED' AND j.project = open.project AND ` + due + ` AND ` + canRun + `
			  AND ` + grantable + `
			ORDER BY ` + grantOrder + `
			LIMIT 1
			FOR UPDATE OF j SKIP LOCKED
		) c
	), pick AS (
		SELECT id, serial FROM cand
		ORDER BY priority DESC, created_at, seq
		LIMIT 1
	)` + claimGrant

// claimGrant grants the picked job.
const claimGrant = `, upd AS (
		UPDATE jobs j
		SET status = 'IN_PROGRESS',
		    lease_generation = j.lease_generation + 1,
		    worker_id = $1,
		    device_serial = pick.serial,
		    lease_expires_at = clock_timestamp() + $2::bigint * interval '1 microsecond',` + grantCounts + `,
		    updated_at = clock_timestamp()
		FROM pick
		WHERE j.id = pick.id AND j.status = 'QUEUED'
		RETURNING j.id, j.lease_generation, j.lease_expires_at, j.task, j.device_serial, j.deadline_at
	), ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted)
		SELECT id, '` + jobstore.VerbClaim + `', $1, lease_generation, true FROM upd
	)
	SELECT id, lease_generation, lease_expires_at, task, device_serial, deadline_at FROM upd`

// takeOverSQL grants the longest-expired lease of another owner whose job
// matches a free phone to $1 in one statement, with the token checked again
// in the UPDATE, and records the reclaim and the reassignment. As in
// reclaimSQL, the candidates compare with the clock read once, so that the
// expiry index bounds the scan. A job whose project has more in-progress
// jobs than its limit ($8, $9; the job itself is one of them) is skipped.
var takeOverSQL = claimCTEs + `, pick AS (
		SELECT j.id, j.worker_id AS old_owner, j.lease_generation AS old_generation, m.serial FROM jobs j` + matchLateral + `
		WHERE j.status = 'IN_PROGRESS' AND j.lease_expires_at <= (SELECT clock_timestamp()) AND j.worker_id <> $1
		  AND ` + canRun + ` AND (SELECT ok FROM agent_ok) AND (SELECT n FROM load) < $4
		  AND (` + projectLimit(`j.project`) + ` <= 0 OR ` + running(`j.project`) + ` <= ` + projectLimit(`j.project`) + `)
		  AND ` + grantable + `
		ORDER BY j.lease_expires_at, j.id
		LIMIT 1
		FOR UPDATE OF j SKIP LOCKED
	), upd AS (
		UPDATE jobs j
		SET lease_generation = j.lease_generation + 1,
		    worker_id = $1,
		    device_serial = pick.serial,
		    lease_expires_at = clock_timestamp() + $2::bigint * interval '1 microsecond',` + grantCounts + `,
		    attempt_ends = ` + attemptEnd(`'`+protocol.FailClassInfrastructure+`'`, `'`+protocol.CauseLeaseExpired+`'`, `NULL`) + `,
		    updated_at = clock_timestamp()
		FROM pick
		WHERE j.id = pick.id AND j.status = 'IN_PROGRESS'
		  AND j.lease_generation = pick.old_generation AND j.worker_id = pick.old_owner
		  AND j.lease_expires_at <= clock_timestamp()
		RETURNING j.id, j.lease_generation, j.lease_expires_at, j.task, j.device_serial,
		          pick.old_owner, pick.old_generation, j.deadline_at
	), ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted, detail, class, cause)
		SELECT id, '` + jobstore.VerbReclaim + `', old_owner, old_generation, true, '` + jobstore.DetailLeaseExpired + `',
		       '` + protocol.FailClassInfrastructure + `', '` + protocol.CauseLeaseExpired + `' FROM upd
		UNION ALL
		SELECT id, '` + jobstore.VerbReassign + `', $1, lease_generation, true, '` + jobstore.DetailLeaseExpired + `', '', '' FROM upd
	)
	SELECT id, lease_generation, lease_expires_at, task, device_serial, old_owner, old_generation, deadline_at FROM upd`

// lockAgent takes the transaction-scoped lock that serialises grants to one
// agent across coordinators, so each grant statement sees the grants before
// it when it counts the agent's load and busy phones.
func lockAgent(ctx context.Context, tx pgx.Tx, agentID string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, sqlstore.AgentLockKey(agentID))
	return err
}

// inAgentTx runs fn in a transaction holding the agent's grant lock.
func (s *Store) inAgentTx(ctx context.Context, agentID string, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit this is a no-op
	if err := lockAgent(ctx, tx, agentID); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// inAgentBatch runs query (one statement) after taking the agent's grant
// lock, both in one round trip: a batch is one implicit transaction, so the
// transaction-scoped lock is held until the statement's write commits, and
// the statement, which starts after the lock is granted, reads (READ
// COMMITTED) every grant committed before. With limited, the batch takes
// the project lock (sqlstore.ProjectLockKey) after the agent's, which
// serialises grants across agents likewise: a grant for another agent
// cannot come between the count of a project's in-progress jobs and the
// grant. scan reads the statement's row.
func (s *Store) inAgentBatch(ctx context.Context, agentID string, limited bool, query string, args []any, scan func(pgx.Row) error) error {
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock($1)`, sqlstore.AgentLockKey(agentID))
	if limited {
		b.Queue(`SELECT pg_advisory_xact_lock($1)`, sqlstore.ProjectLockKey)
	}
	b.Queue(query, args...)
	br := s.pool.SendBatch(ctx, b)
	locks := 1
	if limited {
		locks = 2
	}
	for range locks {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
	}
	err := scan(br.QueryRow())
	if cerr := br.Close(); err == nil || errors.Is(err, pgx.ErrNoRows) && cerr != nil {
		err = cerr
	}
	return err
}

// uniqueViolation reports a unique index refusing a write: the one-job-per-
// phone index, should a grant ever race one outside the agent lock.
func uniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// ClaimFor grants the first due queued job, highest priority first, oldest
// first within one priority, matching a free phone of req.Owner, within
// the project limits.
func (s *Store) ClaimFor(ctx context.Context, req jobstore.ClaimRequest) (jobstore.Lease, error) {
	c, err := sqlstore.PrepareClaim(req)
	if err != nil {
		return jobstore.Lease{}, fmt.Errorf("claim job for %s: %w", req.Owner, err)
	}
	var (
		l          jobstore.Lease
		jobID, dev string
		task       []byte
		deadline   *time.Time
	)
	err = s.inAgentBatch(ctx, c.AgentID, c.Limited, claimForSQL,
		[]any{c.Owner, micros(c.TTL), c.Devices, int64(c.Slots), c.AgentID, c.BootID, c.Effects, c.Limits, int64(c.DefaultLimit)},
		func(r pgx.Row) error {
			return r.Scan(&jobID, &l.Token.Generation, &l.ExpiresAt, &task, &dev, &deadline)
		})
	if errors.Is(err, pgx.ErrNoRows) || uniqueViolation(err) {
		return jobstore.Lease{}, fmt.Errorf("claim job for %s: %w", req.Owner, jobstore.ErrNoJob)
	}
	if err != nil {
		return jobstore.Lease{}, fmt.Errorf("claim job for %s: %w", req.Owner, err)
	}
	l.Device = dev
	return finishLease(l, jobID, c.Owner, task, deadline)
}

// TakeOverExpired grants the longest-expired lease matching a free phone of
// req.Owner to it.
func (s *Store) TakeOverExpired(ctx context.Context, req jobstore.ClaimRequest) (jobstore.Lease, fencing.Token, error) {
	c, err := sqlstore.PrepareClaim(req)
	if err != nil {
		return jobstore.Lease{}, fencing.Token{}, fmt.Errorf("take over expired lease for %s: %w", req.Owner, err)
	}
	var (
		l          jobstore.Lease
		old        fencing.Token
		jobID, dev string
		task       []byte
		deadline   *time.Time
	)
	err = s.inAgentBatch(ctx, c.AgentID, c.Limited, takeOverSQL,
		[]any{c.Owner, micros(c.TTL), c.Devices, int64(c.Slots), c.AgentID, c.BootID, c.Effects, c.Limits, int64(c.DefaultLimit)},
		func(r pgx.Row) error {
			return r.Scan(&jobID, &l.Token.Generation, &l.ExpiresAt, &task, &dev, &old.Owner, &old.Generation, &deadline)
		})
	if errors.Is(err, pgx.ErrNoRows) || uniqueViolation(err) {
		return jobstore.Lease{}, fencing.Token{}, fmt.Errorf("take over expired lease for %s: %w", req.Owner, jobstore.ErrNoJob)
	}
	if err != nil {
		return jobstore.Lease{}, fencing.Token{}, fmt.Errorf("take over expired lease for %s: %w", req.Owner, err)
	}
	old.JobID = jobID
	l.Device = dev
	l, err = finishLease(l, jobID, c.Owner, task, deadline)
	return l, old, err
}

const authorizeUploadSQL = `
	WITH j AS (
		SELECT id FROM jobs
		WHERE id = $1 AND lease_generation = $2 AND worker_id = $3 AND status = 'IN_PROGRESS'
		FOR SHARE
	), ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted, detail)
		SELECT $1, '` + jobstore.VerbUpload + `', $3, $2, EXISTS (SELECT 1 FROM j), $4
	)
	SELECT EXISTS (SELECT 1 FROM j)`

// AuthorizeUpload checks that tok is current, in one statement that records
// the attempt with the object name as its detail.
func (s *Store) AuthorizeUpload(ctx context.Context, tok fencing.Token, name string) error {
	if err := protocol.ValidateArtifactName(name); err != nil {
		return fmt.Errorf("authorize upload of %s: %w", tok, err)
	}
	var ok bool
	if err := s.pool.QueryRow(ctx, authorizeUploadSQL, tok.JobID, tok.Generation, tok.Owner, name).Scan(&ok); err != nil {
		return fmt.Errorf("authorize upload %s of %s: %w", name, tok, err)
	}
	if !ok {
		return s.refused(ctx, "authorize upload "+name+" of", tok)
	}
	return nil
}

// RecordRefused counts an attempt refused before any fenced statement in
// its agent's row of its verb and minute.
func (s *Store) RecordRefused(ctx context.Context, agentID, verb string, tok fencing.Token, detail string) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO agent_refusals (agent_id, verb, window_start, count, job_id, owner, generation, detail, at)
		SELECT $1, $2, date_trunc('minute', n.t), 1, $3, $4, $5, $6, n.t FROM (SELECT clock_timestamp() AS t) n
		ON CONFLICT (agent_id, verb, window_start) DO UPDATE SET count = agent_refusals.count + 1,
			job_id = EXCLUDED.job_id, owner = EXCLUDED.owner, generation = EXCLUDED.generation, detail = EXCLUDED.detail, at = EXCLUDED.at`,
		agentID, verb, tok.JobID, tok.Owner, tok.Generation, detail)
	if err != nil {
		return fmt.Errorf("record refused %s of %s: %w", verb, tok, err)
	}
	return nil
}

// AgentRefusals lists the rows of refused agent requests, oldest first.
func (s *Store) AgentRefusals(ctx context.Context) ([]jobstore.AgentRefusal, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+sqlstore.RefusalColumns+` FROM agent_refusals ORDER BY id`)
	return sqlstore.List(rows, err, func(r sqlstore.Row) (jobstore.AgentRefusal, error) { return sqlstore.ScanRefusal(r, times) }, "list agent refusals")
}

const cancelSQL = `
	WITH cur AS (
		SELECT id, status, worker_id, lease_generation FROM jobs WHERE id = $1 FOR UPDATE
	), upd AS (
		UPDATE jobs j
		SET status = 'CANCELLED', fail_reason = $2, lease_expires_at = NULL, updated_at = clock_timestamp()
		FROM cur
		WHERE j.id = cur.id AND j.status IN ('QUEUED', 'IN_PROGRESS')
		RETURNING cur.status AS old_status, cur.worker_id AS old_owner, cur.lease_generation AS old_generation
	), ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted, detail)
		SELECT $1, '` + jobstore.VerbCancel + `',
		       COALESCE((SELECT worker_id FROM cur WHERE status = 'IN_PROGRESS'), ''),
		       COALESCE((SELECT lease_generation FROM cur), 0),
		       EXISTS (SELECT 1 FROM upd), $2
	)
	SELECT EXISTS (SELECT 1 FROM cur), u.old_status, u.old_owner, u.old_generation
	FROM (SELECT 1) one LEFT JOIN upd u ON true`

// Cancel ends a queued or in-progress job as CANCELLED with reason.
func (s *Store) Cancel(ctx context.Context, jobID, reason string) (fencing.Token, error) {
	var (
		exists      bool
		status, own *string
		gen         *int64
	)
	if err := s.pool.QueryRow(ctx, cancelSQL, jobID, reason).Scan(&exists, &status, &own, &gen); err != nil {
		return fencing.Token{}, fmt.Errorf("cancel job %s: %w", jobID, err)
	}
	switch {
	case !exists:
		return fencing.Token{}, fmt.Errorf("cancel job %s: %w", jobID, jobstore.ErrNotFound)
	case status == nil:
		return fencing.Token{}, fmt.Errorf("cancel job %s: already finished: %w", jobID, jobstore.ErrConflict)
	case *status == jobstore.StatusInProgress && own != nil:
		return fencing.Token{JobID: jobID, Owner: *own, Generation: *gen}, nil
	}
	return fencing.Token{}, nil
}

// ListJobs lists jobs oldest first.
func (s *Store) ListJobs(ctx context.Context, f jobstore.JobFilter) ([]jobstore.Job, error) {
	var statuses []string
	if len(f.Statuses) > 0 {
		statuses = f.Statuses
	}
	var limit any
	if f.Limit > 0 {
		limit = int64(f.Limit)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+jobColumns+` FROM jobs
		WHERE ($1::text[] IS NULL OR status = ANY ($1))
		  AND ($2 = '' OR left(worker_id, length($2) + 1) = $2 || '/')
		  AND ($4 = '' OR project = $4)
		ORDER BY created_at, seq
		LIMIT $3::bigint`, statuses, f.AgentID, limit, f.Project)
	return sqlstore.List(rows, err, scanJob, "list jobs")
}

// JobCounts counts jobs by status.
func (s *Store) JobCounts(ctx context.Context) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM jobs GROUP BY status`)
	return sqlstore.Read(rows, err, sqlstore.Counts, "count jobs")
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", err)
	}
	return nil
}
