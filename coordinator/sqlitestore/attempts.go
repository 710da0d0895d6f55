package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// Attempts, retries and deadlines (docs/operations.md, "Deadlines, attempts
// and end states"). The SQL fragments below refer to the columns of the
// job row being updated; in an UPDATE's SET list a column is its value
// before the update.

// msModifier is the SQLite date modifier of ms milliseconds (an SQL
// integer expression).
func msModifier(ms string) string {
	return `printf('+%d.%03d seconds', (` + ms + `) / 1000, (` + ms + `) % 1000)`
}

// grantCounts is the part of every grant's SET list that counts the
// attempt and, at the job's first grant, starts the deadline of a task with
// a timeout on the database clock.
var grantCounts = `
	    attempts = attempts + 1,
	    deadline_at = COALESCE(deadline_at, CASE WHEN COALESCE(json_extract(task, '$.timeout_ms'), 0) > 0
	        THEN strftime('%Y-%m-%d %H:%M:%f', 'now', ` + msModifier(`json_extract(task, '$.timeout_ms')`) + `) END)`

// grantable is the condition under which ClaimFor and TakeOverExpired may
// grant the job j: attempts left and the deadline, if any, not passed.
const grantable = `j.attempts < j.max_attempts AND (j.deadline_at IS NULL OR j.deadline_at > ` + now + `)`

// attemptEnd is the job's attempt_ends with one more AttemptEnd for the
// current generation; class, cause and reason are SQL text expressions.
func attemptEnd(class, cause, reason string) string {
	return `json_insert(attempt_ends, '$[#]', json_object('generation', lease_generation,
		'class', ` + class + `, 'cause', ` + cause + `, 'reason', COALESCE(` + reason + `, '')))`
}

// causesList is the attempt ends of the JSON array ends as listed in a
// fail reason (jobstore.AttemptEnd.String), joined by "; ".
func causesList(ends string) string {
	return `(SELECT group_concat('g' || json_extract(e.value, '$.generation')
		|| CASE WHEN json_extract(e.value, '$.cause') <> '' THEN ' ' || json_extract(e.value, '$.cause') ELSE '' END
		|| CASE WHEN json_extract(e.value, '$.reason') <> '' THEN ': ' || json_extract(e.value, '$.reason') ELSE '' END,
		'; ' ORDER BY e.key) FROM json_each(` + ends + `) e)`
}

// endAttemptSet is the SET list that ends the current attempt of a job,
// as in the PostgreSQL store: kind is jobstore.OutcomeRetry,
// jobstore.OutcomeRequeue or the end state to reach (SQL text); a retry
// goes back to QUEUED at generation + 1 without owner, not granted before
// the backoff (base × 2^(attempts−1) ms, at most maxBackoff) has passed,
// while attempts < max_attempts, and ends FAILED with every attempt's
// cause listed otherwise. A requeue (an assign refused before the job ran)
// goes back to QUEUED at generation + 1 without owner at once, its grant
// not counted (attempts − 1) nor listed among the attempt ends. reason
// (SQL, NULL keeps the last one) becomes the job's fail reason.
func endAttemptSet(kind, class, cause, reason, base, maxBackoff string) string {
	retry := `(` + kind + ` = '` + jobstore.OutcomeRetry + `' AND attempts < max_attempts)`
	exhausted := `(` + kind + ` = '` + jobstore.OutcomeRetry + `' AND attempts >= max_attempts)`
	requeue := `(` + kind + ` = '` + jobstore.OutcomeRequeue + `')`
	// spent: a requeue of a job whose earlier grants (an operator's
	// reassignment counts) used up its attempts: FAILED, as a retry would.
	spent := `(` + requeue + ` AND attempts - 1 >= max_attempts)`
	again := `(` + retry + ` OR (` + requeue + ` AND NOT ` + spent + `))`
	ends := attemptEnd(class, cause, reason)
	backoff := fmt.Sprintf(`min(%s << min(max(attempts - 1, 0), %d), %s)`, base, sqlstore.MaxBackoffShift, maxBackoff)
	return `
	    status = CASE WHEN ` + again + ` THEN 'QUEUED' WHEN ` + exhausted + ` OR ` + spent + ` THEN 'FAILED' ELSE ` + kind + ` END,
	    lease_generation = CASE WHEN ` + again + ` THEN lease_generation + 1 ELSE lease_generation END,
	    worker_id = CASE WHEN ` + again + ` THEN NULL ELSE worker_id END,
	    device_serial = CASE WHEN ` + again + ` THEN NULL ELSE device_serial END,
	    lease_expires_at = NULL,
	    attempts = CASE WHEN ` + requeue + ` THEN max(attempts - 1, 0) ELSE attempts END,
	    not_before = CASE WHEN ` + retry + ` THEN strftime('%Y-%m-%d %H:%M:%f', 'now', ` + msModifier(backoff) + `) ELSE not_before END,
	    attempt_ends = CASE WHEN ` + requeue + ` THEN attempt_ends ELSE ` + ends + ` END,
	    fail_reason = CASE WHEN ` + exhausted + ` THEN 'attempts exhausted (' || attempts || ' of ' || max_attempts || '): ' || ` + causesList(ends) + `
	                       WHEN ` + spent + ` THEN 'attempts exhausted (' || (attempts - 1) || ' of ' || max_attempts || '): ' || COALESCE(` + causesList("attempt_ends") + `, '')
	                       ELSE COALESCE(` + reason + `, fail_reason) END,
	    updated_at = ` + now
}

// backoffArgs are the retry policy's backoff and cap in milliseconds.
func (s *Store) backoffArgs() (int64, int64) {
	p := s.retry.Policy()
	return p.Backoff.Milliseconds(), p.BackoffMax.Milliseconds()
}

