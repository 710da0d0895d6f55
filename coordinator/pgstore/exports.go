package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
)

var _ jobstore.ExportStore = (*Store)(nil)

// DatabaseNow returns the database clock (jobstore.ExportStore).
func (s *Store) DatabaseNow(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return t.UTC(), nil
}

// ExportProjects lists the projects that hold observations
// (jobstore.ExportStore).
func (s *Store) ExportProjects(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, sqlstore.ProjectsSQL)
	return sqlstore.List(rows, err, func(r sqlstore.Row) (string, error) {
		var p string
		return p, r.Scan(&p)
	}, "list the projects with observations")
}

// NextExportDay returns the first day with accepted observations of
// project in [from, until) and its span (jobstore.ExportStore).
func (s *Store) NextExportDay(ctx context.Context, project string, from, until time.Time) (jobstore.ExportSpan, error) {
	var first *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT min(accepted_at) FROM observations
		WHERE project = $1 AND accepted AND accepted_at >= $2 AND accepted_at < $3`, project, from, until).Scan(&first); err != nil {
		return jobstore.ExportSpan{}, fmt.Errorf("next export day of %s: %w", project, err)
	}
	if first == nil {
		return jobstore.ExportSpan{}, nil
	}
	sp := jobstore.ExportSpan{Day: first.UTC().Truncate(24 * time.Hour)}
	if err := s.pool.QueryRow(ctx, `SELECT COALESCE(min(id), 0), COALESCE(max(id), 0), count(*) FROM observations
		WHERE project = $1 AND accepted AND accepted_at >= $2 AND accepted_at < $3`,
		project, sp.Day, sp.Day.Add(24*time.Hour)).Scan(&sp.FirstID, &sp.LastID, &sp.Rows); err != nil {
		return jobstore.ExportSpan{}, fmt.Errorf("span of %s on %s: %w", project, sqlstore.ExportDay(sp.Day), err)
	}
	return sp, nil
}

// ExportProgress returns the latest recorded day of project and its
// unfinished partitions (jobstore.ExportStore).
func (s *Store) ExportProgress(ctx context.Context, project string) (time.Time, []jobstore.ExportPartition, error) {
	var latest *string
	if err := s.pool.QueryRow(ctx, `SELECT max(day) FROM observation_exports WHERE project = $1`, project).Scan(&latest); err != nil {
		return time.Time{}, nil, fmt.Errorf("export progress of %s: %w", project, err)
	}
	if latest == nil {
		return time.Time{}, nil, nil
	}
	day, err := sqlstore.ParseExportDay(*latest)
	if err != nil {
		return time.Time{}, nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+sqlstore.ExportColumns+` FROM observation_exports
		WHERE project = $1 AND finished_at IS NULL ORDER BY day LIMIT $2`, project, jobstore.MaxUnfinishedExports)
	parts, err := sqlstore.List(rows, err, scanExportPartition, "unfinished exports of %s", project)
	return day, parts, err
}

// ExportPartitions lists the recorded partitions of project
// (jobstore.ExportStore).
func (s *Store) ExportPartitions(ctx context.Context, project string, limit int) ([]jobstore.ExportPartition, error) {
	if limit < 1 || limit > jobstore.MaxUnfinishedExports {
		return nil, fmt.Errorf("export partitions: limit %d is out of range 1..%d", limit, jobstore.MaxUnfinishedExports)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+sqlstore.ExportColumns+` FROM observation_exports
		WHERE project = $1 ORDER BY day LIMIT $2`, project, limit)
	return sqlstore.List(rows, err, scanExportPartition, "export partitions of %s", project)
}

func scanExportPartition(row sqlstore.Row) (jobstore.ExportPartition, error) {
	return sqlstore.ScanExportPartition(row, times)
}

// claimExportSQL inserts the partition $1/$2 claimed by $3 for $4
// milliseconds, or takes over an unfinished one whose claim expired; it
// returns the claim's attempt, and no row when the partition is finished
// or claimed.
const claimExportSQL = `
	INSERT INTO observation_exports (project, day, owner, attempt, claimed_at, claim_expires_at)
	VALUES ($1, $2, $3, 1, clock_timestamp(), clock_timestamp() + $4::bigint * interval '1 millisecond')
	ON CONFLICT (project, day) DO UPDATE
	SET owner = EXCLUDED.owner, attempt = observation_exports.attempt + 1,
	    claimed_at = EXCLUDED.claimed_at, claim_expires_at = EXCLUDED.claim_expires_at
	WHERE observation_exports.finished_at IS NULL AND observation_exports.claim_expires_at <= clock_timestamp()
	RETURNING attempt`

// ClaimExport claims a partition (jobstore.ExportStore).
func (s *Store) ClaimExport(ctx context.Context, project string, day time.Time, owner string, ttl time.Duration) (jobstore.ExportClaim, error) {
	if err := jobstore.CheckExportClaim(project, day, owner, ttl); err != nil {
		return jobstore.ExportClaim{}, fmt.Errorf("claim export: %w", err)
	}
	c := jobstore.ExportClaim{Project: project, Day: day.UTC(), Owner: owner}
	err := s.pool.QueryRow(ctx, claimExportSQL, project, sqlstore.ExportDay(day), owner, ttl.Milliseconds()).Scan(&c.Attempt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return jobstore.ExportClaim{}, fmt.Errorf("claim export %s/%s: %w", project, sqlstore.ExportDay(day), jobstore.ErrConflict)
	case err != nil:
		return jobstore.ExportClaim{}, fmt.Errorf("claim export %s/%s: %w", project, sqlstore.ExportDay(day), err)
	}
	return c, nil
}

// RenewExport extends a live claim (jobstore.ExportStore).
func (s *Store) RenewExport(ctx context.Context, c jobstore.ExportClaim, ttl time.Duration) error {
	tag, err := s.pool.Exec(ctx, `UPDATE observation_exports SET claim_expires_at = clock_timestamp() + $5::bigint * interval '1 millisecond'
		WHERE project = $1 AND day = $2 AND owner = $3 AND attempt = $4 AND finished_at IS NULL
		  AND claim_expires_at > clock_timestamp()`,
		c.Project, sqlstore.ExportDay(c.Day), c.Owner, c.Attempt, max(ttl.Milliseconds(), 1))
	return sqlstore.ExportWritten(tag.RowsAffected(), err, "renew", c)
}

// FinishExport records a written partition (jobstore.ExportStore).
func (s *Store) FinishExport(ctx context.Context, c jobstore.ExportClaim, d jobstore.ExportDone) error {
	if err := sqlstore.CheckExportDone(d); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE observation_exports SET finished_at = clock_timestamp(),
		file_count = $5, row_count = $6, byte_count = $7, first_id = $8, last_id = $9
		WHERE project = $1 AND day = $2 AND owner = $3 AND attempt = $4 AND finished_at IS NULL`,
		c.Project, sqlstore.ExportDay(c.Day), c.Owner, c.Attempt, d.Files, d.Rows, d.Bytes, d.FirstID, d.LastID)
	return sqlstore.ExportWritten(tag.RowsAffected(), err, "finish", c)
}
