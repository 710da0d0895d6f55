-- Enrollment codes (docs/operations.md, "Add a PC"): only the SHA-256 of a
-- code is kept; a code is used once, binding the agent's NATS public key,
-- and expires on the database clock. Revoked agents (edgecoord agent
-- revoke) are refused, and their keys are the NATS account's revocations.

CREATE TABLE enrollments (
    code_hash  text        PRIMARY KEY,              -- lowercase hex
    agent_id   text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    public_key text
);
CREATE INDEX enrollments_agent ON enrollments (agent_id);

CREATE TABLE agent_revocations (
    agent_id   text        PRIMARY KEY,
    revoked_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
