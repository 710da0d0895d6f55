package pgstore

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrationLockKey is the advisory lock held while migrating ("edgemig").
const migrationLockKey int64 = 0x656467656d6967

// Store is a jobstore.Store on PostgreSQL.
type Store struct {
	pool    *pgxpool.Pool
	commits *commitGroup   // batches of CommitManifest (fastpath.go)
	retry   jobstore.Retry // backoff of retried attempts (attempts.go)
	// Releases keeps releases and rollouts (releases.go).
	*sqlstore.Releases[time.Time]
}

var (
	_ jobstore.Store = (*Store)(nil)
	_ sqlstore.Lab   = (*Store)(nil)
)

// Open connects to the database at dsn (a libpq URL or key=value string),
// applies pending migrations and returns the store. Close releases it. Pool
// settings such as pool_max_conns (default: the larger of 4 and the number
// of CPUs) can be given in the dsn.
//
// Task and result documents are stored as jsonb: Get returns the same JSON
// value that was written, normalised (key order and spacing may differ).
func Open(ctx context.Context, dsn string) (*Store, error) {
	return open(ctx, dsn, true)
}

// OpenExisting connects to the database at dsn without migrating it: it
// fails with an error wrapping jobstore.ErrSchemaOutdated when the schema
// is behind this binary (an empty database included), and with another error
// when the schema is ahead of it. It writes nothing.
func OpenExisting(ctx context.Context, dsn string) (*Store, error) {
	return open(ctx, dsn, false)
}

// open connects to the store at dsn, and migrates its schema or checks it.
func open(ctx context.Context, dsn string, migrate bool) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	s := &Store{pool: pool}
	s.Releases = s.newReleases()
	s.commits = &commitGroup{s: s}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	check := s.checkSchema
	if migrate {
		check = s.migrate
	}
	if err := check(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	return s, nil
}

// Close releases the connection pool.
func (s *Store) Close() error {
	s.commits.wait()
	s.pool.Close()
	return nil
}

func (s *Store) migrate(ctx context.Context) error {
	all, err := sqlstore.Migrations(migrationFS, "migrations")
	if err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit this is a no-op
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey); err != nil {
		return fmt.Errorf("migrate schema: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    bigint PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
	)`); err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	applied, err := appliedVersions(ctx, tx)
	if err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	pending, err := sqlstore.Pending(all, applied)
	if err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	for _, m := range pending {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate schema to %d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return fmt.Errorf("migrate schema to %d_%s: %w", m.Version, m.Name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	return nil
}

// querier is a connection pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// appliedVersions reads the applied migrations; none when the database has
// no schema_migrations table.
func appliedVersions(ctx context.Context, q querier) (map[int64]bool, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, err
	}
	applied := map[int64]bool{}
	if !exists {
		return applied, nil
	}
	rows, err := q.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, err
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	for _, v := range versions {
		applied[v] = true
	}
	return applied, nil
}

// checkSchema fails unless the schema is the one this binary migrates to;
// it writes nothing.
func (s *Store) checkSchema(ctx context.Context) error {
	applied, err := appliedVersions(ctx, s.pool)
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	return sqlstore.CheckSchema(migrationFS, "migrations", applied)
}

// SchemaVersion returns the highest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	return sqlstore.Int(s.pool.QueryRow(ctx, `SELECT COALESCE(max(version), 0) FROM schema_migrations`), "read schema version")
}

const jobColumns = sqlstore.JobColumns

// times decodes PostgreSQL's timestamptz columns (sqlstore.Times).
var times = sqlstore.Times[time.Time](func(t time.Time) (time.Time, error) { return t.UTC(), nil })

func scanJob(row sqlstore.Row) (jobstore.Job, error) { return sqlstore.ScanJob(row, times) }

func scanWriteEvent(row sqlstore.Row) (jobstore.WriteEvent, error) {
	return sqlstore.ScanWriteEvent(row, times)
}

func scanArtifact(row sqlstore.Row) (jobstore.ArtifactRecord, error) {
	return sqlstore.ScanArtifact(row, times)
}

// micros is a ttl as whole microseconds, the resolution of timestamptz.
func micros(d time.Duration) int64 { return d.Microseconds() }

// nullJSON maps an empty document to SQL NULL.
func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

// Submit inserts a queued job at generation 0.
func (s *Store) Submit(ctx context.Context, spec jobstore.JobSpec) (jobstore.Job, error) {
	id, task, err := sqlstore.PrepareSubmit(spec)
	if err != nil {
		return jobstore.Job{}, err
	}
	p := jobstore.Policy(spec)
	var notBefore any
	if !spec.NotBefore.IsZero() {
		notBefore = spec.NotBefore
	}
	j, err := scanJob(s.pool.QueryRow(ctx, `
		WITH ins AS (
			INSERT INTO jobs (id, status, task, project, priority, not_before, max_attempts, submitted_by)
			VALUES ($1, 'QUEUED', $2, $3, $4, $5, $6, $7)
			ON CONFLICT (id) DO NOTHING
			RETURNING `+jobColumns+`
		), ev AS (`+submitEventSQL+`)
		SELECT `+jobColumns+` FROM ins`, id, task, p.Project, p.Priority, notBefore, p.MaxAttempts, p.SubmittedBy))
	if errors.Is(err, pgx.ErrNoRows) {
		return jobstore.Job{}, fmt.Errorf("submit job %s: id in use: %w", id, jobstore.ErrConflict)
	}
	if err != nil {
		return jobstore.Job{}, fmt.Errorf("submit job %s: %w", id, err)
	}
	return j, nil
}

// Get returns a job, or ErrNotFound.
func (s *Store) Get(ctx context.Context, jobID string) (jobstore.Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1`, jobID))
	return sqlstore.Found(j, err, jobstore.ErrNotFound, "get job %s", jobID)
}

