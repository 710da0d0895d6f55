-- The web dashboard (docs/ui.md): login sessions, stored as the SHA-256 of
-- the cookie's secret only, the actions taken on it with who took them, and
-- each phone's newest screenshot for its thumbnail.

CREATE TABLE ui_sessions (
    hash       BLOB    PRIMARY KEY,                  -- SHA-256 of the cookie's secret
    token_id   INTEGER NOT NULL REFERENCES api_tokens (id),
    created_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    expires_at TEXT    NOT NULL
);

CREATE INDEX ui_sessions_expiry ON ui_sessions (expires_at);

CREATE TABLE ui_actions (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    token_name TEXT NOT NULL,
    action     TEXT NOT NULL,
    target     TEXT NOT NULL,
    job_id     TEXT NOT NULL DEFAULT '',
    detail     TEXT NOT NULL DEFAULT '',
    at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

CREATE INDEX ui_actions_target ON ui_actions (target, id);
CREATE INDEX ui_actions_job ON ui_actions (job_id, id) WHERE job_id <> '';

-- The fleet page's thumbnails: the newest image artifact registered on each
-- phone, written in the transaction that registers the artifact, so the page
-- reads one row per phone instead of searching each phone's jobs.
CREATE TABLE phone_screens (
    agent_id     TEXT    NOT NULL,           -- the agent part of the job's owner
    serial       TEXT    NOT NULL,           -- the job's phone
    job_id       TEXT    NOT NULL,
    project      TEXT    NOT NULL,
    generation   INTEGER NOT NULL,
    name         TEXT    NOT NULL,
    content_type TEXT    NOT NULL,
    created_at   TEXT    NOT NULL,           -- when the artifact was registered
    PRIMARY KEY (agent_id, serial)
) WITHOUT ROWID;
