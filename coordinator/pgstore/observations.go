package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

var _ jobstore.ObservationStore = (*Store)(nil)

// observedJobCTEs are the CTEs j and ph of the statements that write
// observations for the token $1/$2/$3: the job's project, the phone the
// token's grant named (else the one the selector pins), and its model,
// SDK, platform (android when reported without one) and OS version (iOS,
// else Android) as the token's agent last reported them (else the model
// and platform the selector names).
const observedJobCTEs = `
	j AS (
		SELECT project,
		       COALESCE(NULLIF(CASE WHEN lease_generation = $2 AND worker_id = $3 THEN device_serial END, ''),
		                task->'device'->>'serial', '') AS serial,
		       COALESCE(task->'device'->>'model', '') AS model,
		       COALESCE(task->'device'->>'platform', '') AS platform
		FROM jobs WHERE id = $1
	), ph AS (
		SELECT COALESCE(d->>'model', '') AS model,
		       CASE WHEN jsonb_typeof(d->'facts'->'sdk') = 'number' THEN (d->'facts'->>'sdk')::bigint ELSE 0 END AS sdk,
		       COALESCE(NULLIF(d->>'platform', ''), '` + protocol.PlatformAndroid + `') AS platform,
		       COALESCE(NULLIF(d->'facts'->>'ios_version', ''), d->'facts'->>'android_version', '') AS os_version
		FROM j, agents a, jsonb_array_elements(a.devices) d
		WHERE a.agent_id = split_part($3, '/', 1) AND j.serial <> '' AND d->>'serial' = j.serial
		LIMIT 1
	)`

// insertObservationsSQL inserts the records $n (a JSON array of
// jobstore.ObservationRecord) of the token $1/$2/$3 under the write event
// ev, each at the position pos plus its own; the statement adds its FROM
// items and its WHERE clause.
func insertObservationsSQL(n, pos string) string {
	return `
		INSERT INTO observations (project, job_id, generation, owner, position, agent_id, phone_serial, phone_model, phone_sdk,
			phone_platform, phone_os_version, step, name, raw, value, parse, currency, tax, bounds, selector, app_package, app_version, app_version_code,
			locale, time_zone, observed_at, accepted_at, evidence, accepted, write_event_id)
		SELECT j.project, $1, $2, $3, ` + pos + ` + r.position, split_part($3, '/', 1), j.serial,
		       COALESCE(NULLIF((SELECT model FROM ph), ''), j.model), COALESCE((SELECT sdk FROM ph), 0),
		       COALESCE((SELECT platform FROM ph), j.platform), COALESCE((SELECT os_version FROM ph), ''),
		       r.step, r.name, r.raw, r.value, r.parse, r.currency, r.tax, r.bounds, r.selector,
		       r.app_package, r.app_version, r.app_version_code, r.locale, r.time_zone, r.observed_at,
		       ev.at, COALESCE(r.evidence, '[]'::jsonb), ev.accepted, ev.id
		FROM j, ev, jsonb_to_recordset(` + n + `::jsonb) AS r(position integer, step integer, name text, raw text, value text,
			parse text, currency text, tax text, bounds text, selector text, app_package text, app_version text,
			app_version_code bigint, locale text, time_zone text, observed_at timestamptz, evidence jsonb)`
}

// refusedRoom is the condition under which a refused attempt keeps its
// records $n: the job keeps no more than $max refused rows with them.
func refusedRoom(n, max string) string {
	return `(SELECT count(*) FROM observations o WHERE o.job_id = $1 AND NOT o.accepted) + jsonb_array_length(` + n + `::jsonb) <= ` + max
}

// observedCommitSQL is commitSQL with the result's observations ($5, the
// JSON array of jobstore.ObservationRecord) written by the same
// statement, linked to its write_events row: all of them when the result
// is accepted; when it is refused, those of a job that exists and keeps
// no more than $6 refused rows with them. It returns whether the result
// was accepted.
var observedCommitSQL = `
	WITH ` + commitUpdCTE + `, ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted)
		SELECT $1, '` + jobstore.VerbResult + `', $3, $2, EXISTS (SELECT 1 FROM upd)
		RETURNING id, at, accepted
	),` + observedJobCTEs + `, obs AS (` + insertObservationsSQL("$5", "0") + `
		WHERE ev.accepted OR ` + refusedRoom("$5", "$6") + `
		ON CONFLICT (job_id, generation, owner, position) DO NOTHING
	)
	SELECT accepted FROM ev`

// observedArgs are the arguments of observedCommitSQL.
func observedArgs(tok fencing.Token, c jobstore.ObservedResult, recs []byte) []any {
	return []any{tok.JobID, tok.Generation, tok.Owner, nullJSON(c.Result), string(recs), jobstore.MaxRefusedObservations}
}

