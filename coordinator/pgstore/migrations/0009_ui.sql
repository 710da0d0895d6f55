-- The web dashboard (docs/ui.md): login sessions, stored as the SHA-256 of
-- the cookie's secret only, the actions taken on it with who took them, and
-- the index of a phone's recent jobs for its screenshot thumbnail.

CREATE TABLE ui_sessions (
    hash       bytea       PRIMARY KEY,              -- SHA-256 of the cookie's secret
    token_id   bigint      NOT NULL REFERENCES api_tokens (id),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at timestamptz NOT NULL
);

CREATE INDEX ui_sessions_expiry ON ui_sessions (expires_at);

CREATE TABLE ui_actions (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_name text        NOT NULL,
    action     text        NOT NULL,
    target     text        NOT NULL,
    job_id     text        NOT NULL DEFAULT '',
    detail     text        NOT NULL DEFAULT '',
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX ui_actions_target ON ui_actions (target, id);
CREATE INDEX ui_actions_job ON ui_actions (job_id, id) WHERE job_id <> '';

-- The fleet page's thumbnails: a phone's jobs, most recently updated first.
CREATE INDEX jobs_phone_recent ON jobs (device_serial, updated_at)
    WHERE device_serial IS NOT NULL;