// exists reports whether a job exists. It is used only to classify a fenced
// write that matched no row; the write itself never depends on it.
func (s *Store) exists(ctx context.Context, jobID string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1)`, jobID).Scan(&ok)
	return ok, err
}

// refused classifies a fenced write that matched no row: fencing.ErrStale
// when the job exists, jobstore.ErrNotFound when it does not. what names
// the write in the error ("commit", "renew").
func (s *Store) refused(ctx context.Context, what string, tok fencing.Token) error {
	ok, err := s.exists(ctx, tok.JobID)
	switch {
	case err != nil:
		return fmt.Errorf("%s %s: %w: %w", what, tok, fencing.ErrStale, err)
	case ok:
		return fmt.Errorf("%s %s: %w", what, tok, fencing.ErrStale)
	default:
		return fmt.Errorf("%s %s: %w", what, tok, jobstore.ErrNotFound)
	}
}

// grantSQL raises the generation of one job in an allowed status and grants
// it to $2 until clock_timestamp() + $3 µs, recording the attempt.
func grantSQL(verb, statusCond string) string {
	return `
	WITH upd AS (
		UPDATE jobs j
		SET status = 'IN_PROGRESS',
		    lease_generation = lease_generation + 1,
		    worker_id = $2,
		    device_serial = NULL,
		    lease_expires_at = clock_timestamp() + $3::bigint * interval '1 microsecond',` + grantCounts + `,
		    updated_at = clock_timestamp()
		WHERE id = $1 AND ` + statusCond + `
		RETURNING lease_generation, lease_expires_at, task, deadline_at
	), ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted)
		SELECT $1, '` + verb + `', $2,
		       COALESCE((SELECT lease_generation FROM upd),
		                (SELECT lease_generation FROM jobs WHERE id = $1), 0),
		       EXISTS (SELECT 1 FROM upd)
	)
	SELECT lease_generation, lease_expires_at, task, deadline_at FROM upd`
}

var (
	claimSQL    = grantSQL(jobstore.VerbClaim, `status = 'QUEUED'`)
	reassignSQL = grantSQL(jobstore.VerbReassign, `status IN ('QUEUED', 'IN_PROGRESS')`)
)

func (s *Store) grant(ctx context.Context, verb, query, jobID, owner string, ttl time.Duration) (jobstore.Lease, error) {
	if err := sqlstore.CheckGrant(owner, ttl); err != nil {
		return jobstore.Lease{}, fmt.Errorf("%s job %s: %w", verb, jobID, err)
	}
	l, err := sqlstore.ScanLease(s.pool.QueryRow(ctx, query, jobID, owner, micros(ttl)), times, jobID, owner)
	if errors.Is(err, pgx.ErrNoRows) {
		ok, err := s.exists(ctx, jobID)
		switch {
		case err != nil:
			return jobstore.Lease{}, fmt.Errorf("%s job %s: %w", verb, jobID, err)
		case ok:
			return jobstore.Lease{}, fmt.Errorf("%s job %s: %w", verb, jobID, jobstore.ErrConflict)
		default:
			return jobstore.Lease{}, fmt.Errorf("%s job %s: %w", verb, jobID, jobstore.ErrNotFound)
		}
	}
	if err != nil {
		return jobstore.Lease{}, fmt.Errorf("%s job %s: %w", verb, jobID, err)
	}
	return l, nil
}

func finishLease(l jobstore.Lease, jobID, owner string, task []byte, deadline *time.Time) (jobstore.Lease, error) {
	l.Token.JobID = jobID
	l.Token.Owner = owner
	l.ExpiresAt = l.ExpiresAt.UTC()
	if deadline != nil {
		l.DeadlineAt = deadline.UTC()
	}
	if err := json.Unmarshal(task, &l.Task); err != nil {
		return jobstore.Lease{}, fmt.Errorf("decode task of job %s: %w", jobID, err)
	}
	return l, nil
}

// Claim grants the given queued job to owner (generation + 1).
func (s *Store) Claim(ctx context.Context, jobID, owner string, ttl time.Duration) (jobstore.Lease, error) {
	return s.grant(ctx, jobstore.VerbClaim, claimSQL, jobID, owner, ttl)
}

// Reassign grants a queued or in-progress job to newOwner (generation + 1).
func (s *Store) Reassign(ctx context.Context, jobID, newOwner string, ttl time.Duration) (jobstore.Lease, error) {
	return s.grant(ctx, jobstore.VerbReassign, reassignSQL, jobID, newOwner, ttl)
}

var claimNextSQL = `
	WITH pick AS (
		SELECT id FROM jobs
		WHERE status = 'QUEUED'
		ORDER BY created_at, seq
		LIMIT 1
		FOR UPDATE SKIP LOCKED
	), upd AS (
		UPDATE jobs j
		SET status = 'IN_PROGRESS',
		    lease_generation = j.lease_generation + 1,
		    worker_id = $1,
		    device_serial = NULL,
		    lease_expires_at = clock_timestamp() + $2::bigint * interval '1 microsecond',` + grantCounts + `,
		    updated_at = clock_timestamp()
		FROM pick
		WHERE j.id = pick.id AND j.status = 'QUEUED'
		RETURNING j.id, j.lease_generation, j.lease_expires_at, j.task, j.deadline_at
	), ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted)
		SELECT id, '` + jobstore.VerbClaim + `', $1, lease_generation, true FROM upd
	)
	SELECT id, lease_generation, lease_expires_at, task, deadline_at FROM upd`

// ClaimNext grants the oldest queued job to owner (generation + 1), skipping
// jobs another coordinator is claiming at the same moment.
func (s *Store) ClaimNext(ctx context.Context, owner string, ttl time.Duration) (jobstore.Lease, error) {
	if err := sqlstore.CheckGrant(owner, ttl); err != nil {
		return jobstore.Lease{}, fmt.Errorf("claim next job: %w", err)
	}
	var jobID string
	l, err := sqlstore.ScanLease(s.pool.QueryRow(ctx, claimNextSQL, owner, micros(ttl)), times, "", owner, &jobID)
	if err != nil {
		return jobstore.Lease{}, sqlstore.RowErr(err, jobstore.ErrNoJob, "claim next job")
	}
	l.Token.JobID = jobID
	return l, nil
}

const renewSQL = `
	WITH upd AS (
		UPDATE jobs
		SET lease_expires_at = clock_timestamp() + $4::bigint * interval '1 microsecond',
		    updated_at = clock_timestamp()
		WHERE id = $1 AND lease_generation = $2 AND worker_id = $3 AND status = 'IN_PROGRESS'
		  AND lease_expires_at > clock_timestamp()
		RETURNING lease_expires_at
	), ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted)
		SELECT $1, '` + jobstore.VerbRenew + `', $3, $2, EXISTS (SELECT 1 FROM upd)
	)
	SELECT lease_expires_at FROM upd`

// Renew extends a current, unexpired lease; it never changes generation.
func (s *Store) Renew(ctx context.Context, tok fencing.Token, ttl time.Duration) (time.Time, error) {
	if err := sqlstore.CheckTTL(ttl); err != nil {
		return time.Time{}, fmt.Errorf("renew %s: %w", tok, err)
	}
	var exp time.Time
	err := s.pool.QueryRow(ctx, renewSQL, tok.JobID, tok.Generation, tok.Owner, micros(ttl)).Scan(&exp)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, s.refused(ctx, "renew", tok)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("renew %s: %w", tok, err)
	}
	return exp.UTC(), nil
}

// commitSQL is the fenced result write of docs/design.md ("Token rules",
// rule 2), with the attempt recorded by the same statement.
const commitSQL = `
	WITH ` + commitUpdCTE + `, ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted)
		SELECT $1, '` + jobstore.VerbResult + `', $3, $2, EXISTS (SELECT 1 FROM upd)
	)
	SELECT EXISTS (SELECT 1 FROM upd)`

// commitUpdCTE is the fence of every result write: the job is SUCCEEDED
// only when $1's current generation is $2, held by $3, IN_PROGRESS; $4 is
// the result. The statements that use it name it upd.
const commitUpdCTE = `upd AS (
		UPDATE jobs
		SET status = 'SUCCEEDED', result = $4, completed_by = $3, updated_at = clock_timestamp()
		WHERE id = $1 AND lease_generation = $2 AND worker_id = $3 AND status = 'IN_PROGRESS'
		RETURNING id
	)`

// Commit accepts a result for the current token: status SUCCEEDED.
func (s *Store) Commit(ctx context.Context, tok fencing.Token, result json.RawMessage) error {
	if err := sqlstore.CheckResult(result); err != nil {
		return fmt.Errorf("commit %s: %w", tok, err)
	}
	var ok bool
	if err := s.pool.QueryRow(ctx, commitSQL, tok.JobID, tok.Generation, tok.Owner, nullJSON(result)).Scan(&ok); err != nil {
		return fmt.Errorf("commit %s: %w", tok, err)
	}
	if !ok {
		return s.refused(ctx, "commit", tok)
	}
	return nil
}

const unfencedCommitSQL = `
	WITH upd AS (
		UPDATE jobs
		SET status = 'SUCCEEDED', result = $3, completed_by = $2, updated_at = clock_timestamp()
		WHERE id = $1
		RETURNING id
	), ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted)
		SELECT $1, '` + jobstore.VerbResultUnfenced + `', $2, 0, EXISTS (SELECT 1 FROM upd)
	)
	SELECT EXISTS (SELECT 1 FROM upd)`

// UnfencedCommit writes a result with no token check: the write a lease
// without fencing amounts to. It is not part of jobstore.Store and no
// protocol endpoint reaches it; it exists only so the lab can reproduce the
// stale-writer experiment of docs/design.md ("Why fencing"). It reports
// whether the job existed.
func (s *Store) UnfencedCommit(ctx context.Context, jobID, owner string, result json.RawMessage) (bool, error) {
	if err := sqlstore.CheckResult(result); err != nil {
		return false, fmt.Errorf("commit job %s unfenced: %w", jobID, err)
	}
	var ok bool
	if err := s.pool.QueryRow(ctx, unfencedCommitSQL, jobID, owner, nullJSON(result)).Scan(&ok); err != nil {
		return false, fmt.Errorf("commit job %s unfenced: %w", jobID, err)
	}
	return ok, nil
}

// artifactSQL inserts the artifact only when the job row matches the token
// in IN_PROGRESS. FOR SHARE holds the row against a concurrent grant or
// commit until this statement's transaction ends, and rechecks the token on
// the newest row version if one is in flight. A duplicate name in the same
// generation is accepted only with the same sha256 (the no-op DO UPDATE makes
// the conflicting row come back); otherwise nothing is returned. An image
// becomes its phone's newest screenshot in phone_screens (the fleet page's
// thumbnail, docs/ui.md).
const artifactSQL = `
	WITH j AS (
		SELECT id, lease_generation, worker_id, device_serial, project FROM jobs
		WHERE id = $1 AND lease_generation = $2 AND worker_id = $3 AND status = 'IN_PROGRESS'
		FOR SHARE
	), ins AS (
		INSERT INTO artifacts (job_id, generation, owner, name, key, size, sha256, content_type, etag)
		SELECT id, lease_generation, worker_id, $4, $5, $6, $7, $8, $9 FROM j
		ON CONFLICT (job_id, generation, name)
		DO UPDATE SET sha256 = artifacts.sha256 WHERE artifacts.sha256 = EXCLUDED.sha256
		RETURNING created_at
	), ps AS (
		INSERT INTO phone_screens (agent_id, serial, job_id, project, generation, name, content_type, created_at)
		SELECT split_part(j.worker_id, '/', 1), j.device_serial, j.id, j.project, j.lease_generation, $4, $8, ins.created_at
		FROM j, ins
		WHERE j.device_serial IS NOT NULL AND j.device_serial <> '' AND $8 LIKE 'image/%'
		ON CONFLICT (agent_id, serial) DO UPDATE SET job_id = EXCLUDED.job_id, project = EXCLUDED.project,
			generation = EXCLUDED.generation, name = EXCLUDED.name, content_type = EXCLUDED.content_type,
			created_at = EXCLUDED.created_at
	), ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted, detail)
		SELECT $1, '` + jobstore.VerbArtifact + `', $3, $2, EXISTS (SELECT 1 FROM ins), $4
	)
	SELECT EXISTS (SELECT 1 FROM j), EXISTS (SELECT 1 FROM ins)`

// RegisterArtifact records an artifact under the current token. The job id,
// generation and owner of a are ignored: the token's are used. Registering
// the same name again in the same generation succeeds only with the same
// sha256; another sha256 is ErrConflict.
func (s *Store) RegisterArtifact(ctx context.Context, tok fencing.Token, a jobstore.ArtifactRecord) error {
	if err := protocol.ValidateArtifactName(a.Name); err != nil {
		return fmt.Errorf("register artifact of %s: %w", tok, err)
	}
	var fenced, inserted bool
	err := s.pool.QueryRow(ctx, artifactSQL, tok.JobID, tok.Generation, tok.Owner,
		a.Name, a.Key, a.Size, a.SHA256, a.ContentType, a.ETag).Scan(&fenced, &inserted)
	if err != nil {
		return fmt.Errorf("register artifact %s of %s: %w", a.Name, tok, err)
	}
	if !fenced {
		return s.refused(ctx, "register artifact "+a.Name+" of", tok)
	}
	if !inserted {
		return fmt.Errorf("register artifact %s of %s: another sha256 is registered under this name: %w",
			a.Name, tok, jobstore.ErrConflict)
	}
	return nil
}

// Artifacts lists the artifacts registered for one generation of a job,
// oldest first. ErrNotFound when the job does not exist.
func (s *Store) Artifacts(ctx context.Context, jobID string, generation int64) ([]jobstore.ArtifactRecord, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT job_id, generation, owner, name, key, size, sha256, content_type, etag, created_at
		FROM artifacts WHERE job_id = $1 AND generation = $2
		ORDER BY created_at, name`, jobID, generation)
	if err != nil {
		return nil, fmt.Errorf("list artifacts of job %s g%d: %w", jobID, generation, err)
	}
	defer rows.Close()
	out, err := sqlstore.Collect(rows, scanArtifact)
	if err != nil {
		return nil, fmt.Errorf("list artifacts of job %s g%d: %w", jobID, generation, err)
	}
	if len(out) == 0 {
		ok, err := s.exists(ctx, jobID)
		if err != nil {
			return nil, fmt.Errorf("list artifacts of job %s g%d: %w", jobID, generation, err)
		}
		if !ok {
			return nil, fmt.Errorf("list artifacts of job %s g%d: %w", jobID, generation, jobstore.ErrNotFound)
		}
	}
	return out, nil
}