// CommitObserved accepts a result with its observations
// (jobstore.ObservationStore). Without an outbox key it is CommitManifest
// with observedCommitSQL in place of commitSQL, grouped with the other
// results of its moment; with one, observedCommitSQL, the outbox message
// and the manifest query in one transaction.
func (s *Store) CommitObserved(ctx context.Context, tok fencing.Token, c jobstore.ObservedResult) ([]string, error) {
	if err := sqlstore.CheckResult(c.Result); err != nil {
		return nil, fmt.Errorf("commit %s: %w", tok, err)
	}
	if err := jobstore.CheckObservations(c.Observations); err != nil {
		return nil, fmt.Errorf("commit %s: %w", tok, err)
	}
	recs, err := sqlstore.ObservationRecordsJSON(jobstore.ObservationRecords(tok, c.Observations))
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", tok, err)
	}
	if c.OutboxKey == "" {
		return s.commitGrouped(ctx, &groupedCommit{ctx: ctx, tok: tok, result: c.Result, observed: recs, c: c, done: make(chan struct{})})
	}
	var keys []string
	err = s.withOutbox(ctx, "commit", tok,
		func(tx pgx.Tx) (bool, error) {
			var ok bool
			err := tx.QueryRow(ctx, observedCommitSQL, observedArgs(tok, c, recs)...).Scan(&ok)
			return ok, err
		},
		func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, outboxInsertSQL, tok.JobID, tok.Generation, tok.Owner, c.OutboxKey, nullJSON(c.Result)); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, manifestSQL, tok.JobID, tok.Generation)
			if err != nil {
				return err
			}
			keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		}, c.OutboxKey)
	if err != nil {
		return nil, err
	}
	if keys == nil {
		keys = []string{}
	}
	return keys, nil
}

// observeLockSQL locks the job's row for the rest of the transaction of
// RecordObservations: no grant or other recording of the job comes in
// between, so that observeSQL, whose snapshot is taken once the lock is
// held, judges the token and counts the token's positions as they stand.
const observeLockSQL = `SELECT 1 FROM jobs WHERE id = $1 FOR NO KEY UPDATE`

// observeSQL records the observations $4 (the JSON array of
// jobstore.ObservationRecord) of the token $1/$2/$3 outside a result,
// fenced as renewSQL: the token is the job's current one, IN_PROGRESS,
// its lease not expired on the database clock. The write event (verb
// observe) and the rows are written by this statement: accepted, at the
// token's next positions from $6; refused, the same within the job's
// bound $5 of refused rows. An accepted call that would take the token
// past $6 + $7 positions writes nothing. It returns whether the token
// held a live lease and whether the observations fit.
var observeSQL = `
	WITH live AS (
		SELECT 1 FROM jobs
		WHERE id = $1 AND lease_generation = $2 AND worker_id = $3 AND status = 'IN_PROGRESS'
		  AND lease_expires_at > clock_timestamp()
	), nxt AS (
		SELECT COALESCE(max(position) + 1, $6::integer) AS pos FROM observations
		WHERE job_id = $1 AND generation = $2 AND owner = $3 AND position >= $6::integer
	), room AS (
		SELECT (SELECT pos FROM nxt) + jsonb_array_length($4::jsonb) <= $6::integer + $7::integer AS fits
	), ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted)
		SELECT $1, '` + jobstore.VerbObserve + `', $3, $2, EXISTS (SELECT 1 FROM live)
		WHERE NOT EXISTS (SELECT 1 FROM live) OR (SELECT fits FROM room)
		RETURNING id, at, accepted
	),` + observedJobCTEs + `, obs AS (` + insertObservationsSQL("$4", "(SELECT pos FROM nxt)") + `
		WHERE ev.accepted OR ` + refusedRoom("$4", "$5") + `
	)
	SELECT EXISTS (SELECT 1 FROM live), (SELECT fits FROM room)`

// RecordObservations records observations under tok outside a result
// (jobstore.ObservationStore): observeLockSQL and observeSQL in one batch,
// one implicit transaction.
func (s *Store) RecordObservations(ctx context.Context, tok fencing.Token, obs []protocol.Observation) error {
	if err := jobstore.CheckRecorded(obs); err != nil {
		return fmt.Errorf("record observations of %s: %w", tok, err)
	}
	recs, err := sqlstore.ObservationRecordsJSON(jobstore.ObservationRecords(tok, obs))
	if err != nil {
		return fmt.Errorf("record observations of %s: %w", tok, err)
	}
	b := &pgx.Batch{}
	b.Queue(observeLockSQL, tok.JobID)
	b.Queue(observeSQL, tok.JobID, tok.Generation, tok.Owner, string(recs), jobstore.MaxRefusedObservations,
		jobstore.RecordedPosition, jobstore.MaxRecordedObservations)
	br := s.pool.SendBatch(ctx, b)
	var live, fits bool
	_, err = br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&live, &fits)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return fmt.Errorf("record observations of %s: %w", tok, err)
	case !live:
		return s.refused(ctx, "record observations of", tok)
	case !fits:
		return fmt.Errorf("record observations of %s: %d more: %w (%d)", tok, len(obs), jobstore.ErrObservationLimit, jobstore.MaxRecordedObservations)
	}
	return nil
}

// ListObservations lists the observations f selects, by id
// (jobstore.ObservationStore).
func (s *Store) ListObservations(ctx context.Context, f jobstore.ObservationFilter) ([]jobstore.ObservationRow, error) {
	if err := jobstore.CheckObservationFilter(f); err != nil {
		return nil, fmt.Errorf("list observations: %w", err)
	}
	q, args := sqlstore.ObservationQuery(f, func(n int) string { return "$" + strconv.Itoa(n) },
		func(t time.Time) any { return t }, "accepted")
	rows, err := s.pool.Query(ctx, q, args...)
	return sqlstore.List(rows, err, scanObservation, "list observations of project %s", f.Project)
}

func scanObservation(row sqlstore.Row) (jobstore.ObservationRow, error) {
	return sqlstore.ScanObservation(row, times)
}
