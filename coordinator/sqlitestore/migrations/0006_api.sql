-- The HTTP API (docs/api.md): tokens stored as their SHA-256 only, the
-- submits made with an Idempotency-Key, and the requests refused because
-- the job named belongs to another project.

CREATE TABLE api_tokens (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT NOT NULL UNIQUE,
    hash         BLOB NOT NULL UNIQUE,               -- SHA-256 of the secret
    projects     TEXT NOT NULL,                      -- comma-separated
    scopes       TEXT NOT NULL,                      -- comma-separated
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    revoked_at   TEXT,
    last_used_at TEXT
);

CREATE TABLE api_idempotency (
    token_id     INTEGER NOT NULL REFERENCES api_tokens (id),
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,                      -- SHA-256 of the request body, hex
    reply        TEXT NOT NULL,
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    PRIMARY KEY (token_id, key)
);

CREATE TABLE api_denials (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    token_name TEXT NOT NULL,
    method     TEXT NOT NULL,
    route      TEXT NOT NULL,
    job_id     TEXT NOT NULL,
    project    TEXT NOT NULL,
    at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

-- The job list of the API pages newest first by insertion order (rowid).
CREATE INDEX jobs_project ON jobs (project);
