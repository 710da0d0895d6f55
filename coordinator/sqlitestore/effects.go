package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// effectColumns are the columns of an effect row as written (RETURNING).
const effectColumns = `key, kind, state, job_id, step, op, owner, generation, attempt, receipt, evidence,
	payload, attempts, last_error, reservations, resolution, note, created_at, updated_at, done_at`

// holderStale is true when the token that reserved e is no longer the
// current token of its job.
const holderStale = `NOT EXISTS (SELECT 1 FROM jobs h
	WHERE h.id = e.job_id AND h.lease_generation = e.generation AND h.worker_id = e.owner AND h.status = 'IN_PROGRESS')`

// effectReadColumns reports an intent reserved by a stale token as
// in_doubt.
var effectReadColumns = `e.key, e.kind, CASE WHEN e.state = 'reserved' AND ` + holderStale + ` THEN 'in_doubt' ELSE e.state END AS state,
	e.job_id, e.step, e.op, e.owner, e.generation, e.attempt, e.receipt, e.evidence, e.payload, e.attempts, e.last_error,
	e.reservations, e.resolution, e.note, e.created_at, e.updated_at, e.done_at`

func scanEffect(row sqlstore.Row) (jobstore.EffectRecord, error) {
	return sqlstore.ScanEffect(row, times)
}

