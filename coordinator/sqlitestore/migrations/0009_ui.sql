-- The web dashboard (docs/ui.md): login sessions, stored as the SHA-256 of
-- the cookie's secret only, the actions taken on it with who took them, and
-- the index of a phone's recent jobs for its screenshot thumbnail.

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

-- The fleet page's thumbnails: a phone's jobs, most recently updated first.
CREATE INDEX jobs_phone_recent ON jobs (device_serial, updated_at)
    WHERE device_serial IS NOT NULL;
