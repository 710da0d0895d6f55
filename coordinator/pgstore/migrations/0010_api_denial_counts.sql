-- Refused API requests are counted, not listed: one row per token, kind
-- (job: another project's job; project: the jobs of a project the token
-- lacks) and minute, with the number of refusals in it and the last one's
-- method, path, job and project, so that refusals a token holder makes at
-- will cannot fill the disk (docs/security.md, "Refused requests"). The
-- rows recorded so far are counted the same way.

CREATE TABLE api_denial_counts (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_name   text        NOT NULL,
    kind         text        NOT NULL,
    window_start timestamptz NOT NULL,
    count        bigint      NOT NULL,
    method       text        NOT NULL,
    route        text        NOT NULL,
    job_id       text        NOT NULL,
    project      text        NOT NULL,
    at           timestamptz NOT NULL,                -- the last refusal
    UNIQUE (token_name, kind, window_start)
);

INSERT INTO api_denial_counts (token_name, kind, window_start, count, method, route, job_id, project, at)
SELECT DISTINCT ON (token_name, kind, w)
       token_name, kind, w, count(*) OVER (PARTITION BY token_name, kind, w),
       method, route, job_id, project, at
FROM (SELECT *, CASE WHEN job_id = '' THEN 'project' ELSE 'job' END AS kind, date_trunc('minute', at) AS w
      FROM api_denials) d
ORDER BY token_name, kind, w, id DESC;

DROP TABLE api_denials;
ALTER TABLE api_denial_counts RENAME TO api_denials;

-- Agent requests refused before any fenced statement (a token of another
-- agent, 403) are counted the same way: one row per agent, verb and
-- minute, keeping the last one's token and detail.
CREATE TABLE agent_refusals (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent_id     text NOT NULL,
    verb         text NOT NULL,
    window_start timestamptz NOT NULL,
    count        bigint NOT NULL,
    job_id       text NOT NULL,
    owner        text NOT NULL,
    generation   bigint NOT NULL,
    detail       text NOT NULL,
    at           timestamptz NOT NULL,
    UNIQUE (agent_id, verb, window_start)
);
