-- Enrollment codes (docs/operations.md, "Add a PC"): only the SHA-256 of a
-- code is kept; a code is used once, binding the agent's NATS public key,
-- and expires on the database clock. Revoked agents (edgecoord agent
-- revoke) are refused, and their keys are the NATS account's revocations.

CREATE TABLE enrollments (
    code_hash  TEXT PRIMARY KEY,                     -- lowercase hex
    agent_id   TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    expires_at TEXT NOT NULL,
    used_at    TEXT,
    public_key TEXT
);
CREATE INDEX enrollments_agent ON enrollments (agent_id);

CREATE TABLE agent_revocations (
    agent_id   TEXT PRIMARY KEY,
    revoked_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);
