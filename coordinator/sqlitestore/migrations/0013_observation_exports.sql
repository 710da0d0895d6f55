-- The periodic export of the dataset into the bucket (docs/dataset.md,
-- "Exports in the bucket"): one row per partition, a project and a UTC day
-- of accepted_at ('YYYY-MM-DD'), claimed by one coordinator at a time.
-- A claim lasts until claim_expires_at on the database clock (UTC text
-- like every other time); an unfinished partition whose claim expired is
-- taken over with attempt + 1. finished_at is set once the manifest is in
-- the bucket, with what the manifest lists; a finished partition is never
-- claimed again.

CREATE TABLE observation_exports (
    project          TEXT    NOT NULL,
    day              TEXT    NOT NULL,             -- 'YYYY-MM-DD', UTC
    owner            TEXT    NOT NULL,             -- the coordinator of the current claim
    attempt          INTEGER NOT NULL,
    claimed_at       TEXT    NOT NULL,
    claim_expires_at TEXT    NOT NULL,
    finished_at      TEXT,                         -- NULL while unfinished
    file_count       INTEGER NOT NULL DEFAULT 0,
    row_count        INTEGER NOT NULL DEFAULT 0,
    byte_count       INTEGER NOT NULL DEFAULT 0,
    first_id         INTEGER NOT NULL DEFAULT 0,
    last_id          INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (project, day)
);

-- The partitions a crashed writer left, retried once their claims expire.
CREATE INDEX observation_exports_unfinished ON observation_exports (project, day) WHERE finished_at IS NULL;
