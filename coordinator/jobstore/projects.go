package jobstore

import "context"

// ProjectJobCount is the number of jobs of one project in one state.
type ProjectJobCount struct {
	Project string
	Status  string
	N       int64
}

// ProjectCounter is implemented by stores that count the live jobs of
// every project from their partial indexes, for the project_jobs gauge
// (docs/operations.md, "Priorities, projects and not_before").
type ProjectCounter interface {
	// ProjectJobCounts counts the queued and the in-progress jobs of every
	// project that has any, by project and then state.
	ProjectJobCounts(ctx context.Context) ([]ProjectJobCount, error)
}
