-- Grant order and project limits (docs/operations.md, "Priorities,
-- projects and not_before").
--
-- ClaimFor: the projects that have queued jobs (one index descent each)
-- and the first candidate of each, highest priority first, oldest first
-- within one priority.
CREATE INDEX jobs_queued_project ON jobs (project, priority DESC, created_at, seq) WHERE status = 'QUEUED';

-- Jobs running per project, counted against the limits and for the
-- metrics.
CREATE INDEX jobs_in_progress_project ON jobs (project) WHERE status = 'IN_PROGRESS';
