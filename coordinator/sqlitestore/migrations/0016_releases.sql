-- Signed releases of the agent binary, the update state agents report and
-- staged rollouts (docs/releases.md). A release's binary is the object
-- releases/<version>/<os>-<arch>/edgeagent[.exe] in the coordinator's
-- bucket; one row per version, OS and architecture.

CREATE TABLE releases (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    version   TEXT    NOT NULL,
    os        TEXT    NOT NULL,
    arch      TEXT    NOT NULL,
    size      INTEGER NOT NULL,
    sha256    TEXT    NOT NULL,
    signature TEXT    NOT NULL,
    added_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    added_by  TEXT    NOT NULL,
    UNIQUE (version, os, arch)
);

-- The update state each agent last reported in a hello or heartbeat.
CREATE TABLE agent_updates (
    agent_id    TEXT    PRIMARY KEY,
    state       TEXT    NOT NULL,
    target      TEXT    NOT NULL DEFAULT '',
    outcome     TEXT    NOT NULL DEFAULT '',
    at_ms       INTEGER NOT NULL DEFAULT 0,
    rollout_id  TEXT    NOT NULL DEFAULT '',
    reported_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

-- active is 1 while the rollout runs or is paused, NULL after: the unique
-- index lets one rollout at a time be active.
CREATE TABLE rollouts (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    version         TEXT    NOT NULL,
    agents          TEXT    NOT NULL DEFAULT '',
    steps           TEXT    NOT NULL,
    max_failures    INTEGER NOT NULL DEFAULT 0,
    allow_downgrade INTEGER NOT NULL DEFAULT 0,
    timeout_ms      INTEGER NOT NULL,
    state           TEXT    NOT NULL,
    step            INTEGER NOT NULL DEFAULT 0,
    reason          TEXT    NOT NULL DEFAULT '',
    failure_base    INTEGER NOT NULL DEFAULT 0,
    active          INTEGER UNIQUE,
    created_by      TEXT    NOT NULL,
    created_at      TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    updated_at      TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

-- The agents a rollout told to update, one row each: inserting it is the
-- claim that makes one coordinator send the order.
CREATE TABLE rollout_agents (
    rollout_id TEXT    NOT NULL REFERENCES rollouts (id) ON DELETE CASCADE,
    agent_id   TEXT    NOT NULL,
    step       INTEGER NOT NULL,
    state      TEXT    NOT NULL,
    outcome    TEXT    NOT NULL DEFAULT '',
    sent_at    TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    ended_at   TEXT,
    PRIMARY KEY (rollout_id, agent_id)
);