// reclaimSQL ends the attempt of up to $1 (NULL: all) expired in-progress
// leases as an infrastructure failure (cause lease_expired, backoff $2 and
// $3 µs): back to QUEUED with the generation raised and no owner while
// attempts are left, FAILED otherwise; in one statement, returning the
// tokens taken away. SKIP LOCKED lets several reapers run. The candidates
// compare with the database clock read once ((SELECT clock_timestamp()), an
// InitPlan), so that the partial index jobs_in_progress_expiry bounds the
// scan; a volatile call there would make every sweep read every
// in-progress job. The UPDATE checks the expiry again.
var reclaimSQL = `
	WITH cand AS (
		SELECT id, lease_generation, worker_id, lease_expires_at FROM jobs
		WHERE status = 'IN_PROGRESS' AND lease_expires_at <= (SELECT clock_timestamp())
		ORDER BY lease_expires_at, id
		LIMIT $1::bigint
		FOR UPDATE SKIP LOCKED
	), upd AS (
		UPDATE jobs j
		SET ` + infraEnd(protocol.CauseLeaseExpired) + `
		FROM cand
		WHERE j.id = cand.id AND j.status = 'IN_PROGRESS'
		  AND j.lease_generation = cand.lease_generation AND j.worker_id = cand.worker_id
		  AND j.lease_expires_at <= clock_timestamp()
		RETURNING j.id, cand.worker_id AS old_owner, cand.lease_generation AS old_generation,
		          cand.lease_expires_at AS old_expiry
	), ev AS (
		INSERT INTO write_events (job_id, verb, owner, generation, accepted, detail, class, cause)
		SELECT id, '` + jobstore.VerbReclaim + `', old_owner, old_generation, true, '` + jobstore.DetailLeaseExpired + `',
		       '` + protocol.FailClassInfrastructure + `', '` + protocol.CauseLeaseExpired + `' FROM upd
	)
	SELECT id, old_owner, old_generation FROM upd ORDER BY old_expiry, id`

