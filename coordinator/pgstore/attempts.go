package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// Attempts, retries and deadlines (docs/operations.md, "Deadlines, attempts
// and end states"). The SQL fragments below refer to the job row as j; in
// an UPDATE's SET list j.<column> is the value before the update.

// grantCounts is the part of every grant's SET list that counts the
// attempt and, at the job's first grant, starts the deadline of a task with
// a timeout on the database clock.
const grantCounts = `
		    attempts = j.attempts + 1,
		    deadline_at = COALESCE(j.deadline_at, CASE WHEN COALESCE((j.task->>'timeout_ms')::bigint, 0) > 0
		        THEN clock_timestamp() + (j.task->>'timeout_ms')::bigint * interval '1 millisecond' END)`

// grantable is the condition under which ClaimFor and TakeOverExpired may
// grant a job: attempts left and the deadline, if any, not passed.
const grantable = `j.attempts < j.max_attempts AND (j.deadline_at IS NULL OR j.deadline_at > (SELECT clock_timestamp()))`

// attemptEnd is the job's attempt_ends with one more AttemptEnd for the
// current generation; class, cause and reason are SQL text expressions.
func attemptEnd(class, cause, reason string) string {
	return `j.attempt_ends || jsonb_build_array(jsonb_build_object('generation', j.lease_generation,
		'class', ` + class + `::text, 'cause', ` + cause + `::text, 'reason', COALESCE(` + reason + `::text, '')))`
}

// causesList is the attempt ends of the JSON array ends as listed in a
// fail reason (jobstore.AttemptEnd.String), joined by "; ".
func causesList(ends string) string {
	return `(SELECT string_agg('g' || (e->>'generation')
		|| CASE WHEN e->>'cause' <> '' THEN ' ' || (e->>'cause') ELSE '' END
		|| CASE WHEN e->>'reason' <> '' THEN ': ' || (e->>'reason') ELSE '' END, '; ' ORDER BY n)
		FROM jsonb_array_elements(` + ends + `) WITH ORDINALITY AS x(e, n))`
}

// endAttemptSet is the SET list that ends the current attempt of a job.
// kind is jobstore.OutcomeRetry, jobstore.OutcomeRequeue or the end state
// to reach (SQL text); a retry goes back to QUEUED at generation + 1
// without owner, not granted before the backoff (base × 2^(attempts−1) µs,
// at most maxBackoff) has passed, while attempts < max_attempts, and ends
// FAILED with every attempt's cause listed otherwise. A requeue (an assign
// refused before the job ran) goes back to QUEUED at generation + 1 without
// owner at once, its grant not counted (attempts − 1) nor listed among the
// attempt ends. reason (SQL, NULL keeps the last one) becomes the job's
// fail reason.
func endAttemptSet(kind, class, cause, reason, base, maxBackoff string) string {
	retry := `(` + kind + ` = '` + jobstore.OutcomeRetry + `' AND j.attempts < j.max_attempts)`
	exhausted := `(` + kind + ` = '` + jobstore.OutcomeRetry + `' AND j.attempts >= j.max_attempts)`
	requeue := `(` + kind + ` = '` + jobstore.OutcomeRequeue + `')`
	// spent: a requeue of a job whose earlier grants (an operator's
	// reassignment counts) used up its attempts: FAILED, as a retry would.
	spent := `(` + requeue + ` AND j.attempts - 1 >= j.max_attempts)`
	again := `(` + retry + ` OR (` + requeue + ` AND NOT ` + spent + `))`
	ends := attemptEnd(class, cause, reason)
	return `
		    status = CASE WHEN ` + again + ` THEN 'QUEUED' WHEN ` + exhausted + ` OR ` + spent + ` THEN 'FAILED' ELSE ` + kind + ` END,
		    lease_generation = CASE WHEN ` + again + ` THEN j.lease_generation + 1 ELSE j.lease_generation END,
		    worker_id = CASE WHEN ` + again + ` THEN NULL ELSE j.worker_id END,
		    device_serial = CASE WHEN ` + again + ` THEN NULL ELSE j.device_serial END,
		    lease_expires_at = NULL,
		    attempts = CASE WHEN ` + requeue + ` THEN GREATEST(j.attempts - 1, 0) ELSE j.attempts END,
		    not_before = CASE WHEN ` + retry + ` THEN clock_timestamp() + LEAST(` + base + `::bigint << LEAST(GREATEST(j.attempts - 1, 0), ` +
		fmt.Sprint(sqlstore.MaxBackoffShift) + `), ` + maxBackoff + `::bigint) * interval '1 microsecond' ELSE j.not_before END,
		    attempt_ends = CASE WHEN ` + requeue + ` THEN j.attempt_ends ELSE ` + ends + ` END,
		    fail_reason = CASE WHEN ` + exhausted + ` THEN 'attempts exhausted (' || j.attempts || ' of ' || j.max_attempts || '): ' || ` + causesList(ends) + `
		                       WHEN ` + spent + ` THEN 'attempts exhausted (' || (j.attempts - 1) || ' of ' || j.max_attempts || '): ' || COALESCE(` + causesList("j.attempt_ends") + `, '')
		                       ELSE COALESCE(` + reason + `::text, j.fail_reason) END,
		    updated_at = clock_timestamp()`
}

