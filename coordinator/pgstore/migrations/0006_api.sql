-- The HTTP API (docs/api.md): tokens stored as their SHA-256 only, the
-- submits made with an Idempotency-Key, and the requests refused because
-- the job named belongs to another project.

CREATE TABLE api_tokens (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text        NOT NULL UNIQUE,
    hash         bytea       NOT NULL UNIQUE,        -- SHA-256 of the secret
    projects     text        NOT NULL,               -- comma-separated
    scopes       text        NOT NULL,               -- comma-separated
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    revoked_at   timestamptz,
    last_used_at timestamptz
);

CREATE TABLE api_idempotency (
    token_id     bigint      NOT NULL REFERENCES api_tokens (id),
    key          text        NOT NULL,
    request_hash text        NOT NULL,               -- SHA-256 of the request body, hex
    reply        jsonb       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (token_id, key)
);

CREATE TABLE api_denials (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_name text        NOT NULL,
    method     text        NOT NULL,
    route      text        NOT NULL,
    job_id     text        NOT NULL,
    project    text        NOT NULL,
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The job list of the API pages newest first by insertion order.
CREATE INDEX jobs_project_seq ON jobs (project, seq);