// ReclaimExpired ends the attempt of up to limit in-progress jobs whose
// lease expired on the database clock (retried or FAILED, see
// jobstore.Store) and returns the tokens they were taken from. A limit
// of zero or less means no limit.
func (s *Store) ReclaimExpired(ctx context.Context, limit int) ([]fencing.Token, error) {
	var lim any
	if limit > 0 {
		lim = int64(limit)
	}
	base, maxB := s.backoffArgs()
	rows, err := s.pool.Query(ctx, reclaimSQL, lim, base, maxB)
	if err != nil {
		return nil, fmt.Errorf("reclaim expired leases: %w", err)
	}
	toks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fencing.Token, error) {
		var t fencing.Token
		err := r.Scan(&t.JobID, &t.Owner, &t.Generation)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("reclaim expired leases: %w", err)
	}
	return toks, nil
}

// WriteEvents lists every recorded attempt on a job, oldest first.
func (s *Store) WriteEvents(ctx context.Context, jobID string) ([]jobstore.WriteEvent, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id, job_id, verb, owner, generation, accepted, at, detail, class, cause
		FROM write_events WHERE job_id = $1 AND verb NOT IN `+sqlstore.JobEventOnlyVerbs+` ORDER BY id`, jobID)
	if err != nil {
		return nil, fmt.Errorf("list write events of job %s: %w", jobID, err)
	}
	defer rows.Close()
	out, err := sqlstore.Collect(rows, scanWriteEvent)
	if err != nil {
		return nil, fmt.Errorf("list write events of job %s: %w", jobID, err)
	}
	return out, nil
}

// WriteCounts counts accepted and rejected write attempts by verb over the
// whole store, sorted by verb.
func (s *Store) WriteCounts(ctx context.Context) ([]sqlstore.WriteCount, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT verb, count(*) FILTER (WHERE accepted), count(*) FILTER (WHERE NOT accepted)
		FROM write_events WHERE verb NOT IN `+sqlstore.JobEventOnlyVerbs+` GROUP BY verb ORDER BY verb`)
	return sqlstore.List(rows, err, sqlstore.ScanWriteCount, "count write events")
}
