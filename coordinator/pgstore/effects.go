package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// effectColumns are the columns of an effect row, for RETURNING (the state
// as written) and, with effectiveState, for reads.
const effectColumns = `e.key, e.kind, e.state, e.job_id, e.step, e.op, e.owner, e.generation, e.attempt, e.receipt, e.evidence,
	e.payload, e.attempts, e.last_error, e.reservations, e.resolution, e.note, e.created_at, e.updated_at, e.done_at`

// holderStale is true when the token that reserved e is no longer the
// current token of its job.
const holderStale = `NOT EXISTS (SELECT 1 FROM jobs h
	WHERE h.id = e.job_id AND h.lease_generation = e.generation AND h.worker_id = e.owner AND h.status = 'IN_PROGRESS')`

// sameTokenOtherRun is true when the reservation in EXCLUDED comes from the
// token that holds e, but from another run of it (its job was started
// twice on the agent).
const sameTokenOtherRun = `(e.job_id = EXCLUDED.job_id AND e.owner = EXCLUDED.owner
	AND e.generation = EXCLUDED.generation AND e.attempt <> EXCLUDED.attempt)`

// effectiveState reports an intent reserved by a stale token as in_doubt.
const effectiveState = `CASE WHEN e.state = 'reserved' AND ` + holderStale + ` THEN 'in_doubt' ELSE e.state END`

var effectReadColumns = strings.Replace(effectColumns, "e.state", effectiveState+" AS state", 1)

func scanEffect(row sqlstore.Row) (jobstore.EffectRecord, error) {
	return sqlstore.ScanEffect(row, times)
}

