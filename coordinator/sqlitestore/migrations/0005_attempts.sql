-- Attempts, retries and deadlines (docs/operations.md, "Deadlines,
-- attempts and end states"): why each attempt of a job ended, and the class
-- and cause of every write event that ends an attempt.

-- One object per attempt that ended without a result, oldest first:
-- {"generation": n, "class": "...", "cause": "...", "reason": "..."}.
ALTER TABLE jobs ADD COLUMN attempt_ends TEXT NOT NULL DEFAULT '[]';

ALTER TABLE write_events ADD COLUMN class TEXT NOT NULL DEFAULT '';
ALTER TABLE write_events ADD COLUMN cause TEXT NOT NULL DEFAULT '';

-- Existing reclaims were infrastructure failures.
UPDATE write_events SET class = 'infrastructure', cause = 'lease_expired'
 WHERE verb = 'reclaim' AND detail = 'lease expired';
UPDATE write_events SET class = 'infrastructure', cause = 'agent_restarted'
 WHERE verb = 'reclaim' AND detail = 'agent restarted';

-- A live job that used its attempts before they were limited gets one
-- more, so it is not left queued for ever.
UPDATE jobs SET max_attempts = attempts + 1
 WHERE status IN ('QUEUED', 'IN_PROGRESS') AND attempts >= max_attempts;

-- ExpireDeadlines: live jobs by deadline.
CREATE INDEX jobs_live_deadline ON jobs (deadline_at)
    WHERE status IN ('QUEUED', 'IN_PROGRESS') AND deadline_at IS NOT NULL;
