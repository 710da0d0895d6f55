package sqlitestore

import (
	"context"
	"fmt"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

var _ jobstore.ProjectCounter = (*Store)(nil)

// ProjectJobCounts counts the queued and in-progress jobs of every project
// (partial indexes jobs_queued_project and jobs_in_progress_project).
func (s *Store) ProjectJobCounts(ctx context.Context) ([]jobstore.ProjectJobCount, error) {
	rows, err := s.r.QueryContext(ctx, `
		SELECT project, 'QUEUED', count(*) FROM jobs WHERE status = 'QUEUED' GROUP BY project
		UNION ALL
		SELECT project, 'IN_PROGRESS', count(*) FROM jobs WHERE status = 'IN_PROGRESS' GROUP BY project
		ORDER BY 1, 2 DESC`)
	if err != nil {
		return nil, fmt.Errorf("count jobs by project: %w", err)
	}
	defer rows.Close()
	var out []jobstore.ProjectJobCount
	for rows.Next() {
		var c jobstore.ProjectJobCount
		if err := rows.Scan(&c.Project, &c.Status, &c.N); err != nil {
			return nil, fmt.Errorf("count jobs by project: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count jobs by project: %w", err)
	}
	return out, nil
}
