-- The web dashboard (docs/ui.md): login sessions, stored as the SHA-256 of
-- the cookie's secret only, the actions taken on it with who took them, and
-- each phone's newest screenshot for its thumbnail.

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

-- The fleet page's thumbnails: the newest image artifact registered on each
-- phone, written in the transaction that registers the artifact, so the page
-- reads one row per phone instead of searching each phone's jobs.
CREATE TABLE phone_screens (
    agent_id     text        NOT NULL,       -- the agent part of the job's owner
    serial       text        NOT NULL,       -- the job's phone
    job_id       text        NOT NULL,
    project      text        NOT NULL,
    generation   bigint      NOT NULL,
    name         text        NOT NULL,
    content_type text        NOT NULL,
    created_at   timestamptz NOT NULL,       -- when the artifact was registered
    PRIMARY KEY (agent_id, serial)
);

-- The job lists of the API and the dashboard page newest first by seq: a
-- backward scan stops after a page instead of sorting every job of the
-- caller's projects.
CREATE INDEX jobs_seq ON jobs (seq);
