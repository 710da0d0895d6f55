-- APKs an operator stored for install_app steps (docs/api.md, APKs): the
-- file is the object apks/<sha256>.apk in the coordinator's bucket; this
-- row records what the operator declared of it. One row per SHA-256: the
-- same bytes are the same APK, and a second add keeps the first row.

CREATE TABLE apks (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    sha256       TEXT    NOT NULL UNIQUE,            -- lowercase hex
    size         INTEGER NOT NULL,
    package      TEXT    NOT NULL,
    version_code INTEGER NOT NULL,
    version_name TEXT    NOT NULL DEFAULT '',
    added_at     TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    added_by     TEXT    NOT NULL
);
