-- Observations (docs/dataset.md): the values the extract steps of a job
-- read off the phone's screen, written by the transaction that accepts or
-- refuses the result that carries them. A refused result's rows are kept
-- with accepted = false and never listed unless asked for
-- (generations=all). Every row names the write_events row of its attempt.
-- accepted_at is that write event's time: the database clock. observed_at
-- is the PC's clock, as the agent sent it.

CREATE TABLE observations (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project          text        NOT NULL,
    job_id           text        NOT NULL REFERENCES jobs (id),
    generation       bigint      NOT NULL,
    owner            text        NOT NULL,
    position         integer     NOT NULL,          -- index in the result
    agent_id         text        NOT NULL,
    phone_serial     text        NOT NULL DEFAULT '',
    phone_model      text        NOT NULL DEFAULT '',
    phone_sdk        bigint      NOT NULL DEFAULT 0,
    step             integer     NOT NULL,
    name             text        NOT NULL,
    raw              text        NOT NULL,
    value            text        NOT NULL,
    parse            text        NOT NULL DEFAULT '',
    currency         text        NOT NULL DEFAULT '',
    tax              text        NOT NULL DEFAULT '',
    bounds           text        NOT NULL,          -- '[l,t,r,b]'
    selector         text        NOT NULL DEFAULT '',
    app_package      text        NOT NULL DEFAULT '',
    app_version      text        NOT NULL DEFAULT '',
    app_version_code bigint      NOT NULL DEFAULT 0,
    locale           text        NOT NULL DEFAULT '',
    time_zone        text        NOT NULL DEFAULT '',
    observed_at      timestamptz,                   -- the PC's clock; NULL unknown
    accepted_at      timestamptz NOT NULL,          -- the database clock
    evidence         jsonb       NOT NULL DEFAULT '[]',
    accepted         boolean     NOT NULL,
    write_event_id   bigint      NOT NULL REFERENCES write_events (id),
    -- One row per token and position: a result sent again adds none.
    UNIQUE (job_id, generation, owner, position)
);

-- The dataset of a project by id (the cursor), accepted rows only or all.
CREATE INDEX observations_project ON observations (project, id);
CREATE INDEX observations_project_accepted ON observations (project, id) WHERE accepted;
-- since and until: the rows accepted in a window of the database clock.
CREATE INDEX observations_project_time ON observations (project, accepted_at);
-- The refused rows a job keeps are counted against their bound.
CREATE INDEX observations_refused_job ON observations (job_id) WHERE NOT accepted;