// tokenCurrent reports whether tok is its job's current token. It only
// classifies a fenced effect write that changed nothing; the write never
// depends on it.
func (s *Store) tokenCurrent(ctx context.Context, tok fencing.Token) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM jobs
		WHERE id = $1 AND lease_generation = $2 AND worker_id = $3 AND status = 'IN_PROGRESS')`,
		tok.JobID, tok.Generation, tok.Owner).Scan(&ok)
	return ok, err
}

// fencedJob is the token check shared by the effect writes: the job row,
// locked FOR SHARE against a concurrent grant until the statement's
// transaction ends, only while the token is current.
const fencedJob = `j AS (
		SELECT id, lease_generation, worker_id FROM jobs
		WHERE id = $1 AND lease_generation = $2::bigint AND worker_id = $3 AND status = 'IN_PROGRESS'
		FOR SHARE
	)`

// effectEvent records the attempt of an effect request.
func effectEvent(action, cte string) string {
	return `ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted, detail)
		SELECT $1, '` + jobstore.VerbEffect + `', $3, $2::bigint, EXISTS (SELECT 1 FROM ` + cte + `),
		       '` + action + ` ' || $4::text || ': ' || COALESCE((SELECT state FROM ` + cte + `),
		           CASE WHEN EXISTS (SELECT 1 FROM j) THEN 'unchanged' ELSE 'refused' END)
	)`
}

// reserveEffectSQL inserts the intent when the token is current and no
// intent has the key, in one statement. On a conflict the existing row is
// returned (the upsert locks it): taken again after a person's retry,
// turned in_doubt when the token that reserved it is no longer current or
// is the requester's own in another run (attempt), otherwise unchanged. A
// stale token inserts nothing and touches nothing.
var reserveEffectSQL = `
	WITH ` + fencedJob + `, up AS (
		INSERT INTO effects AS e (key, kind, state, job_id, step, op, owner, generation, attempt)
		SELECT $4::text, 'step', 'reserved', id, $5::integer, $6::text, worker_id, lease_generation, $7::text FROM j
		ON CONFLICT (key) DO UPDATE SET
			state = CASE
				WHEN e.state = 'retry' THEN 'reserved'
				WHEN e.state = 'reserved' AND (` + holderStale + ` OR ` + sameTokenOtherRun + `) THEN 'in_doubt'
				ELSE e.state END,
			attempt = CASE WHEN e.state = 'retry' THEN EXCLUDED.attempt ELSE e.attempt END,
			job_id = CASE WHEN e.state = 'retry' THEN EXCLUDED.job_id ELSE e.job_id END,
			step = CASE WHEN e.state = 'retry' THEN EXCLUDED.step ELSE e.step END,
			op = CASE WHEN e.state = 'retry' THEN EXCLUDED.op ELSE e.op END,
			owner = CASE WHEN e.state = 'retry' THEN EXCLUDED.owner ELSE e.owner END,
			generation = CASE WHEN e.state = 'retry' THEN EXCLUDED.generation ELSE e.generation END,
			receipt = CASE WHEN e.state = 'retry' THEN NULL ELSE e.receipt END,
			done_at = CASE WHEN e.state = 'retry' THEN NULL ELSE e.done_at END,
			reservations = e.reservations + CASE WHEN e.state = 'retry' THEN 1 ELSE 0 END,
			updated_at = clock_timestamp()
		WHERE e.kind = 'step'
		RETURNING ` + effectColumns + `
	), ` + effectEvent("reserve", "up") + `
	SELECT * FROM up`

// ReserveEffect reserves the intent in.Key for tok (see
// jobstore.EffectStore).
func (s *Store) ReserveEffect(ctx context.Context, tok fencing.Token, in jobstore.EffectIntent) (jobstore.EffectRecord, error) {
	if err := sqlstore.CheckEffectIntent(in); err != nil {
		return jobstore.EffectRecord{}, fmt.Errorf("reserve effect of %s: %w", tok, err)
	}
	r, err := scanEffect(s.pool.QueryRow(ctx, reserveEffectSQL, tok.JobID, tok.Generation, tok.Owner, in.Key, in.Step, in.Op, in.Attempt))
	if errors.Is(err, pgx.ErrNoRows) {
		return jobstore.EffectRecord{}, s.effectRefused(ctx, "reserve effect "+in.Key+" of", tok, in.Key)
	}
	if err != nil {
		return jobstore.EffectRecord{}, fmt.Errorf("reserve effect %s of %s: %w", in.Key, tok, err)
	}
	return r, nil
}

// effectRefused classifies an effect write that changed nothing: stale or
// unknown job when the token is not current, otherwise a conflict with the
// row under the key.
func (s *Store) effectRefused(ctx context.Context, what string, tok fencing.Token, key string) error {
	ok, err := s.tokenCurrent(ctx, tok)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, tok, err)
	}
	if !ok {
		return s.refused(ctx, what, tok)
	}
	return fmt.Errorf("%s %s: key %q is not a step intent this token may change: %w", what, tok, key, jobstore.ErrConflict)
}

// receiptSQL records the receipt of an intent the token holds.
var receiptSQL = `
	WITH ` + fencedJob + `, up AS (
		UPDATE effects e
		SET state = CASE WHEN $5::boolean THEN 'done' ELSE 'in_doubt' END,
		    receipt = $6::jsonb,
		    done_at = CASE WHEN $5::boolean THEN clock_timestamp() END,
		    updated_at = clock_timestamp()
		FROM j
		WHERE e.key = $4::text AND e.kind = 'step' AND e.state = 'reserved'
		  AND e.job_id = j.id AND e.generation = j.lease_generation AND e.owner = j.worker_id
		RETURNING ` + effectColumns + `
	), ` + effectEvent("receipt", "up") + `
	SELECT * FROM up`

// RecordEffectReceipt records the receipt of an intent tok holds (see
// jobstore.EffectStore).
func (s *Store) RecordEffectReceipt(ctx context.Context, tok fencing.Token, key string, rc protocol.EffectReceipt) (jobstore.EffectRecord, error) {
	rc.Owner, rc.Generation = tok.Owner, tok.Generation
	b, err := json.Marshal(rc)
	if err != nil {
		return jobstore.EffectRecord{}, fmt.Errorf("record receipt of effect %s of %s: %w", key, tok, err)
	}
	r, err := scanEffect(s.pool.QueryRow(ctx, receiptSQL, tok.JobID, tok.Generation, tok.Owner, key, rc.Outcome == protocol.ReceiptOK, b))
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return jobstore.EffectRecord{}, fmt.Errorf("record receipt of effect %s of %s: %w", key, tok, err)
	}
	// A repeated receipt of the token that recorded it (its reply was lost).
	if cur, gerr := s.GetEffect(ctx, key); gerr == nil && cur.Kind == jobstore.EffectKindStep &&
		cur.State == protocol.EffectDone && cur.JobID == tok.JobID && cur.Owner == tok.Owner && cur.Generation == tok.Generation {
		if ok, err := s.tokenCurrent(ctx, tok); err == nil && ok {
			return cur, nil
		}
	}
	return jobstore.EffectRecord{}, s.effectRefused(ctx, "record receipt of effect "+key+" of", tok, key)
}

// evidenceSQL appends artifact keys to an intent's evidence (no key twice),
// while the token is current; an intent still reserved by a stale token is
// written down as in_doubt on the way.
var evidenceSQL = `
	WITH ` + fencedJob + `, up AS (
		UPDATE effects e
		SET evidence = (SELECT COALESCE(jsonb_agg(x ORDER BY o), '[]'::jsonb)
		                FROM (SELECT x, min(o) AS o
		                      FROM jsonb_array_elements(e.evidence || $5::jsonb) WITH ORDINALITY AS t(x, o)
		                      GROUP BY x) d),
		    state = CASE WHEN e.state = 'reserved' AND ` + holderStale + ` THEN 'in_doubt' ELSE e.state END,
		    updated_at = clock_timestamp()
		FROM j
		WHERE e.key = $4::text AND e.kind = 'step'
		RETURNING ` + effectColumns + `
	), ` + effectEvent("evidence", "up") + `
	SELECT * FROM up`

// AddEffectEvidence appends artifact keys to the evidence of an intent
// while tok is current.
func (s *Store) AddEffectEvidence(ctx context.Context, tok fencing.Token, key string, keys []string) (jobstore.EffectRecord, error) {
	r, err := scanEffect(s.pool.QueryRow(ctx, evidenceSQL, tok.JobID, tok.Generation, tok.Owner, key, sqlstore.EncodeEvidence(keys)))
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return jobstore.EffectRecord{}, fmt.Errorf("add evidence to effect %s of %s: %w", key, tok, err)
	}
	ok, err := s.tokenCurrent(ctx, tok)
	switch {
	case err != nil:
		return jobstore.EffectRecord{}, fmt.Errorf("add evidence to effect %s of %s: %w", key, tok, err)
	case !ok:
		return jobstore.EffectRecord{}, s.refused(ctx, "add evidence to effect "+key+" of", tok)
	}
	return jobstore.EffectRecord{}, fmt.Errorf("add evidence to effect %s of %s: %w", key, tok, jobstore.ErrEffectNotFound)
}

// MarkEffectsInDoubt writes down in_doubt for every intent still reserved by
// a stale token.
func (s *Store) MarkEffectsInDoubt(ctx context.Context) (int, error) {
	tag, err := s.pool.Exec(ctx, `
		UPDATE effects e SET state = 'in_doubt', updated_at = clock_timestamp()
		WHERE e.state = 'reserved' AND e.kind = 'step' AND `+holderStale)
	if err != nil {
		return 0, fmt.Errorf("mark effects in doubt: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// resolveSQL records a person's decision on an intent in doubt and, in the
// same statement, queues its job again when the job is NEEDS_DECISION (the
// next grant raises the generation), with one more attempt when it had used
// them all and its deadline cleared, so the next grant starts a new one.
var resolveSQL = `
	WITH up AS (
		UPDATE effects e
		SET state = CASE WHEN $2::text = 'done' THEN 'done' ELSE 'retry' END,
		    resolution = $2::text,
		    note = $3::text,
		    receipt = CASE WHEN $2::text = 'done' THEN $4::jsonb ELSE e.receipt END,
		    done_at = CASE WHEN $2::text = 'done' THEN clock_timestamp() ELSE e.done_at END,
		    updated_at = clock_timestamp()
		WHERE e.key = $1::text AND e.kind = 'step'
		  AND (e.state = 'in_doubt' OR (e.state = 'reserved' AND ` + holderStale + `))
		RETURNING ` + effectColumns + `
	), rq AS (
		UPDATE jobs SET status = 'QUEUED', worker_id = NULL, device_serial = NULL, lease_expires_at = NULL,
		       max_attempts = GREATEST(jobs.max_attempts, jobs.attempts + 1), deadline_at = NULL,
		       updated_at = clock_timestamp()
		FROM up
		WHERE jobs.id = up.job_id AND jobs.status = 'NEEDS_DECISION'
		RETURNING jobs.id, jobs.lease_generation
	), ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted, detail)
		SELECT up.job_id, '` + jobstore.VerbResolve + `', '',
		       COALESCE((SELECT lease_generation FROM rq), (SELECT lease_generation FROM jobs WHERE id = up.job_id)),
		       true, up.key || ': ' || $2::text || CASE WHEN EXISTS (SELECT 1 FROM rq) THEN '; job queued again' ELSE '' END
		FROM up
	)
	SELECT up.*, EXISTS (SELECT 1 FROM rq) FROM up`

// ResolveEffect records a person's decision on an intent in doubt (see
// jobstore.EffectStore).
func (s *Store) ResolveEffect(ctx context.Context, key, decision, note string) (jobstore.EffectRecord, bool, error) {
	if err := sqlstore.CheckDecision(decision); err != nil {
		return jobstore.EffectRecord{}, false, fmt.Errorf("resolve effect %s: %w", key, err)
	}
	var requeued bool
	row := s.pool.QueryRow(ctx, resolveSQL, key, decision, note, sqlstore.ResolvedReceipt(note, time.Now()))
	r, err := scanEffect(sqlstore.More(row, &requeued))
	if errors.Is(err, pgx.ErrNoRows) {
		cur, gerr := s.GetEffect(ctx, key)
		if gerr != nil {
			return jobstore.EffectRecord{}, false, fmt.Errorf("resolve effect %s: %w", key, gerr)
		}
		return jobstore.EffectRecord{}, false, fmt.Errorf("resolve effect %s: it is %s (%s), not in doubt: %w",
			key, cur.State, cur.Kind, jobstore.ErrConflict)
	}
	if err != nil {
		return jobstore.EffectRecord{}, false, fmt.Errorf("resolve effect %s: %w", key, err)
	}
	return r, requeued, nil
}

// GetEffect returns one effect, or ErrEffectNotFound.
func (s *Store) GetEffect(ctx context.Context, key string) (jobstore.EffectRecord, error) {
	r, err := scanEffect(s.pool.QueryRow(ctx, `SELECT `+effectReadColumns+` FROM effects e WHERE e.key = $1`, key))
	return sqlstore.Found(r, err, jobstore.ErrEffectNotFound, "get effect %s", key)
}

// ListEffects lists effects oldest first.
func (s *Store) ListEffects(ctx context.Context, f jobstore.EffectFilter) ([]jobstore.EffectRecord, error) {
	var lim any
	if f.Limit > 0 {
		lim = int64(f.Limit)
	}
	states := f.States
	if len(states) == 0 {
		states = nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT * FROM (SELECT `+effectReadColumns+` FROM effects e
		               WHERE ($1::text = '' OR e.kind = $1) AND ($2::text = '' OR e.job_id = $2)) x
		WHERE $3::text[] IS NULL OR x.state = ANY($3::text[])
		ORDER BY x.created_at, x.key
		LIMIT $4::bigint`, f.Kind, f.JobID, states, lim)
	return sqlstore.List(rows, err, scanEffect, "list effects")
}

