-- Signed releases of the agent binary, the update state agents report and
-- staged rollouts (docs/releases.md). A release's binary is the object
-- releases/<version>/<os>-<arch>/edgeagent[.exe] in the coordinator's
-- bucket; one row per version, OS and architecture.

CREATE TABLE releases (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version   text        NOT NULL,
    os        text        NOT NULL,
    arch      text        NOT NULL,
    size      bigint      NOT NULL,
    sha256    text        NOT NULL,
    signature text        NOT NULL,
    added_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    added_by  text        NOT NULL,
    UNIQUE (version, os, arch)
);

-- The update state each agent last reported in a hello or heartbeat.
CREATE TABLE agent_updates (
    agent_id    text        PRIMARY KEY,
    state       text        NOT NULL,
    target      text        NOT NULL DEFAULT '',
    outcome     text        NOT NULL DEFAULT '',
    at_ms       bigint      NOT NULL DEFAULT 0,
    rollout_id  text        NOT NULL DEFAULT '',
    reported_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- active is 1 while the rollout runs or is paused, NULL after: the unique
-- index lets one rollout at a time be active.
CREATE TABLE rollouts (
    id              text        PRIMARY KEY,
    version         text        NOT NULL,
    agents          text        NOT NULL DEFAULT '',
    steps           text        NOT NULL,
    max_failures    integer     NOT NULL DEFAULT 0,
    allow_downgrade boolean     NOT NULL DEFAULT false,
    timeout_ms      bigint      NOT NULL,
    state           text        NOT NULL,
    step            integer     NOT NULL DEFAULT 0,
    reason          text        NOT NULL DEFAULT '',
    failure_base    integer     NOT NULL DEFAULT 0,
    active          integer     UNIQUE,
    created_by      text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    seq             bigint GENERATED ALWAYS AS IDENTITY
);

-- The agents a rollout told to update, one row each: inserting it is the
-- claim that makes one coordinator send the order.
CREATE TABLE rollout_agents (
    rollout_id text        NOT NULL REFERENCES rollouts (id) ON DELETE CASCADE,
    agent_id   text        NOT NULL,
    step       integer     NOT NULL,
    state      text        NOT NULL,
    outcome    text        NOT NULL DEFAULT '',
    sent_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at   timestamptz,
    PRIMARY KEY (rollout_id, agent_id)
);
