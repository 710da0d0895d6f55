package pgstore

import (
	"context"
	"fmt"

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
	if err != nil {
		return nil, fmt.Errorf("count jobs by project: %w", err)
	}
	defer rows.Close()
	out, err := sqlstore.Collect(rows, sqlstore.ScanProjectJobCount)
	if err != nil {
		return nil, fmt.Errorf("count jobs by project: %w", err)
	}
	return out, nil
}
