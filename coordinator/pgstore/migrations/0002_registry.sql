-- The agent registry, the phone a job was granted for, and the detail of
-- write attempts (why a refusal happened, what a reclaim was for).

-- The phone (adb serial) the scheduler counted a job against when it granted
-- it; NULL for grants that chose no phone (management reassignment).
ALTER TABLE jobs ADD COLUMN device_serial text;

-- One job per phone: an owner never holds two in-progress jobs on one phone,
-- whichever coordinator granted them.
CREATE UNIQUE INDEX jobs_one_per_phone ON jobs (worker_id, device_serial)
    WHERE status = 'IN_PROGRESS' AND device_serial IS NOT NULL;

-- Capacity checks and the release of a restarted agent's jobs.
CREATE INDEX jobs_in_progress_owner ON jobs (worker_id) WHERE status = 'IN_PROGRESS';

-- Free text about an attempt: 'forbidden: ...' for a 403, 'lease expired',
-- 'agent restarted', the reason of a cancel.
ALTER TABLE write_events ADD COLUMN detail text NOT NULL DEFAULT '';

-- Presence of every agent, kept in the database so that every coordinator
-- sharing it sees every agent whichever coordinator took its last hello or
-- heartbeat. Times are the database clock.
CREATE TABLE agents (
    agent_id       text PRIMARY KEY,
    boot_id        text NOT NULL DEFAULT '',  -- '' until the first hello
    version        text NOT NULL DEFAULT '',
    devices        jsonb NOT NULL DEFAULT '[]',
    capabilities   jsonb NOT NULL DEFAULT '[]',
    slots          integer NOT NULL DEFAULT 1,
    draining       boolean NOT NULL DEFAULT false,  -- operator: edgecoord agent drain
    agent_draining boolean NOT NULL DEFAULT false,  -- reported by the agent (drain, shutdown)
    settings       jsonb NOT NULL DEFAULT '{}',
    coordinator_id text NOT NULL DEFAULT '',
    connected_at   timestamptz,              -- hello of the current boot
    last_seen      timestamptz,              -- last hello or heartbeat
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