// outboxInsertSQL writes the message that publishes an accepted result:
// job, generation, owner, result and manifest (the artifacts registered
// under that generation, in manifest order), pending delivery.
const outboxInsertSQL = `
	INSERT INTO effects (key, kind, state, job_id, owner, generation, payload)
	VALUES ($4::text, 'outbox', 'pending', $1::text, $3::text, $2::bigint,
	        jsonb_build_object(
	            'key', $4::text, 'event', '` + jobstore.OutboxEventResult + `', 'job_id', $1::text, 'generation', $2::bigint, 'owner', $3::text,
	            'result', $5::jsonb,
	            'manifest', COALESCE((SELECT jsonb_agg(a.key ORDER BY a.created_at, a.name)
	                                  FROM artifacts a WHERE a.job_id = $1 AND a.generation = $2::bigint), '[]'::jsonb)))
	ON CONFLICT (key) DO NOTHING`

// CommitOutbox is Commit with the outbox message written in the same
// transaction when the result is accepted. The fenced write is commitSQL,
// unchanged.
func (s *Store) CommitOutbox(ctx context.Context, tok fencing.Token, result json.RawMessage, key string) error {
	if err := sqlstore.CheckResult(result); err != nil {
		return fmt.Errorf("commit %s: %w", tok, err)
	}
	return s.withOutbox(ctx, "commit", tok,
		func(tx pgx.Tx) (bool, error) {
			var ok bool
			err := tx.QueryRow(ctx, commitSQL, tok.JobID, tok.Generation, tok.Owner, nullJSON(result)).Scan(&ok)
			return ok, err
		},
		func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, outboxInsertSQL, tok.JobID, tok.Generation, tok.Owner, key, nullJSON(result))
			return err
		}, key)
}

