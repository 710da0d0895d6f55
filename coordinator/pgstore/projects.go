package pgstore

import (
	"context"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
)

var _ jobstore.ProjectCounter = (*Store)(nil)

// ProjectJobCounts counts the queued and in-progress jobs of every project
// (partial indexes jobs_queued_project and jobs_in_progress_project).
func (s *Store) ProjectJobCounts(ctx context.Context) ([]jobstore.ProjectJobCount, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT project, 'QUEUED', count(*) FROM jobs WHERE status = 'QUEUED' GROUP BY project
		UNION ALL
		SELECT project, 'IN_PROGRESS', count(*) FROM jobs WHERE status = 'IN_PROGRESS' GROUP BY project
		ORDER BY 1, 2 DESC`)
	return sqlstore.List(rows, err, sqlstore.ScanProjectJobCount, "count jobs by project")
}
