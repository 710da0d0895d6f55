-- Effects in the world that must happen at most once (docs/effects.md):
-- the intents of effect steps with their receipts, and the coordinator's
-- transactional outbox, in one table keyed by the idempotency key. The
-- primary key is what makes a reservation unique: at most one row per key.
-- Times are UTC text from the database clock, like the other tables.

CREATE TABLE effects (
    key            TEXT PRIMARY KEY,
    kind           TEXT NOT NULL CHECK (kind IN ('step', 'outbox')),
    state          TEXT NOT NULL
                   CHECK (state IN ('reserved', 'done', 'in_doubt', 'retry', 'pending')),
    job_id         TEXT NOT NULL REFERENCES jobs (id),
    step           INTEGER NOT NULL DEFAULT 0,
    op             TEXT NOT NULL DEFAULT '',
    owner          TEXT NOT NULL,
    generation     INTEGER NOT NULL,
    attempt        TEXT NOT NULL DEFAULT '',
    receipt        TEXT,
    evidence       TEXT NOT NULL DEFAULT '[]',
    payload        TEXT,
    attempts       INTEGER NOT NULL DEFAULT 0,
    last_error     TEXT NOT NULL DEFAULT '',
    dispatch_after TEXT,
    reservations   INTEGER NOT NULL DEFAULT 1,
    resolution     TEXT NOT NULL DEFAULT '',
    note           TEXT NOT NULL DEFAULT '',
    created_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    updated_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    done_at        TEXT
) WITHOUT ROWID;

CREATE INDEX effects_job ON effects (job_id);

-- The dispatcher: pending outbox messages.
CREATE INDEX effects_outbox_due ON effects (created_at) WHERE state = 'pending';

-- The in-doubt sweep: intents still reserved.
CREATE INDEX effects_reserved ON effects (job_id, generation) WHERE state = 'reserved';
