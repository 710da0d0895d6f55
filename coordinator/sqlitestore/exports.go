package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
)

var _ jobstore.ExportStore = (*Store)(nil)

// DatabaseNow returns the database clock (jobstore.ExportStore).
func (s *Store) DatabaseNow(ctx context.Context) (time.Time, error) {
	var t string
	if err := s.rc.QueryRowContext(ctx, `SELECT `+now).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return parseTime(t)
}

// ExportProjects lists the projects that hold observations
// (jobstore.ExportStore).
func (s *Store) ExportProjects(ctx context.Context) ([]string, error) {
	rows, err := s.query(ctx, sqlstore.ProjectsSQL)
	return sqlstore.List(rows, err, func(r sqlstore.Row) (string, error) {
		var p string
		return p, r.Scan(&p)
	}, "list the projects with observations")
}

// NextExportDay returns the first day with accepted observations of
// project in [from, until) and its span (jobstore.ExportStore).
func (s *Store) NextExportDay(ctx context.Context, project string, from, until time.Time) (jobstore.ExportSpan, error) {
	var first sql.NullString
	if err := s.rc.QueryRowContext(ctx, `SELECT min(accepted_at) FROM observations
		WHERE project = ? AND accepted = 1 AND accepted_at >= ? AND accepted_at < ?`,
		project, formatTime(from), formatTime(until)).Scan(&first); err != nil {
		return jobstore.ExportSpan{}, fmt.Errorf("next export day of %s: %w", project, err)
	}
	if !first.Valid {
		return jobstore.ExportSpan{}, nil
	}
	t, err := parseTime(first.String)
	if err != nil {
		return jobstore.ExportSpan{}, err
	}
	sp := jobstore.ExportSpan{Day: t.Truncate(24 * time.Hour)}
	if err := s.rc.QueryRowContext(ctx, `SELECT COALESCE(min(id), 0), COALESCE(max(id), 0), count(*) FROM observations
		WHERE project = ? AND accepted = 1 AND accepted_at >= ? AND accepted_at < ?`,
		project, formatTime(sp.Day), formatTime(sp.Day.Add(24*time.Hour))).Scan(&sp.FirstID, &sp.LastID, &sp.Rows); err != nil {
		return jobstore.ExportSpan{}, fmt.Errorf("span of %s on %s: %w", project, sqlstore.ExportDay(sp.Day), err)
	}
	return sp, nil
}

// ExportProgress returns the latest recorded day of project and its
// unfinished partitions (jobstore.ExportStore).
func (s *Store) ExportProgress(ctx context.Context, project string) (time.Time, []jobstore.ExportPartition, error) {
	var latest sql.NullString
	if err := s.rc.QueryRowContext(ctx, `SELECT max(day) FROM observation_exports WHERE project = ?`, project).Scan(&latest); err != nil {
		return time.Time{}, nil, fmt.Errorf("export progress of %s: %w", project, err)
	}
	if !latest.Valid {
		return time.Time{}, nil, nil
	}
	day, err := sqlstore.ParseExportDay(latest.String)
	if err != nil {
		return time.Time{}, nil, err
	}
	rows, err := s.query(ctx, `SELECT `+sqlstore.ExportColumns+` FROM observation_exports
		WHERE project = ? AND finished_at IS NULL ORDER BY day LIMIT ?`, project, jobstore.MaxUnfinishedExports)
	parts, err := sqlstore.List(rows, err, scanExportPartition, "unfinished exports of %s", project)
	return day, parts, err
}

// ExportPartitions lists the recorded partitions of project
// (jobstore.ExportStore).
func (s *Store) ExportPartitions(ctx context.Context, project string, limit int) ([]jobstore.ExportPartition, error) {
	if limit < 1 || limit > jobstore.MaxUnfinishedExports {
		return nil, fmt.Errorf("export partitions: limit %d is out of range 1..%d", limit, jobstore.MaxUnfinishedExports)
	}
	rows, err := s.query(ctx, `SELECT `+sqlstore.ExportColumns+` FROM observation_exports
		WHERE project = ? ORDER BY day LIMIT ?`, project, limit)
	return sqlstore.List(rows, err, scanExportPartition, "export partitions of %s", project)
}

