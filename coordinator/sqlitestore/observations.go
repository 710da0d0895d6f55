package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

var _ jobstore.ObservationStore = (*Store)(nil)

// CommitObserved accepts a result with its observations in one write
// transaction (jobstore.ObservationStore): the fenced UPDATE of commitSQL,
// its write_events row, the observations linked to it (refused rows too,
// within their bound), the outbox message when asked, and, when accepted,
// the manifest read before any other writer can come in.
func (s *Store) CommitObserved(ctx context.Context, tok fencing.Token, c jobstore.ObservedResult) ([]string, error) {
	if err := sqlstore.CheckResult(c.Result); err != nil {
		return nil, fmt.Errorf("commit %s: %w", tok, err)
	}
	if err := jobstore.CheckObservations(c.Observations); err != nil {
		return nil, fmt.Errorf("commit %s: %w", tok, err)
	}
	recs := jobstore.ObservationRecords(tok, c.Observations)
	var keys []string
	err := s.write(ctx, func(tx txn) error {
		keys = nil
		var id string
		err := tx.QueryRowContext(ctx, commitSQL, nullJSON(c.Result), tok.Owner, tok.JobID, tok.Generation, tok.Owner).Scan(&id)
		accepted := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var (
			evID int64
			evAt string
		)
		if err := tx.QueryRowContext(ctx,
			`INSERT INTO write_events (job_id, verb, owner, generation, accepted) VALUES (?, ?, ?, ?, ?) RETURNING id, at`,
			tok.JobID, jobstore.VerbResult, tok.Owner, tok.Generation, accepted).Scan(&evID, &evAt); err != nil {
			return fmt.Errorf("record write event: %w", err)
		}
		if err := insertObservations(ctx, tx, tok, recs, accepted, evID, evAt); err != nil {
			return fmt.Errorf("write observations: %w", err)
		}
		if !accepted {
			return refusal(ctx, tx, tok.JobID)
		}
		if c.OutboxKey != "" {
			if _, err := tx.ExecContext(ctx, outboxInsertSQL, tok.JobID, tok.Generation, tok.Owner, c.OutboxKey, nullJSON(c.Result)); err != nil {
				return fmt.Errorf("write outbox %s: %w", c.OutboxKey, err)
			}
		}
		keys, err = manifestKeys(ctx, tx, tok)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", tok, err)
	}
	return keys, nil
}

// observeLiveSQL is the fence of RecordObservations, renewSQL's: the
// token is the job's current one, IN_PROGRESS, its lease not expired.
var observeLiveSQL = `
	SELECT EXISTS (SELECT 1 FROM jobs
		WHERE id = ? AND lease_generation = ? AND worker_id = ? AND status = 'IN_PROGRESS'
		  AND lease_expires_at > ` + now + `)`

// observeNextSQL is the next position of an observation the token ?2/?3 of
// job ?1 records, from ?4 up.
const observeNextSQL = `
	SELECT COALESCE(max(position) + 1, ?4) FROM observations
	WHERE job_id = ?1 AND generation = ?2 AND owner = ?3 AND position >= ?4`

// RecordObservations records observations under tok outside a result
// (jobstore.ObservationStore), in one write transaction: the fence of
// renewSQL, the write event (verb observe) and the rows linked to it
// (refused rows too, within their bound). An accepted call past the
// token's bound rolls back: nothing is written.
func (s *Store) RecordObservations(ctx context.Context, tok fencing.Token, obs []protocol.Observation) error {
	if err := jobstore.CheckRecorded(obs); err != nil {
		return fmt.Errorf("record observations of %s: %w", tok, err)
	}
	recs := jobstore.ObservationRecords(tok, obs)
	err := s.write(ctx, func(tx txn) error {
		var (
			live bool
			next int
		)
		if err := tx.QueryRowContext(ctx, observeLiveSQL, tok.JobID, tok.Generation, tok.Owner).Scan(&live); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, observeNextSQL, tok.JobID, tok.Generation, tok.Owner, jobstore.RecordedPosition).Scan(&next); err != nil {
			return err
		}
		if live && next+len(recs) > jobstore.RecordedPosition+jobstore.MaxRecordedObservations {
			return fmt.Errorf("%d more: %w (%d)", len(recs), jobstore.ErrObservationLimit, jobstore.MaxRecordedObservations)
		}
		var (
			evID int64
			evAt string
		)
		if err := tx.QueryRowContext(ctx,
			`INSERT INTO write_events (job_id, verb, owner, generation, accepted) VALUES (?, ?, ?, ?, ?) RETURNING id, at`,
			tok.JobID, jobstore.VerbObserve, tok.Owner, tok.Generation, live).Scan(&evID, &evAt); err != nil {
			return fmt.Errorf("record write event: %w", err)
		}
		for i := range recs {
			recs[i].Position = next + i
		}
		if err := insertObservations(ctx, tx, tok, recs, live, evID, evAt); err != nil {
			return fmt.Errorf("write observations: %w", err)
		}
		if !live {
			return refusal(ctx, tx, tok.JobID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record observations of %s: %w", tok, err)
	}
	return nil
}

// observedJobSQL reads, for the token ?2/?3 of job ?1, the job's project,
// the phone of the token's grant (the serial the grant named, else the one
// the selector pins) and the model and platform the selector names.
const observedJobSQL = `
	SELECT project,
	       COALESCE(NULLIF(CASE WHEN lease_generation = ?2 AND worker_id = ?3 THEN device_serial END, ''),
	                json_extract(task, '$.device.serial'), ''),
	       COALESCE(json_extract(task, '$.device.model'), ''),
	       COALESCE(json_extract(task, '$.device.platform'), ''),
	       (SELECT count(*) FROM observations WHERE job_id = ?1 AND accepted = 0)
	FROM jobs WHERE id = ?1`

// observedPhoneSQL reads the model, SDK, platform (android when reported
// without one) and OS version (iOS, else Android) the agent ?1 last
// reported of the phone ?2.
const observedPhoneSQL = `
	SELECT COALESCE(json_extract(d.value, '$.model'), ''), COALESCE(json_extract(d.value, '$.facts.sdk'), 0),
	       COALESCE(NULLIF(json_extract(d.value, '$.platform'), ''), '` + protocol.PlatformAndroid + `'),
	       COALESCE(NULLIF(json_extract(d.value, '$.facts.ios_version'), ''), json_extract(d.value, '$.facts.android_version'), '')
	FROM agents a, json_each(a.devices) d
	WHERE a.agent_id = ?1 AND json_extract(d.value, '$.serial') = ?2
	LIMIT 1`

const insertObservationSQL = `
	INSERT INTO observations (project, job_id, generation, owner, position, agent_id, phone_serial, phone_model, phone_sdk,
		phone_platform, phone_os_version, step, name, raw, value, parse, currency, tax, bounds, selector, app_package,
		app_version, app_version_code, locale, time_zone, observed_at, accepted_at, evidence, accepted, write_event_id)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (job_id, generation, owner, position) DO NOTHING`

// insertObservations writes recs under the write event evID (at evAt): all
// of them when accepted; when refused, only for a job that exists and
// keeps fewer than jobstore.MaxRefusedObservations refused rows with
// them.
func insertObservations(ctx context.Context, tx txn, tok fencing.Token, recs []jobstore.ObservationRecord, accepted bool, evID int64, evAt string) error {
	if len(recs) == 0 {
		return nil
	}
	var (
		project, serial, model, platform, osVersion string
		refused                                     int
		sdk                                         int64
	)
	err := tx.QueryRowContext(ctx, observedJobSQL, tok.JobID, tok.Generation, tok.Owner).Scan(&project, &serial, &model, &platform, &refused)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // an unknown job: its write event says enough
	}
	if err != nil {
		return err
	}
	if !accepted && refused+len(recs) > jobstore.MaxRefusedObservations {
		return nil
	}
	agentID := tok.AgentID()
	if serial != "" {
		var m, p string
		err := tx.QueryRowContext(ctx, observedPhoneSQL, agentID, serial).Scan(&m, &sdk, &p, &osVersion)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if m != "" {
			model = m
		}
		if p != "" {
			platform = p
		}
	}
	st, err := tx.PrepareContext(ctx, insertObservationSQL)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, r := range recs {
		var observed any
		if r.ObservedAt != nil {
			observed = r.ObservedAt.UTC().Format(timeLayout)
		}
		ev, err := json.Marshal(r.Evidence)
		if err != nil {
			return err
		}
		if _, err := st.ExecContext(ctx, project, tok.JobID, tok.Generation, tok.Owner, r.Position, agentID, serial, model, sdk,
			platform, osVersion, r.Step, r.Name, r.Raw, r.Value, r.Parse, r.Currency, r.Tax, r.Bounds, r.Selector, r.AppPackage, r.AppVersion, r.AppCode,
			r.Locale, r.TimeZone, observed, evAt, string(ev), accepted, evID); err != nil {
			return err
		}
	}
	return nil
}

// ListObservations lists the observations f selects, by id
// (jobstore.ObservationStore).
func (s *Store) ListObservations(ctx context.Context, f jobstore.ObservationFilter) ([]jobstore.ObservationRow, error) {
	if err := jobstore.CheckObservationFilter(f); err != nil {
		return nil, fmt.Errorf("list observations: %w", err)
	}
	q, args := sqlstore.ObservationQuery(f, func(int) string { return "?" },
		func(t time.Time) any { return formatTime(t) }, "accepted = 1")
	rows, err := s.query(ctx, q, args...)
	return sqlstore.List(rows, err, scanObservation, "list observations of project %s", f.Project)
}

func scanObservation(row sqlstore.Row) (jobstore.ObservationRow, error) {
	return sqlstore.ScanObservation(row, times)
}
