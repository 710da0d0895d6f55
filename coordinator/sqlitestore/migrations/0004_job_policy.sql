-- Job policy (docs/operations.md, "Deadlines, attempts and priorities"):
-- distinct end states, project, priority, not-before, attempt limit and
-- count, deadline, who submitted it.
--
-- SQLite cannot change a CHECK constraint in place, so the jobs table is
-- rebuilt (https://sqlite.org/lang_altertable.html, "Making Other Kinds Of
-- Table Schema Changes"); the migration runs with foreign keys off and
-- checks them before it commits.

CREATE TABLE jobs_new (
    id               TEXT PRIMARY KEY,
    status           TEXT NOT NULL
                     CHECK (status IN ('QUEUED', 'IN_PROGRESS', 'SUCCEEDED', 'FAILED',
                                       'CANCELLED', 'TIMED_OUT', 'NEEDS_DECISION')),
    task             TEXT NOT NULL,
    lease_generation INTEGER NOT NULL DEFAULT 0,
    worker_id        TEXT,
    lease_expires_at TEXT,
    result           TEXT,
    completed_by     TEXT,
    fail_reason      TEXT,
    created_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    updated_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    device_serial    TEXT,
    project          TEXT    NOT NULL DEFAULT 'default',
    priority         INTEGER NOT NULL DEFAULT 0,
    not_before       TEXT,                     -- not granted before; NULL: at once
    max_attempts     INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts > 0),
    attempts         INTEGER NOT NULL DEFAULT 0,  -- grants so far
    deadline_at      TEXT,                     -- first grant + task timeout; NULL: none
    submitted_by     TEXT    NOT NULL DEFAULT ''
);

INSERT INTO jobs_new (id, status, task, lease_generation, worker_id, lease_expires_at,
                      result, completed_by, fail_reason, created_at, updated_at, device_serial,
                      attempts)
SELECT id, status, task, lease_generation, worker_id, lease_expires_at,
       result, completed_by, fail_reason, created_at, updated_at, device_serial,
       lease_generation
  FROM jobs;

DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;

CREATE INDEX jobs_queued_oldest ON jobs (created_at) WHERE status = 'QUEUED';
CREATE INDEX jobs_in_progress_expiry ON jobs (lease_expires_at) WHERE status = 'IN_PROGRESS';
CREATE UNIQUE INDEX jobs_one_per_phone ON jobs (worker_id, device_serial)
    WHERE status = 'IN_PROGRESS' AND device_serial IS NOT NULL;
CREATE INDEX jobs_in_progress_owner ON jobs (worker_id) WHERE status = 'IN_PROGRESS';
CREATE INDEX jobs_project_status ON jobs (project, status);

-- A cancelled job and one waiting on an effect decision get their own end
-- states.
UPDATE jobs SET status = 'CANCELLED'
 WHERE status = 'FAILED'
   AND EXISTS (SELECT 1 FROM write_events w
                WHERE w.job_id = jobs.id AND w.verb = 'cancel' AND w.accepted);
UPDATE jobs SET status = 'NEEDS_DECISION'
 WHERE status = 'FAILED' AND fail_reason LIKE 'needs\_decision%' ESCAPE '\';