func scanExportPartition(row sqlstore.Row) (jobstore.ExportPartition, error) {
	return sqlstore.ScanExportPartition(row, times)
}

// claimExportSQL inserts the partition ?1/?2 claimed by ?3 until the
// modifier ?4, or takes over an unfinished one whose claim expired; it
// returns the claim's attempt, and no row when the partition is finished
// or claimed.
const claimExportSQL = `
	INSERT INTO observation_exports (project, day, owner, attempt, claimed_at, claim_expires_at)
	VALUES (?1, ?2, ?3, 1, ` + now + `, strftime('%Y-%m-%d %H:%M:%f', 'now', ?4))
	ON CONFLICT (project, day) DO UPDATE
	SET owner = excluded.owner, attempt = observation_exports.attempt + 1,
	    claimed_at = excluded.claimed_at, claim_expires_at = excluded.claim_expires_at
	WHERE observation_exports.finished_at IS NULL AND observation_exports.claim_expires_at <= ` + now + `
	RETURNING attempt`

// ClaimExport claims a partition (jobstore.ExportStore).
func (s *Store) ClaimExport(ctx context.Context, project string, day time.Time, owner string, ttl time.Duration) (jobstore.ExportClaim, error) {
	if err := jobstore.CheckExportClaim(project, day, owner, ttl); err != nil {
		return jobstore.ExportClaim{}, fmt.Errorf("claim export: %w", err)
	}
	c := jobstore.ExportClaim{Project: project, Day: day.UTC(), Owner: owner}
	err := s.write(ctx, func(tx txn) error {
		return tx.QueryRowContext(ctx, claimExportSQL, project, sqlstore.ExportDay(day), owner, modifier(ttl)).Scan(&c.Attempt)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return jobstore.ExportClaim{}, fmt.Errorf("claim export %s/%s: %w", project, sqlstore.ExportDay(day), jobstore.ErrConflict)
	case err != nil:
		return jobstore.ExportClaim{}, fmt.Errorf("claim export %s/%s: %w", project, sqlstore.ExportDay(day), err)
	}
	return c, nil
}

// RenewExport extends a live claim (jobstore.ExportStore).
func (s *Store) RenewExport(ctx context.Context, c jobstore.ExportClaim, ttl time.Duration) error {
	return s.updateExport(ctx, "renew", c, `UPDATE observation_exports SET claim_expires_at = `+nowPlus+`
		WHERE project = ? AND day = ? AND owner = ? AND attempt = ? AND finished_at IS NULL
		  AND claim_expires_at > `+now,
		modifier(max(ttl, time.Millisecond)), c.Project, sqlstore.ExportDay(c.Day), c.Owner, c.Attempt)
}

// FinishExport records a written partition (jobstore.ExportStore).
func (s *Store) FinishExport(ctx context.Context, c jobstore.ExportClaim, d jobstore.ExportDone) error {
	if err := sqlstore.CheckExportDone(d); err != nil {
		return err
	}
	return s.updateExport(ctx, "finish", c, `UPDATE observation_exports SET finished_at = `+now+`,
		file_count = ?, row_count = ?, byte_count = ?, first_id = ?, last_id = ?
		WHERE project = ? AND day = ? AND owner = ? AND attempt = ? AND finished_at IS NULL`,
		d.Files, d.Rows, d.Bytes, d.FirstID, d.LastID, c.Project, sqlstore.ExportDay(c.Day), c.Owner, c.Attempt)
}

// updateExport runs the renewal or finish q of claim c in a write
// transaction.
func (s *Store) updateExport(ctx context.Context, verb string, c jobstore.ExportClaim, q string, args ...any) error {
	var n int64
	err := s.write(ctx, func(tx txn) error {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return sqlstore.ExportWritten(n, err, verb, c)
}