// tokenCurrent reports, inside tx, whether tok is its job's current token.
// It only classifies an effect write that changed nothing.
func tokenCurrent(ctx context.Context, tx txn, tok fencing.Token) (bool, error) {
	var ok bool
	err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM jobs
		WHERE id = ? AND lease_generation = ? AND worker_id = ? AND status = 'IN_PROGRESS')`,
		tok.JobID, tok.Generation, tok.Owner).Scan(&ok)
	return ok, err
}

// effectRefusal answers an effect write that changed nothing: stale or
// unknown job when the token is not current, otherwise a conflict with the
// row under the key.
func effectRefusal(ctx context.Context, tx txn, tok fencing.Token, key string) error {
	ok, err := tokenCurrent(ctx, tx, tok)
	if err != nil {
		return err
	}
	if !ok {
		return refusal(ctx, tx, tok.JobID)
	}
	return answer(fmt.Errorf("key %q is not a step intent this token may change: %w", key, jobstore.ErrConflict))
}

// tokenMatches is the fenced clause of the effect writes (?1 job, ?2
// generation, ?3 owner).
const tokenMatches = `EXISTS (SELECT 1 FROM jobs
	WHERE id = ?1 AND lease_generation = ?2 AND worker_id = ?3 AND status = 'IN_PROGRESS')`

// reserveEffectSQL inserts the intent when the token is current and no
// intent has the key, in one statement; on a conflict the existing row is
// returned: taken again after a person's retry, turned in_doubt when the
// token that reserved it is no longer current or is the requester's own in
// another run (attempt: its job was started twice), otherwise unchanged.
var reserveEffectSQL = `
	INSERT INTO effects AS e (key, kind, state, job_id, step, op, owner, generation, attempt)
	SELECT ?4, 'step', 'reserved', id, ?5, ?6, worker_id, lease_generation, ?7 FROM jobs
	WHERE id = ?1 AND lease_generation = ?2 AND worker_id = ?3 AND status = 'IN_PROGRESS'
	ON CONFLICT (key) DO UPDATE SET
		state = CASE
			WHEN e.state = 'retry' THEN 'reserved'
			WHEN e.state = 'reserved' AND (` + holderStale + `
			     OR (e.job_id = excluded.job_id AND e.owner = excluded.owner
			         AND e.generation = excluded.generation AND e.attempt <> excluded.attempt)) THEN 'in_doubt'
			ELSE e.state END,
		attempt = CASE WHEN e.state = 'retry' THEN excluded.attempt ELSE e.attempt END,
		job_id = CASE WHEN e.state = 'retry' THEN excluded.job_id ELSE e.job_id END,
		step = CASE WHEN e.state = 'retry' THEN excluded.step ELSE e.step END,
		op = CASE WHEN e.state = 'retry' THEN excluded.op ELSE e.op END,
		owner = CASE WHEN e.state = 'retry' THEN excluded.owner ELSE e.owner END,
		generation = CASE WHEN e.state = 'retry' THEN excluded.generation ELSE e.generation END,
		receipt = CASE WHEN e.state = 'retry' THEN NULL ELSE e.receipt END,
		done_at = CASE WHEN e.state = 'retry' THEN NULL ELSE e.done_at END,
		reservations = e.reservations + CASE WHEN e.state = 'retry' THEN 1 ELSE 0 END,
		updated_at = ` + now + `
	WHERE e.kind = 'step'
	RETURNING ` + effectColumns

// effectWrite runs one fenced effect statement that returns the row it
// wrote, records the attempt and classifies a statement that wrote nothing
// with refuse.
func (s *Store) effectWrite(ctx context.Context, action string, tok fencing.Token, key, query string, args []any,
	refuse func(tx txn) (jobstore.EffectRecord, error)) (jobstore.EffectRecord, error) {
	var r jobstore.EffectRecord
	err := s.write(ctx, func(tx txn) error {
		var err error
		r, err = scanEffect(tx.QueryRowContext(ctx, query, args...))
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		accepted := err == nil
		state := r.State
		if !accepted {
			r, err = refuse(tx)
			if err == nil {
				state = "unchanged"
			}
		}
		if state == "" {
			if ok, cerr := tokenCurrent(ctx, tx, tok); cerr == nil && ok {
				state = "unchanged"
			}
		}
		if rerr := recordDetail(ctx, tx, tok.JobID, jobstore.VerbEffect, tok.Owner, tok.Generation, accepted,
			sqlstore.EffectDetail(action, key, state)); rerr != nil {
			return rerr
		}
		return err
	})
	return r, err
}

// ReserveEffect reserves the intent in.Key for tok (see
// jobstore.EffectStore).
func (s *Store) ReserveEffect(ctx context.Context, tok fencing.Token, in jobstore.EffectIntent) (jobstore.EffectRecord, error) {
	if err := sqlstore.CheckEffectIntent(in); err != nil {
		return jobstore.EffectRecord{}, fmt.Errorf("reserve effect of %s: %w", tok, err)
	}
	r, err := s.effectWrite(ctx, protocol.EffectActionReserve, tok, in.Key, reserveEffectSQL,
		[]any{tok.JobID, tok.Generation, tok.Owner, in.Key, in.Step, in.Op, in.Attempt},
		func(tx txn) (jobstore.EffectRecord, error) {
			return jobstore.EffectRecord{}, effectRefusal(ctx, tx, tok, in.Key)
		})
	if err != nil {
		return jobstore.EffectRecord{}, fmt.Errorf("reserve effect %s of %s: %w", in.Key, tok, err)
	}
	return r, nil
}

var receiptSQL = `
	UPDATE effects AS e
	SET state = CASE WHEN ?5 THEN 'done' ELSE 'in_doubt' END,
	    receipt = ?6,
	    done_at = CASE WHEN ?5 THEN ` + now + ` END,
	    updated_at = ` + now + `
	WHERE e.key = ?4 AND e.kind = 'step' AND e.state = 'reserved'
	  AND e.job_id = ?1 AND e.generation = ?2 AND e.owner = ?3 AND ` + tokenMatches + `
	RETURNING ` + effectColumns

// RecordEffectReceipt records the receipt of an intent tok holds (see
// jobstore.EffectStore).
func (s *Store) RecordEffectReceipt(ctx context.Context, tok fencing.Token, key string, rc protocol.EffectReceipt) (jobstore.EffectRecord, error) {
	rc.Owner, rc.Generation = tok.Owner, tok.Generation
	b, err := json.Marshal(rc)
	if err != nil {
		return jobstore.EffectRecord{}, fmt.Errorf("record receipt of effect %s of %s: %w", key, tok, err)
	}
	r, err := s.effectWrite(ctx, protocol.EffectActionReceipt, tok, key, receiptSQL,
		[]any{tok.JobID, tok.Generation, tok.Owner, key, rc.Outcome == protocol.ReceiptOK, string(b)},
		func(tx txn) (jobstore.EffectRecord, error) {
			// A repeated receipt of the token that recorded it (its reply
			// was lost) is answered with the intent as it stands.
			cur, err := scanEffect(tx.QueryRowContext(ctx, `SELECT `+effectColumns+` FROM effects WHERE key = ?`, key))
			if err == nil && cur.Kind == jobstore.EffectKindStep && cur.State == protocol.EffectDone &&
				cur.JobID == tok.JobID && cur.Owner == tok.Owner && cur.Generation == tok.Generation {
				if ok, err := tokenCurrent(ctx, tx, tok); err == nil && ok {
					return cur, nil
				}
			}
			return jobstore.EffectRecord{}, effectRefusal(ctx, tx, tok, key)
		})
	if err != nil {
		return jobstore.EffectRecord{}, fmt.Errorf("record receipt of effect %s of %s: %w", key, tok, err)
	}
	return r, nil
}

var evidenceSQL = `
	UPDATE effects AS e
	SET evidence = ?5,
	    state = CASE WHEN e.state = 'reserved' AND ` + holderStale + ` THEN 'in_doubt' ELSE e.state END,
	    updated_at = ` + now + `
	WHERE e.key = ?4 AND e.kind = 'step' AND ` + tokenMatches + `
	RETURNING ` + effectColumns

// AddEffectEvidence appends artifact keys to the evidence of an intent
// while tok is current. The writer connection serialises writes, so the
// evidence read in the transaction is the one the update replaces.
func (s *Store) AddEffectEvidence(ctx context.Context, tok fencing.Token, key string, keys []string) (jobstore.EffectRecord, error) {
	var r jobstore.EffectRecord
	err := s.write(ctx, func(tx txn) error {
		var cur string
		err := tx.QueryRowContext(ctx, `SELECT evidence FROM effects WHERE key = ? AND kind = 'step'`, key).Scan(&cur)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		had, err := sqlstore.DecodeEvidence([]byte(cur))
		if err != nil {
			return err
		}
		merged := string(sqlstore.EncodeEvidence(sqlstore.MergeEvidence(had, keys)))
		r, err = scanEffect(tx.QueryRowContext(ctx, evidenceSQL, tok.JobID, tok.Generation, tok.Owner, key, merged))
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		accepted := err == nil
		state := r.State
		var out error
		if !accepted {
			ok, err := tokenCurrent(ctx, tx, tok)
			switch {
			case err != nil:
				return err
			case ok:
				out = answer(jobstore.ErrEffectNotFound)
			default:
				out = refusal(ctx, tx, tok.JobID)
			}
		}
		if err := recordDetail(ctx, tx, tok.JobID, jobstore.VerbEffect, tok.Owner, tok.Generation, accepted,
			sqlstore.EffectDetail(protocol.EffectActionEvidence, key, state)); err != nil {
			return err
		}
		return out
	})
	if err != nil {
		return jobstore.EffectRecord{}, fmt.Errorf("add evidence to effect %s of %s: %w", key, tok, err)
	}
	return r, nil
}

// MarkEffectsInDoubt writes down in_doubt for every intent still reserved by
// a stale token.
func (s *Store) MarkEffectsInDoubt(ctx context.Context) (int, error) {
	var n int64
	err := s.write(ctx, func(tx txn) error {
		res, err := tx.ExecContext(ctx, `
			UPDATE effects AS e SET state = 'in_doubt', updated_at = `+now+`
			WHERE e.state = 'reserved' AND e.kind = 'step' AND `+holderStale)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("mark effects in doubt: %w", err)
	}
	return int(n), nil
}

var (
	resolveSQL = `
	UPDATE effects AS e
	SET state = CASE WHEN ?2 = 'done' THEN 'done' ELSE 'retry' END,
	    resolution = ?2,
	    note = ?3,
	    receipt = CASE WHEN ?2 = 'done' THEN ?4 ELSE e.receipt END,
	    done_at = CASE WHEN ?2 = 'done' THEN ` + now + ` ELSE e.done_at END,
	    updated_at = ` + now + `
	WHERE e.key = ?1 AND e.kind = 'step'
	  AND (e.state = 'in_doubt' OR (e.state = 'reserved' AND ` + holderStale + `))
	RETURNING ` + effectColumns
	requeueSQL = `
	UPDATE jobs SET status = 'QUEUED', worker_id = NULL, device_serial = NULL, lease_expires_at = NULL,
	       max_attempts = max(max_attempts, attempts + 1), deadline_at = NULL,
	       updated_at = ` + now + `
	WHERE id = ? AND status = 'NEEDS_DECISION'
	RETURNING lease_generation`
)

// ResolveEffect records a person's decision on an intent in doubt and, in
// the same transaction, queues its job again when it is NEEDS_DECISION,
// with one more attempt when it had used them all and its deadline cleared.
func (s *Store) ResolveEffect(ctx context.Context, key, decision, note string) (jobstore.EffectRecord, bool, error) {
	if err := sqlstore.CheckDecision(decision); err != nil {
		return jobstore.EffectRecord{}, false, fmt.Errorf("resolve effect %s: %w", key, err)
	}
	var (
		r        jobstore.EffectRecord
		requeued bool
	)
	err := s.write(ctx, func(tx txn) error {
		var err error
		r, err = scanEffect(tx.QueryRowContext(ctx, resolveSQL, key, decision, note, string(sqlstore.ResolvedReceipt(note, time.Now()))))
		if errors.Is(err, sql.ErrNoRows) {
			cur, err := scanEffect(tx.QueryRowContext(ctx, `SELECT `+effectReadColumns+` FROM effects e WHERE e.key = ?`, key))
			if errors.Is(err, sql.ErrNoRows) {
				return answer(jobstore.ErrEffectNotFound)
			}
			if err != nil {
				return err
			}
			return answer(fmt.Errorf("it is %s (%s), not in doubt: %w", cur.State, cur.Kind, jobstore.ErrConflict))
		}
		if err != nil {
			return err
		}
		var gen int64
		err = tx.QueryRowContext(ctx, requeueSQL, r.JobID).Scan(&gen)
		switch {
		case err == nil:
			requeued = true
		case errors.Is(err, sql.ErrNoRows):
			if gen, _, err = currentGeneration(ctx, tx, r.JobID); err != nil {
				return err
			}
		default:
			return err
		}
		detail := r.Key + ": " + decision
		if requeued {
			detail += "; job queued again"
		}
		return recordDetail(ctx, tx, r.JobID, jobstore.VerbResolve, "", gen, true, detail)
	})
	if err != nil {
		return jobstore.EffectRecord{}, false, fmt.Errorf("resolve effect %s: %w", key, err)
	}
	return r, requeued, nil
}

// GetEffect returns one effect, or ErrEffectNotFound.
func (s *Store) GetEffect(ctx context.Context, key string) (jobstore.EffectRecord, error) {
	r, err := scanEffect(s.rc.QueryRowContext(ctx, `SELECT `+effectReadColumns+` FROM effects e WHERE e.key = ?`, key))
	return sqlstore.Found(r, err, jobstore.ErrEffectNotFound, "get effect %s", key)
}

// ListEffects lists effects oldest first.
func (s *Store) ListEffects(ctx context.Context, f jobstore.EffectFilter) ([]jobstore.EffectRecord, error) {
	q := `SELECT * FROM (SELECT ` + effectReadColumns + ` FROM effects e
		WHERE (?1 = '' OR e.kind = ?1) AND (?2 = '' OR e.job_id = ?2)) x`
	args := []any{f.Kind, f.JobID}
	if len(f.States) > 0 {
		q += ` WHERE x.state IN (` + strings.TrimSuffix(strings.Repeat("?,", len(f.States)), ",") + `)`
		for _, st := range f.States {
			args = append(args, st)
		}
	}
	lim := int64(-1)
	if f.Limit > 0 {
		lim = int64(f.Limit)
	}
	q += ` ORDER BY x.created_at, x.key LIMIT ?`
	args = append(args, lim)
	rows, err := s.query(ctx, q, args...)
	return sqlstore.List(rows, err, scanEffect, "list effects")
}

// outboxInsertSQL writes the message that publishes an accepted result:
// job, generation, owner, result and manifest, pending delivery.
const outboxInsertSQL = `
	INSERT INTO effects (key, kind, state, job_id, owner, generation, payload)
	VALUES (?4, 'outbox', 'pending', ?1, ?3, ?2,
	        json_object(
	            'key', ?4, 'event', '` + jobstore.OutboxEventResult + `', 'job_id', ?1, 'generation', ?2, 'owner', ?3,
	            'result', json(?5),
	            'manifest', json((SELECT json_group_array(key) FROM (
	                SELECT key FROM artifacts WHERE job_id = ?1 AND generation = ?2 ORDER BY created_at, rowid)))))
	ON CONFLICT (key) DO NOTHING`

// outboxFailedSQL writes the message that publishes a job that ended
// without a result: job, generation, owner, end state, reason and the
// artifacts of that generation, pending delivery.
const outboxFailedSQL = `
	INSERT INTO effects (key, kind, state, job_id, owner, generation, payload)
	VALUES (?4, 'outbox', 'pending', ?1, ?3, ?2,
	        json_object(
	            'key', ?4, 'event', '` + jobstore.OutboxEventFailed + `', 'job_id', ?1, 'generation', ?2, 'owner', ?3,
	            'status', (SELECT status FROM jobs WHERE id = ?1),
	            'reason', (SELECT COALESCE(fail_reason, '') FROM jobs WHERE id = ?1),
	            'manifest', json((SELECT json_group_array(key) FROM (
	                SELECT key FROM artifacts WHERE job_id = ?1 AND generation = ?2 ORDER BY created_at, rowid)))))
	ON CONFLICT (key) DO NOTHING`

// FailOutbox is Fail with the outbox message written in the same
// transaction when the failure is accepted and ends the job. The fenced
// write is failSQL, unchanged.
func (s *Store) FailOutbox(ctx context.Context, tok fencing.Token, f jobstore.Failure, key string) error {
	err := s.write(ctx, func(tx txn) error {
		status, err := s.fail(ctx, tx, tok, f)
		if err != nil || !jobstore.Finished(status) {
			return err // a refusal, or a retry: not the end of the job
		}
		if _, err := tx.ExecContext(ctx, outboxFailedSQL, tok.JobID, tok.Generation, tok.Owner, key); err != nil {
			return fmt.Errorf("write outbox %s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fail %s: %w", tok, err)
	}
	return nil
}

// CommitOutbox is Commit with the outbox message written in the same
// transaction when the result is accepted. The fenced write is commitSQL,
// unchanged.
func (s *Store) CommitOutbox(ctx context.Context, tok fencing.Token, result json.RawMessage, key string) error {
	if err := sqlstore.CheckResult(result); err != nil {
		return fmt.Errorf("commit %s: %w", tok, err)
	}
	err := s.write(ctx, func(tx txn) error {
		var id string
		err := tx.QueryRowContext(ctx, commitSQL, nullJSON(result), tok.Owner, tok.JobID, tok.Generation, tok.Owner).Scan(&id)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		accepted := err == nil
		if err := record(ctx, tx, tok.JobID, jobstore.VerbResult, tok.Owner, tok.Generation, accepted); err != nil {
			return err
		}
		if !accepted {
			return refusal(ctx, tx, tok.JobID)
		}
		if _, err := tx.ExecContext(ctx, outboxInsertSQL, tok.JobID, tok.Generation, tok.Owner, key, nullJSON(result)); err != nil {
			return fmt.Errorf("write outbox %s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("commit %s: %w", tok, err)
	}
	return nil
}

// ClaimOutbox takes up to limit due pending outbox messages (see
// jobstore.EffectStore). The writer connection serialises dispatchers.
func (s *Store) ClaimOutbox(ctx context.Context, limit int, lease time.Duration) ([]jobstore.EffectRecord, error) {
	if limit <= 0 {
		limit = 1
	}
	var out []jobstore.EffectRecord
	err := s.write(ctx, func(tx txn) error {
		out = nil
		rows, err := tx.QueryContext(ctx, `
			UPDATE effects SET attempts = attempts + 1, dispatch_after = `+nowPlus+`, updated_at = `+now+`
			WHERE key IN (SELECT key FROM effects
			              WHERE state = 'pending' AND (dispatch_after IS NULL OR dispatch_after <= `+now+`)
			              ORDER BY created_at, key LIMIT ?)
			RETURNING `+effectColumns, modifier(lease), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = sqlstore.Collect(rows, scanEffect)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim outbox: %w", err)
	}
	return out, nil
}

// OutboxDelivered stores the receipt of a delivered message.
func (s *Store) OutboxDelivered(ctx context.Context, key string, receipt json.RawMessage) error {
	err := s.write(ctx, func(tx txn) error {
		res, err := tx.ExecContext(ctx, `
			UPDATE effects SET state = 'done', receipt = ?, done_at = `+now+`, dispatch_after = NULL,
			       last_error = '', updated_at = `+now+`
			WHERE key = ? AND kind = 'outbox' AND state = 'pending'`, nullJSON(receipt), key)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		var one int
		err = tx.QueryRowContext(ctx, `SELECT 1 FROM effects WHERE key = ?`, key).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return answer(jobstore.ErrEffectNotFound)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("store receipt of outbox %s: %w", key, err)
	}
	return nil
}

// OutboxFailed records a failed delivery; the message is due again after
// retryIn.
func (s *Store) OutboxFailed(ctx context.Context, key, errText string, retryIn time.Duration) error {
	err := s.write(ctx, func(tx txn) error {
		_, err := tx.ExecContext(ctx, `
			UPDATE effects SET last_error = ?, dispatch_after = `+nowPlus+`, updated_at = `+now+`
			WHERE key = ? AND kind = 'outbox' AND state = 'pending'`, errText, modifier(retryIn), key)
		return err
	})
	if err != nil {
		return fmt.Errorf("record failed delivery of outbox %s: %w", key, err)
	}
	return nil
}
