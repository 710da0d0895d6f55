-- Grant order and project limits (docs/operations.md, "Priorities,
-- projects and not_before").
--
-- ClaimFor without project limits: queued jobs highest priority first,
-- oldest first within one priority.
CREATE INDEX jobs_queued_priority ON jobs (priority DESC, created_at, seq) WHERE status = 'QUEUED';

-- ClaimFor with project limits: the projects that have queued jobs (one
-- index descent each) and the first candidate of each, in the same order.
CREATE INDEX jobs_queued_project ON jobs (project, priority DESC, created_at, seq) WHERE status = 'QUEUED';

-- Jobs running per project, counted against the limits and for the
-- metrics.
CREATE INDEX jobs_in_progress_project ON jobs (project) WHERE status = 'IN_PROGRESS';
