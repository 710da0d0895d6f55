-- The agent registry, the phone a job was granted for, and the detail of
-- write attempts (why a refusal happened, what a reclaim was for).

-- The phone (adb serial) the scheduler counted a job against when it granted
-- it; NULL for grants that chose no phone (management reassignment).
ALTER TABLE jobs ADD COLUMN device_serial TEXT;

-- One job per phone: an owner never holds two in-progress jobs on one phone.
CREATE UNIQUE INDEX jobs_one_per_phone ON jobs (worker_id, device_serial)
    WHERE status = 'IN_PROGRESS' AND device_serial IS NOT NULL;

-- Capacity checks and the release of a restarted agent's jobs.
CREATE INDEX jobs_in_progress_owner ON jobs (worker_id) WHERE status = 'IN_PROGRESS';

-- Free text about an attempt: 'forbidden: ...' for a 403, 'lease expired',
-- 'agent restarted', the reason of a cancel.
ALTER TABLE write_events ADD COLUMN detail TEXT NOT NULL DEFAULT '';

-- Presence of every agent. Times are the database clock as UTC text, like
-- the other tables.
CREATE TABLE agents (
    agent_id       TEXT PRIMARY KEY,
    boot_id        TEXT NOT NULL DEFAULT '',
    version        TEXT NOT NULL DEFAULT '',
    devices        TEXT NOT NULL DEFAULT '[]',
    capabilities   TEXT NOT NULL DEFAULT '[]',
    slots          INTEGER NOT NULL DEFAULT 1,
    draining       INTEGER NOT NULL DEFAULT 0 CHECK (draining IN (0, 1)),
    agent_draining INTEGER NOT NULL DEFAULT 0 CHECK (agent_draining IN (0, 1)),
    settings       TEXT NOT NULL DEFAULT '{}',
    coordinator_id TEXT NOT NULL DEFAULT '',
    connected_at   TEXT,
    last_seen      TEXT,
    created_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);
