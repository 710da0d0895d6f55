-- Refused API requests are counted, not listed: one row per token, kind
-- (job: another project's job; project: the jobs of a project the token
-- lacks) and minute, with the number of refusals in it and the last one's
-- method, path, job and project, so that refusals a token holder makes at
-- will cannot fill the disk (docs/security.md, "Refused requests"). The
-- rows recorded so far are counted the same way.

CREATE TABLE api_denial_counts (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    token_name   TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    window_start TEXT    NOT NULL,
    count        INTEGER NOT NULL,
    method       TEXT    NOT NULL,
    route        TEXT    NOT NULL,
    job_id       TEXT    NOT NULL,
    project      TEXT    NOT NULL,
    at           TEXT    NOT NULL,                    -- the last refusal
    UNIQUE (token_name, kind, window_start)
);

-- The last refusal of each window names the row's request.
INSERT INTO api_denial_counts (token_name, kind, window_start, count, method, route, job_id, project, at)
SELECT token_name, kind, w, n, method, route, job_id, project, at
FROM (SELECT d.*,
             row_number() OVER (PARTITION BY token_name, kind, w ORDER BY id DESC) AS rn,
             count(*) OVER (PARTITION BY token_name, kind, w) AS n
      FROM (SELECT *, CASE WHEN job_id = '' THEN 'project' ELSE 'job' END AS kind, substr(at, 1, 16) || ':00.000' AS w
            FROM api_denials) d)
WHERE rn = 1
ORDER BY id;

DROP TABLE api_denials;
ALTER TABLE api_denial_counts RENAME TO api_denials;

-- Agent requests refused before any fenced statement (a token of another
-- agent, 403) are counted the same way: one row per agent, verb and
-- minute, keeping the last one's token and detail.
CREATE TABLE agent_refusals (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id     TEXT NOT NULL,
    verb         TEXT NOT NULL,
    window_start TEXT NOT NULL,
    count        INTEGER NOT NULL,
    job_id       TEXT NOT NULL,
    owner        TEXT NOT NULL,
    generation   INTEGER NOT NULL,
    detail       TEXT NOT NULL,
    at           TEXT NOT NULL,
    UNIQUE (agent_id, verb, window_start)
);