// infraEnd is endAttemptSet for an infrastructure failure the coordinator
// detects (cause is a protocol.Cause* constant), with the backoff in $2
// and $3.
func infraEnd(cause string) string {
	return endAttemptSet(`'`+jobstore.OutcomeRetry+`'`, `'`+protocol.FailClassInfrastructure+`'`, `'`+cause+`'`, `NULL`, `$2`, `$3`)
}

// backoffArgs are the retry policy's backoff and cap in microseconds.
func (s *Store) backoffArgs() (int64, int64) {
	p := s.retry.Policy()
	return micros(p.Backoff), micros(p.BackoffMax)
}

// SetRetryPolicy sets the backoff of retried attempts.
func (s *Store) SetRetryPolicy(p jobstore.RetryPolicy) { s.retry.Set(p) }

// failSQL ends the attempt of the token $1/$2/$3 as the failure plan
// $4..$7 says, with the backoff in $8 and $9, and records it; it returns
// the job's new status, NULL when the token is not current.
var failSQL = `
	WITH upd AS (
		UPDATE jobs j
		SET ` + endAttemptSet(`$4::text`, `$5`, `$6`, `$7`, `$8`, `$9`) + `
		WHERE j.id = $1 AND j.lease_generation = $2 AND j.worker_id = $3 AND j.status = 'IN_PROGRESS'
		RETURNING j.status
	), ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted, class, cause)
		SELECT $1, '` + jobstore.VerbFail + `', $3, $2, EXISTS (SELECT 1 FROM upd), $5, $6
	)
	SELECT (SELECT status FROM upd)`

// failArgs are failSQL's arguments.
func (s *Store) failArgs(tok fencing.Token, f jobstore.Failure) []any {
	p := jobstore.PlanFailure(f)
	base, maxB := p.Backoff(s.backoffArgs())
	return []any{tok.JobID, tok.Generation, tok.Owner, p.Kind, p.Class, p.Cause, p.Reason, base, maxB}
}

// Fail ends the current attempt as f says (jobstore.Failure).
func (s *Store) Fail(ctx context.Context, tok fencing.Token, f jobstore.Failure) error {
	var status *string
	if err := s.pool.QueryRow(ctx, failSQL, s.failArgs(tok, f)...).Scan(&status); err != nil {
		return fmt.Errorf("fail %s: %w", tok, err)
	}
	if status == nil {
		return s.refused(ctx, "fail", tok)
	}
	return nil
}

// expireSQL ends up to $1 (NULL: all) live jobs whose deadline passed on
// the database clock as TIMED_OUT, each checked again in the UPDATE, and
// returns the tokens taken from the in-progress ones. As in reclaimSQL, the
// candidates compare with the clock read once so that the deadline index
// bounds the scan.
var expireSQL = `
	WITH cand AS (
		SELECT id, status, lease_generation, worker_id, deadline_at FROM jobs
		WHERE status IN ('QUEUED', 'IN_PROGRESS') AND deadline_at IS NOT NULL
		  AND deadline_at <= (SELECT clock_timestamp())
		ORDER BY deadline_at, id
		LIMIT $1::bigint
		FOR UPDATE SKIP LOCKED
	), upd AS (
		UPDATE jobs j
		SET status = 'TIMED_OUT',
		    lease_expires_at = NULL,
		    fail_reason = '` + jobstore.DetailDeadline + `',
		    attempt_ends = CASE WHEN j.status = 'IN_PROGRESS'
		        THEN ` + attemptEnd(`'`+protocol.FailClassJob+`'`, `'`+protocol.CauseDeadline+`'`, `NULL`) + `
		        ELSE j.attempt_ends END,
		    updated_at = clock_timestamp()
		FROM cand
		WHERE j.id = cand.id AND j.status = cand.status AND j.lease_generation = cand.lease_generation
		  AND j.worker_id IS NOT DISTINCT FROM cand.worker_id AND j.deadline_at <= clock_timestamp()
		RETURNING j.id, cand.status AS old_status, COALESCE(cand.worker_id, '') AS old_owner,
		          cand.lease_generation AS old_generation, cand.deadline_at
	), ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted, detail, class, cause)
		SELECT id, '` + jobstore.VerbTimeout + `', CASE WHEN old_status = 'IN_PROGRESS' THEN old_owner ELSE '' END,
		       old_generation, true, '` + jobstore.DetailDeadline + `', '` + protocol.FailClassJob + `', '` + protocol.CauseDeadline + `'
		FROM upd
	)
	SELECT id, old_status, old_owner, old_generation FROM upd ORDER BY deadline_at, id`

// ExpireDeadlines ends up to limit (≤ 0: all) live jobs whose deadline
// passed as TIMED_OUT and returns the tokens taken away.
func (s *Store) ExpireDeadlines(ctx context.Context, limit int) ([]fencing.Token, error) {
	var lim any
	if limit > 0 {
		lim = int64(limit)
	}
	rows, err := s.pool.Query(ctx, expireSQL, lim)
	if err != nil {
		return nil, fmt.Errorf("expire deadlines: %w", err)
	}
	var (
		out          []fencing.Token
		t            fencing.Token
		status, ownr string
	)
	_, err = pgx.ForEachRow(rows, []any{&t.JobID, &status, &ownr, &t.Generation}, func() error {
		if status == jobstore.StatusInProgress {
			out = append(out, fencing.Token{JobID: t.JobID, Owner: ownr, Generation: t.Generation})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expire deadlines: %w", err)
	}
	return out, nil
}
