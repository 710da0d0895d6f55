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
)

var _ jobstore.ObservationStore = (*Store)(nil)

// observedCommitSQL is commitSQL with the result's observations ($5, the
// JSON array of jobstore.ObservationRecord) written by the same
// statement, linked to its write_events row: all of them when the result
// is accepted; when it is refused, those of a job that exists and keeps
// no more than $6 refused rows with them. The phone is the one the
// token's grant named (else the one the selector pins), its model and SDK
// what the token's agent last reported of it (else the model the
// selector pins). It returns whether the result was accepted.
const observedCommitSQL = `
	WITH upd AS (
		UPDATE jobs
		SET status = 'SUCCEEDED', result = $4, completed_by = $3, updated_at = clock_timestamp()
		WHERE id = $1 AND lease_generation = $2 AND worker_id = $3 AND status = 'IN_PROGRESS'
		RETURNING id
	), ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted)
		SELECT $1, '` + jobstore.VerbResult + `', $3, $2, EXISTS (SELECT 1 FROM upd)
		RETURNING id, at, accepted
	), j AS (
		SELECT project,
		       COALESCE(NULLIF(CASE WHEN lease_generation = $2 AND worker_id = $3 THEN device_serial END, ''),
		                task->'device'->>'serial', '') AS serial,
		       COALESCE(task->'device'->>'model', '') AS model
		FROM jobs WHERE id = $1
	), ph AS (
		SELECT COALESCE(d->>'model', '') AS model,
		       CASE WHEN jsonb_typeof(d->'facts'->'sdk') = 'number' THEN (d->'facts'->>'sdk')::bigint ELSE 0 END AS sdk
		FROM j, agents a, jsonb_array_elements(a.devices) d
		WHERE a.agent_id = split_part($3, '/', 1) AND j.serial <> '' AND d->>'serial' = j.serial
		LIMIT 1
	), obs AS (
		INSERT INTO observations (project, job_id, generation, owner, position, agent_id, phone_serial, phone_model, phone_sdk,
			step, name, raw, value, parse, currency, tax, bounds, selector, app_package, app_version, app_version_code,
			locale, time_zone, observed_at, accepted_at, evidence, accepted, write_event_id)
		SELECT j.project, $1, $2, $3, r.position, split_part($3, '/', 1), j.serial,
		       COALESCE(NULLIF((SELECT model FROM ph), ''), j.model), COALESCE((SELECT sdk FROM ph), 0),
		       r.step, r.name, r.raw, r.value, r.parse, r.currency, r.tax, r.bounds, r.selector,
		       r.app_package, r.app_version, r.app_version_code, r.locale, r.time_zone, r.observed_at,
		       ev.at, COALESCE(r.evidence, '[]'::jsonb), ev.accepted, ev.id
		FROM j, ev, jsonb_to_recordset($5::jsonb) AS r(position integer, step integer, name text, raw text, value text,
			parse text, currency text, tax text, bounds text, selector text, app_package text, app_version text,
			app_version_code bigint, locale text, time_zone text, observed_at timestamptz, evidence jsonb)
		WHERE ev.accepted
		   OR (SELECT count(*) FROM observations o WHERE o.job_id = $1 AND NOT o.accepted) + jsonb_array_length($5::jsonb) <= $6
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
