-- Job policy (docs/operations.md, "Deadlines, attempts and priorities"):
-- distinct end states, project, priority, not-before, attempt limit and
-- count, deadline, who submitted it.

ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check CHECK (status IN
    ('QUEUED', 'IN_PROGRESS', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT', 'NEEDS_DECISION'));

ALTER TABLE jobs ADD COLUMN project      text    NOT NULL DEFAULT 'default';
ALTER TABLE jobs ADD COLUMN priority     integer NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN not_before   timestamptz;            -- not granted before; NULL: at once
ALTER TABLE jobs ADD COLUMN max_attempts integer NOT NULL DEFAULT 3 CHECK (max_attempts > 0);
ALTER TABLE jobs ADD COLUMN attempts     integer NOT NULL DEFAULT 0;  -- grants so far
ALTER TABLE jobs ADD COLUMN deadline_at  timestamptz;            -- first grant + task timeout; NULL: none
ALTER TABLE jobs ADD COLUMN submitted_by text    NOT NULL DEFAULT '';

-- Existing rows: every grant so far counts as an attempt; a cancelled job
-- and one waiting on an effect decision get their own end states.
UPDATE jobs SET attempts = lease_generation;
UPDATE jobs SET status = 'CANCELLED'
 WHERE status = 'FAILED'
   AND EXISTS (SELECT 1 FROM write_events w
                WHERE w.job_id = jobs.id AND w.verb = 'cancel' AND w.accepted);
UPDATE jobs SET status = 'NEEDS_DECISION'
 WHERE status = 'FAILED' AND fail_reason LIKE 'needs\_decision%';

CREATE INDEX jobs_project_status ON jobs (project, status);