// withOutbox runs write, a fenced statement that reports whether it was
// accepted, and then, when it was, publish, which writes the outbox message
// key, in one transaction. what names the write in errors ("commit").
func (s *Store) withOutbox(ctx context.Context, what string, tok fencing.Token, write func(pgx.Tx) (bool, error), publish func(pgx.Tx) error, key string) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, tok, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit this is a no-op
	ok, err := write(tx)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, tok, err)
	}
	if ok {
		if err := publish(tx); err != nil {
			return fmt.Errorf("%s %s: write outbox %s: %w", what, tok, key, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("%s %s: %w", what, tok, err)
	}
	if !ok {
		return s.refused(ctx, what, tok)
	}
	return nil
}

// outboxFailedSQL writes the message that publishes a job that ended
// without a result: job, generation, owner, end state, reason and the
// artifacts of that generation, pending delivery.
const outboxFailedSQL = `
	INSERT INTO effects (key, kind, state, job_id, owner, generation, payload)
	VALUES ($4::text, 'outbox', 'pending', $1::text, $3::text, $2::bigint,
	        jsonb_build_object(
	            'key', $4::text, 'event', '` + jobstore.OutboxEventFailed + `', 'job_id', $1::text, 'generation', $2::bigint, 'owner', $3::text,
	            'status', (SELECT status FROM jobs WHERE id = $1::text),
	            'reason', (SELECT COALESCE(fail_reason, '') FROM jobs WHERE id = $1::text),
	            'manifest', COALESCE((SELECT jsonb_agg(a.key ORDER BY a.created_at, a.name)
	                                  FROM artifacts a WHERE a.job_id = $1 AND a.generation = $2::bigint), '[]'::jsonb)))
	ON CONFLICT (key) DO NOTHING`

// FailOutbox is Fail with the outbox message written in the same
// transaction when the failure is accepted and ends the job. The fenced
// write is failSQL, unchanged.
func (s *Store) FailOutbox(ctx context.Context, tok fencing.Token, f jobstore.Failure, key string) error {
	var status *string
	return s.withOutbox(ctx, "fail", tok,
		func(tx pgx.Tx) (bool, error) {
			err := tx.QueryRow(ctx, failSQL, s.failArgs(tok, f)...).Scan(&status)
			return status != nil, err
		},
		func(tx pgx.Tx) error {
			if !jobstore.Finished(*status) {
				return nil // a retry is not the end of the job
			}
			_, err := tx.Exec(ctx, outboxFailedSQL, tok.JobID, tok.Generation, tok.Owner, key)
			return err
		}, key)
}

// claimOutboxSQL takes due pending messages, skipping those another
// dispatcher is claiming, and makes them not due for the lease.
var claimOutboxSQL = `
	WITH c AS (
		SELECT key FROM effects
		WHERE state = 'pending' AND (dispatch_after IS NULL OR dispatch_after <= clock_timestamp())
		ORDER BY created_at, key
		LIMIT $1
		FOR UPDATE SKIP LOCKED
	)
	UPDATE effects e
	SET attempts = e.attempts + 1,
	    dispatch_after = clock_timestamp() + $2::bigint * interval '1 microsecond',
	    updated_at = clock_timestamp()
	FROM c WHERE e.key = c.key
	RETURNING ` + effectColumns

// ClaimOutbox takes up to limit due pending outbox messages (see
// jobstore.EffectStore).
func (s *Store) ClaimOutbox(ctx context.Context, limit int, lease time.Duration) ([]jobstore.EffectRecord, error) {
	if limit <= 0 {
		limit = 1
	}
	rows, err := s.pool.Query(ctx, claimOutboxSQL, int64(limit), micros(lease))
	return sqlstore.List(rows, err, scanEffect, "claim outbox")
}

// OutboxDelivered stores the receipt of a delivered message.
func (s *Store) OutboxDelivered(ctx context.Context, key string, receipt json.RawMessage) error {
	tag, err := s.pool.Exec(ctx, `
		UPDATE effects SET state = 'done', receipt = $2, done_at = clock_timestamp(), dispatch_after = NULL,
		       last_error = '', updated_at = clock_timestamp()
		WHERE key = $1 AND kind = 'outbox' AND state = 'pending'`, key, nullJSON(receipt))
	if err != nil {
		return fmt.Errorf("store receipt of outbox %s: %w", key, err)
	}
	if tag.RowsAffected() == 0 {
		if _, err := s.GetEffect(ctx, key); err != nil {
			return fmt.Errorf("store receipt of outbox %s: %w", key, err)
		}
	}
	return nil
}

// OutboxFailed records a failed delivery; the message is due again after
// retryIn.
func (s *Store) OutboxFailed(ctx context.Context, key, errText string, retryIn time.Duration) error {
	_, err := s.pool.Exec(ctx, `
		UPDATE effects SET last_error = $2, dispatch_after = clock_timestamp() + $3::bigint * interval '1 microsecond',
		       updated_at = clock_timestamp()
		WHERE key = $1 AND kind = 'outbox' AND state = 'pending'`, key, errText, micros(retryIn))
	if err != nil {
		return fmt.Errorf("record failed delivery of outbox %s: %w", key, err)
	}
	return nil
}