// SetRetryPolicy sets the backoff of retried attempts.
func (s *Store) SetRetryPolicy(p jobstore.RetryPolicy) { s.retry.Set(p) }

// recordEnd inserts the write_events row of an attempt that ends an
// attempt, with its class and cause.
func recordEnd(ctx context.Context, tx txn, jobID, verb, owner string, gen int64, accepted bool, detail, class, cause string) error {
	_, err := tx.ExecContext(ctx,
		`INSERT INTO write_events (job_id, verb, owner, generation, accepted, detail, class, cause) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		jobID, verb, owner, gen, accepted, detail, class, cause)
	if err != nil {
		return fmt.Errorf("record write event: %w", err)
	}
	return nil
}

// failSQL ends the attempt of the token ?1/?2/?3 as the failure plan
// ?4..?7 says, with the backoff in ?8 and ?9, and returns the job's new
// status.
var failSQL = `
	UPDATE jobs
	SET ` + endAttemptSet(`?4`, `?5`, `?6`, `?7`, `?8`, `?9`) + `
	WHERE id = ?1 AND lease_generation = ?2 AND worker_id = ?3 AND status = 'IN_PROGRESS'
	RETURNING status`

// fail runs failSQL for tok and f in tx, records the attempt and returns
// the job's new status; a refusal is returned as the attempt's outcome.
func (s *Store) fail(ctx context.Context, tx txn, tok fencing.Token, f jobstore.Failure) (string, error) {
	p := jobstore.PlanFailure(f)
	base, maxB := p.Backoff(s.backoffArgs())
	var status string
	err := tx.QueryRowContext(ctx, failSQL, tok.JobID, tok.Generation, tok.Owner, p.Kind, p.Class, p.Cause, p.Reason, base, maxB).Scan(&status)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", err
	}
	accepted := err == nil
	if err := recordEnd(ctx, tx, tok.JobID, jobstore.VerbFail, tok.Owner, tok.Generation, accepted, "", p.Class, p.Cause); err != nil {
		return "", err
	}
	if !accepted {
		return "", refusal(ctx, tx, tok.JobID)
	}
	return status, nil
}

// Fail ends the current attempt as f says (jobstore.Failure).
func (s *Store) Fail(ctx context.Context, tok fencing.Token, f jobstore.Failure) error {
	err := s.write(ctx, func(tx txn) error {
		_, err := s.fail(ctx, tx, tok, f)
		return err
	})
	if err != nil {
		return fmt.Errorf("fail %s: %w", tok, err)
	}
	return nil
}

var (
	expireCandidatesSQL = `
	SELECT id, status, lease_generation, COALESCE(worker_id, '') FROM jobs
	WHERE status IN ('QUEUED', 'IN_PROGRESS') AND deadline_at IS NOT NULL AND deadline_at <= ` + now + `
	ORDER BY deadline_at, id
	LIMIT ?`
	expireSQL = `
	UPDATE jobs
	SET status = 'TIMED_OUT',
	    lease_expires_at = NULL,
	    fail_reason = '` + jobstore.DetailDeadline + `',
	    attempt_ends = CASE WHEN status = 'IN_PROGRESS'
	        THEN ` + attemptEnd(`'`+protocol.FailClassJob+`'`, `'`+protocol.CauseDeadline+`'`, `NULL`) + `
	        ELSE attempt_ends END,
	    updated_at = ` + now + `
	WHERE id = ?1 AND status = ?2 AND lease_generation = ?3 AND COALESCE(worker_id, '') = ?4
	  AND deadline_at <= ` + now + `
	RETURNING id`
)

// ExpireDeadlines ends up to limit (≤ 0: all) live jobs whose deadline
// passed as TIMED_OUT, each by a fenced statement in one transaction, and
// returns the tokens taken away.
func (s *Store) ExpireDeadlines(ctx context.Context, limit int) ([]fencing.Token, error) {
	lim := int64(-1)
	if limit > 0 {
		lim = int64(limit)
	}
	var out []fencing.Token
	err := s.write(ctx, func(tx txn) error {
		out = nil
		type cand struct {
			tok    fencing.Token
			status string
		}
		rows, err := tx.QueryContext(ctx, expireCandidatesSQL, lim)
		if err != nil {
			return err
		}
		var cands []cand
		for rows.Next() {
			var c cand
			if err := rows.Scan(&c.tok.JobID, &c.status, &c.tok.Generation, &c.tok.Owner); err != nil {
				rows.Close()
				return err
			}
			cands = append(cands, c)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		for _, c := range cands {
			var id string
			err := tx.QueryRowContext(ctx, expireSQL, c.tok.JobID, c.status, c.tok.Generation, c.tok.Owner).Scan(&id)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			owner := ""
			if c.status == jobstore.StatusInProgress {
				owner = c.tok.Owner
				out = append(out, c.tok)
			}
			if err := recordEnd(ctx, tx, c.tok.JobID, jobstore.VerbTimeout, owner, c.tok.Generation, true,
				jobstore.DetailDeadline, protocol.FailClassJob, protocol.CauseDeadline); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expire deadlines: %w", err)
	}
	return out, nil
}

// releaseSQL ends the attempt of the token ?1/?2/?3 as an infrastructure
// failure with cause, backoff ?4 and ?5, when cond also holds.
func releaseSQL(cause, cond string) string {
	return `
	UPDATE jobs
	SET ` + endAttemptSet(`'`+jobstore.OutcomeRetry+`'`, `'`+protocol.FailClassInfrastructure+`'`, `'`+cause+`'`, `NULL`, `?4`, `?5`) + `
	WHERE id = ?1 AND lease_generation = ?2 AND worker_id = ?3 AND status = 'IN_PROGRESS'` + cond + `
	RETURNING id`
}
