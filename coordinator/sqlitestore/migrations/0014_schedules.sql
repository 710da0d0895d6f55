-- Schedules (docs/schedules.md): a job template fired once per slot of a
-- cron expression in a time zone or of a fixed interval. The slot clock
-- is the database clock: a schedule is due when next_at is not after it.
-- schedule_slots keeps the outcome of every slot under the unique key
-- (schedule_id, scheduled_at): the transaction that fires a slot inserts
-- its row, its jobs and the schedule's next_at together, so coordinators
-- evaluating one schedule at once make at most one set of jobs per slot.

CREATE TABLE schedules (
    id          TEXT PRIMARY KEY,
    project     TEXT NOT NULL,
    spec        TEXT NOT NULL,                      -- the schedule file as accepted (JSON)
    created_by  TEXT NOT NULL,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    paused      INTEGER NOT NULL DEFAULT 0,
    next_at     TEXT,                               -- first slot not evaluated; NULL: ended
    buffered_at TEXT                                -- the slot overlap buffer_one holds
);

-- DueSchedules: the schedules whose next slot came, longest due first.
CREATE INDEX schedules_due ON schedules (next_at) WHERE NOT paused AND next_at IS NOT NULL;
CREATE INDEX schedules_buffered ON schedules (id) WHERE NOT paused AND buffered_at IS NOT NULL;

CREATE TABLE schedule_slots (
    schedule_id  TEXT NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    scheduled_at TEXT NOT NULL,
    outcome      TEXT NOT NULL
                 CHECK (outcome IN ('fired', 'missed', 'skipped', 'buffered', 'backfilled')),
    count        INTEGER NOT NULL DEFAULT 1,        -- > 1: a run of missed slots up to through
    through      TEXT,
    recorded_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    detail       TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (schedule_id, scheduled_at)         -- one outcome per slot
);

-- The jobs a schedule fired name it and their slot.
ALTER TABLE jobs ADD COLUMN schedule_id TEXT;
ALTER TABLE jobs ADD COLUMN scheduled_at TEXT;
CREATE INDEX jobs_schedule ON jobs (schedule_id, scheduled_at) WHERE schedule_id IS NOT NULL;
-- The overlap policies look for a schedule's queued and running jobs.
CREATE INDEX jobs_schedule_live ON jobs (schedule_id) WHERE schedule_id IS NOT NULL AND status IN ('QUEUED', 'IN_PROGRESS');
