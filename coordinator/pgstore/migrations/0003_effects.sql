-- Effects in the world that must happen at most once (docs/effects.md):
-- the intents of effect steps with their receipts, and the coordinator's
-- transactional outbox, in one table keyed by the idempotency key. The
-- primary key is what makes a reservation unique: at most one row per key.

CREATE TABLE effects (
    key            text PRIMARY KEY,
    kind           text NOT NULL CHECK (kind IN ('step', 'outbox')),
    state          text NOT NULL
                   CHECK (state IN ('reserved', 'done', 'in_doubt', 'retry', 'pending')),
    job_id         text NOT NULL REFERENCES jobs (id),
    step           integer NOT NULL DEFAULT 0,      -- 1-based step number (steps)
    op             text NOT NULL DEFAULT '',
    owner          text NOT NULL,                   -- the token that reserved it / whose result it publishes
    generation     bigint NOT NULL,
    attempt        text NOT NULL DEFAULT '',        -- the run of that token on its agent (steps)
    receipt        jsonb,                           -- the step's receipt, or the receiver's reply
    evidence       jsonb NOT NULL DEFAULT '[]',     -- artifact keys recorded while in doubt
    payload        jsonb,                           -- the message (outbox)
    attempts       integer NOT NULL DEFAULT 0,      -- deliveries tried (outbox)
    last_error     text NOT NULL DEFAULT '',
    dispatch_after timestamptz,                     -- not delivered before (outbox); NULL: at once
    reservations   integer NOT NULL DEFAULT 1,      -- 1, +1 per reservation after a person's retry
    resolution     text NOT NULL DEFAULT '',        -- a person's decision: done or retry
    note           text NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    done_at        timestamptz
);

CREATE INDEX effects_job ON effects (job_id);

-- The dispatcher: pending outbox messages by due time.
CREATE INDEX effects_outbox_due ON effects (created_at) WHERE state = 'pending';

-- The in-doubt sweep: intents still reserved.
CREATE INDEX effects_reserved ON effects (job_id, generation) WHERE state = 'reserved';
