-- Observations (docs/dataset.md): the values the extract steps of a job
-- read off the phone's screen, written by the transaction that accepts or
-- refuses the result that carries them. A refused result's rows are kept
-- with accepted = 0 and never listed unless asked for (generations=all).
-- Every row names the write_events row of its attempt. accepted_at is that
-- write event's time: the database clock, UTC text like every other time.
-- observed_at is the PC's clock, as the agent sent it, UTC text with
-- microseconds.

CREATE TABLE observations (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    project          TEXT    NOT NULL,
    job_id           TEXT    NOT NULL REFERENCES jobs (id),
    generation       INTEGER NOT NULL,
    owner            TEXT    NOT NULL,
    position         INTEGER NOT NULL,          -- index in the result
    agent_id         TEXT    NOT NULL,
    phone_serial     TEXT    NOT NULL DEFAULT '',
    phone_model      TEXT    NOT NULL DEFAULT '',
    phone_sdk        INTEGER NOT NULL DEFAULT 0,
    step             INTEGER NOT NULL,
    name             TEXT    NOT NULL,
    raw              TEXT    NOT NULL,
    value            TEXT    NOT NULL,
    parse            TEXT    NOT NULL DEFAULT '',
    currency         TEXT    NOT NULL DEFAULT '',
    tax              TEXT    NOT NULL DEFAULT '',
    bounds           TEXT    NOT NULL,          -- '[l,t,r,b]'
    selector         TEXT    NOT NULL DEFAULT '',
    app_package      TEXT    NOT NULL DEFAULT '',
    app_version      TEXT    NOT NULL DEFAULT '',
    app_version_code INTEGER NOT NULL DEFAULT 0,
    locale           TEXT    NOT NULL DEFAULT '',
    time_zone        TEXT    NOT NULL DEFAULT '',
    observed_at      TEXT,                      -- the PC's clock; NULL unknown
    accepted_at      TEXT    NOT NULL,          -- the database clock
    evidence         TEXT    NOT NULL DEFAULT '[]',
    accepted         INTEGER NOT NULL CHECK (accepted IN (0, 1)),
    write_event_id   INTEGER NOT NULL REFERENCES write_events (id),
    -- One row per token and position: a result sent again adds none.
    UNIQUE (job_id, generation, owner, position)
);

-- The dataset of a project by id (the cursor), accepted rows only or all.
CREATE INDEX observations_project ON observations (project, id);
CREATE INDEX observations_project_accepted ON observations (project, id) WHERE accepted = 1;
-- since and until: the rows accepted in a window of the database clock.
CREATE INDEX observations_project_time ON observations (project, accepted_at);
-- The refused rows a job keeps are counted against their bound.
CREATE INDEX observations_refused_job ON observations (job_id) WHERE accepted = 0;
