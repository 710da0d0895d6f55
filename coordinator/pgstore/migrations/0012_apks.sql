-- APKs an operator stored for install_app steps (docs/api.md, APKs): the
-- file is the object apks/<sha256>.apk in the coordinator's bucket; this
-- row records what the operator declared of it. One row per SHA-256: the
-- same bytes are the same APK, and a second add keeps the first row.

CREATE TABLE apks (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sha256       text        NOT NULL UNIQUE,        -- lowercase hex
    size         bigint      NOT NULL,
    package      text        NOT NULL,
    version_code bigint      NOT NULL,
    version_name text        NOT NULL DEFAULT '',
    added_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    added_by     text        NOT NULL
);
