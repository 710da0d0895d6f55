package sqlstore

import (
	"fmt"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// ExportColumns are the columns ScanExportPartition reads, in its order
// (the table observation_exports, migration 0013).
const ExportColumns = `project, day, owner, attempt, claim_expires_at, finished_at,
	file_count, row_count, byte_count, first_id, last_id`

// ProjectsSQL lists the projects that hold observations, by name, in
// one index probe per project (observations_project) rather than a scan
// of every row: the smallest name, then the smallest above it, and so on.
const ProjectsSQL = `
	WITH RECURSIVE p(project) AS (
		SELECT min(project) FROM observations
		UNION ALL
		SELECT (SELECT min(o.project) FROM observations o WHERE o.project > p.project) FROM p WHERE p.project IS NOT NULL
	)
	SELECT project FROM p WHERE project IS NOT NULL`

// ScanExportPartition reads a recorded partition (ExportColumns).
func ScanExportPartition[T any](row Row, times Times[T]) (jobstore.ExportPartition, error) {
	var (
		p        jobstore.ExportPartition
		day      string
		expires  T
		finished *T
		files    int64
	)
	if err := row.Scan(&p.Project, &day, &p.Owner, &p.Attempt, &expires, &finished,
		&files, &p.Rows, &p.Bytes, &p.FirstID, &p.LastID); err != nil {
		return jobstore.ExportPartition{}, err
	}
	p.Files = int(files)
	var err error
	if p.Day, err = ParseExportDay(day); err != nil {
		return jobstore.ExportPartition{}, err
	}
	if p.ClaimExpires, err = times(expires); err != nil {
		return jobstore.ExportPartition{}, err
	}
	if p.Finished, err = times.Null(finished); err != nil {
		return jobstore.ExportPartition{}, err
	}
	return p, nil
}

// ExportDay is the stored text of a partition's day.
func ExportDay(day time.Time) string { return day.UTC().Format(jobstore.ExportDayLayout) }

// ParseExportDay reads ExportDay.
func ParseExportDay(s string) (time.Time, error) {
	t, err := time.ParseInLocation(jobstore.ExportDayLayout, s, time.UTC)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse export day %q: %w", s, err)
	}
	return t, nil
}

// CheckExportDone checks what a writer says a finished partition holds.
func CheckExportDone(d jobstore.ExportDone) error {
	if d.Files < 0 || d.Rows < 0 || d.Bytes < 0 || d.FirstID < 0 || d.LastID < d.FirstID {
		return fmt.Errorf("export done: %+v is not a partition's content", d)
	}
	return nil
}

// ExportWritten is the error of a renewal or finish of claim c (verb)
// that updated n rows: ErrExportLost (wrapped) for none.
func ExportWritten(n int64, err error, verb string, c jobstore.ExportClaim) error {
	switch {
	case err != nil:
		return fmt.Errorf("%s export %s/%s: %w", verb, c.Project, ExportDay(c.Day), err)
	case n == 0:
		return fmt.Errorf("%s export %s/%s (attempt %d of %s): %w", verb, c.Project, ExportDay(c.Day), c.Attempt, c.Owner, jobstore.ErrExportLost)
	}
	return nil
}
