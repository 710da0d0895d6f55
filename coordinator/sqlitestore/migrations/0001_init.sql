-- Jobs, their artifacts and the record of every fenced write attempt.
-- Times are UTC text 'YYYY-MM-DD HH:MM:SS.SSS' from the database clock
-- (strftime('%Y-%m-%d %H:%M:%f', 'now')), so they compare as text.

CREATE TABLE jobs (
    id               TEXT PRIMARY KEY,
    status           TEXT NOT NULL
                     CHECK (status IN ('QUEUED', 'IN_PROGRESS', 'SUCCEEDED', 'FAILED')),
    task             TEXT NOT NULL,
    lease_generation INTEGER NOT NULL DEFAULT 0,
    worker_id        TEXT,
    lease_expires_at TEXT,
    result           TEXT,
    completed_by     TEXT,
    fail_reason      TEXT,
    created_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    updated_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

-- ClaimNext: oldest queued job first (rowid breaks ties within a millisecond).
CREATE INDEX jobs_queued_oldest ON jobs (created_at) WHERE status = 'QUEUED';

-- ReclaimExpired: in-progress leases by expiry.
CREATE INDEX jobs_in_progress_expiry ON jobs (lease_expires_at) WHERE status = 'IN_PROGRESS';

CREATE TABLE artifacts (
    job_id       TEXT NOT NULL REFERENCES jobs (id),
    generation   INTEGER NOT NULL,
    owner        TEXT NOT NULL,
    name         TEXT NOT NULL,
    key          TEXT NOT NULL,
    size         INTEGER NOT NULL,
    sha256       TEXT NOT NULL,
    content_type TEXT NOT NULL,
    etag         TEXT NOT NULL DEFAULT '',
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    UNIQUE (job_id, generation, name)
);

-- No foreign key to jobs: attempts on unknown jobs are recorded too.
CREATE TABLE write_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id     TEXT NOT NULL,
    verb       TEXT NOT NULL,
    owner      TEXT NOT NULL,
    generation INTEGER NOT NULL,
    accepted   INTEGER NOT NULL CHECK (accepted IN (0, 1)),
    at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

CREATE INDEX write_events_job ON write_events (job_id, id);
