-- Jobs, their artifacts and the record of every fenced write attempt.

CREATE TABLE jobs (
    id               text PRIMARY KEY,
    seq              bigint GENERATED ALWAYS AS IDENTITY,
    status           text NOT NULL
                     CHECK (status IN ('QUEUED', 'IN_PROGRESS', 'SUCCEEDED', 'FAILED')),
    task             jsonb NOT NULL,
    lease_generation bigint NOT NULL DEFAULT 0,
    worker_id        text,
    lease_expires_at timestamptz,
    result           jsonb,
    completed_by     text,
    fail_reason      text,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- ClaimNext: oldest queued job first.
CREATE INDEX jobs_queued_oldest ON jobs (created_at, seq) WHERE status = 'QUEUED';

-- ReclaimExpired: in-progress leases by expiry.
CREATE INDEX jobs_in_progress_expiry ON jobs (lease_expires_at) WHERE status = 'IN_PROGRESS';

CREATE TABLE artifacts (
    job_id       text NOT NULL REFERENCES jobs (id),
    generation   bigint NOT NULL,
    owner        text NOT NULL,
    name         text NOT NULL,
    key          text NOT NULL,
    size         bigint NOT NULL,
    sha256       text NOT NULL,
    content_type text NOT NULL,
    etag         text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (job_id, generation, name)
);

-- No foreign key to jobs: attempts on unknown jobs are recorded too.
CREATE TABLE write_events (
    id         bigserial PRIMARY KEY,
    job_id     text NOT NULL,
    verb       text NOT NULL,
    owner      text NOT NULL,
    generation bigint NOT NULL,
    accepted   boolean NOT NULL,
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX write_events_job ON write_events (job_id, id);
