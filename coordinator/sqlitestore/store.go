package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// now is the database clock as stored: UTC, millisecond text.
const now = `strftime('%Y-%m-%d %H:%M:%f', 'now')`

// nowPlus is the database clock plus a modifier argument ("+N.NNN seconds").
const nowPlus = `strftime('%Y-%m-%d %H:%M:%f', 'now', ?)`

// timeLayout parses stored times.
const timeLayout = "2006-01-02 15:04:05.000"

// Store is a jobstore.Store on SQLite.
type Store struct {
	w     *sql.DB        // the one writer connection; transactions BEGIN IMMEDIATE
	r     *sql.DB        // readers
	wc    *stmtCache     // the writer's prepared statements (prepared.go)
	rc    *stmtCache     // the readers' prepared statements
	retry jobstore.Retry // backoff of retried attempts (attempts.go)
	ck    *checkpointer  // checkpoints beside the writes (checkpoint.go)
	// Releases keeps releases and rollouts (releases.go).
	*sqlstore.Releases[string]
}

var (
	_ jobstore.Store = (*Store)(nil)
	_ sqlstore.Lab   = (*Store)(nil)
)

// Open opens (creating if needed) the database file at path, applies pending
// migrations and returns the store. Close releases it.
func Open(ctx context.Context, path string) (*Store, error) {
	return open(ctx, path, true)
}

// OpenExisting opens the database file at path without migrating it: it
// fails with an error wrapping jobstore.ErrSchemaOutdated when the schema
// is behind this binary (or the file does not exist, which it does not
// create), and with another error when the schema is ahead of it.
func OpenExisting(ctx context.Context, path string) (*Store, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open sqlite store %s: no database file: %w", path, jobstore.ErrSchemaOutdated)
	}
	return open(ctx, path, false)
}

func checkPath(path string) error {
	if path == "" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") || path == ":memory:" {
		return fmt.Errorf("open sqlite store: %q is not a plain file path", path)
	}
	return nil
}

// open opens the store at path, and migrates its schema or checks it.
func open(ctx context.Context, path string, migrate bool) (*Store, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	const params = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)"
	// The writer never checkpoints; the checkpointer does (checkpoint.go).
	w, err := sql.Open("sqlite", path+"?"+params+"&_pragma=wal_autocheckpoint(0)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s := &Store{w: w}
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	check := s.checkSchema
	if migrate {
		check = s.migrate
	}
	if err := check(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	s.wc = newStmtCache(w)
	if err := s.wc.prepare(ctx, preparedSQL...); err != nil {
		_ = s.wc.close()
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", path+"?"+params+"&_query_only=1")
	if err != nil {
		_ = s.wc.close()
		w.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	if err := r.PingContext(ctx); err != nil {
		r.Close()
		_ = s.wc.close()
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	s.r, s.rc = r, newStmtCache(r)
	ck, err := sql.Open("sqlite", path+"?"+params)
	if err != nil {
		_ = s.rc.close()
		r.Close()
		_ = s.wc.close()
		w.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	ck.SetMaxOpenConns(1)
	ck.SetMaxIdleConns(1)
	ck.SetConnMaxLifetime(0)
	ck.SetConnMaxIdleTime(0)
	s.ck = startCheckpointer(ck)

	s.Releases = s.newReleases()
	return s, nil
}

// Close releases the connection pools and the prepared statements; the
// checkpointer stops first, and each pool's statements close before it.
func (s *Store) Close() error {
	return errors.Join(s.ck.close(), s.rc.close(), s.r.Close(), s.wc.close(), s.w.Close())
}

func (s *Store) migrate(ctx context.Context) error {
	all, err := sqlstore.Migrations(migrationFS, "migrations")
	if err != nil {
		return err
	}
	// A migration may rebuild a table that others reference (SQLite cannot
	// alter a constraint in place), which needs foreign keys off on the
	// connection, outside a transaction; they are checked before commit
	// (https://sqlite.org/lang_altertable.html).
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA foreign_keys = ON`) //nolint:errcheck // the connection is discarded on error below
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL DEFAULT (`+now+`)
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
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate schema to %d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name) VALUES (?, ?)`, m.Version, m.Name); err != nil {
			return fmt.Errorf("migrate schema to %d_%s: %w", m.Version, m.Name, err)
		}
	}
	rows, err := tx.QueryContext(ctx, `PRAGMA foreign_key_check`)
	if err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	broken := rows.Next()
	rows.Close()
	if broken {
		return fmt.Errorf("migrate schema: a migration left rows whose foreign keys point nowhere")
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	return nil
}

// querier is a connection pool or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// appliedVersions reads the applied migrations; none when the database has
// no schema_migrations table.
func appliedVersions(ctx context.Context, q querier) (map[int64]bool, error) {
	var tables int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&tables); err != nil {
		return nil, err
	}
	if tables == 0 {
		return map[int64]bool{}, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, err
	}
	applied := map[int64]bool{}
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		applied[v] = true
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	return applied, nil
}

// checkSchema fails unless the schema is the one this binary migrates to;
// it writes nothing.
func (s *Store) checkSchema(ctx context.Context) error {
	applied, err := appliedVersions(ctx, s.w)
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	return sqlstore.CheckSchema(migrationFS, "migrations", applied)
}

// SchemaVersion returns the highest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	return sqlstore.Int(s.rc.QueryRowContext(ctx, `SELECT COALESCE(max(version), 0) FROM schema_migrations`), "read schema version")
}

// outcome marks an error that is the answer to an attempt (a refusal such as
// a stale token), not a failure of the transaction: the attempt's
// write_events row is still committed.
type outcome struct{ err error }

func (o outcome) Error() string { return o.err.Error() }

// answer returns err as the outcome of an attempt.
func answer(err error) error { return outcome{err} }

// write runs fn in one BEGIN IMMEDIATE transaction on the writer connection.
// When fn returns an outcome the transaction commits and the outcome's error
// is returned; any other error rolls everything back. Once the transaction
// has ended and released the connection, the texts fn ran that the
// writer's cache did not hold yet are prepared (prepared.go).
func (s *Store) write(ctx context.Context, fn func(tx txn) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer s.wc.preparePending(ctx)
	err = fn(txn{tx, s.wc})
	var o outcome
	if err != nil && !errors.As(err, &o) {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.ck.committed()
	return o.err
}

// record inserts the write_events row of one attempt.
func record(ctx context.Context, tx txn, jobID, verb, owner string, gen int64, accepted bool) error {
	return recordDetail(ctx, tx, jobID, verb, owner, gen, accepted, "")
}

// recordDetail is record with a detail.
func recordDetail(ctx context.Context, tx txn, jobID, verb, owner string, gen int64, accepted bool, detail string) error {
	_, err := tx.ExecContext(ctx,
		`INSERT INTO write_events (job_id, verb, owner, generation, accepted, detail) VALUES (?, ?, ?, ?, ?, ?)`,
		jobID, verb, owner, gen, accepted, detail)
	if err != nil {
		return fmt.Errorf("record write event: %w", err)
	}
	return nil
}

// currentGeneration looks a job up to classify a write that matched no row;
// the write itself never depends on it.
func currentGeneration(ctx context.Context, tx txn, jobID string) (gen int64, exists bool, err error) {
	err = tx.QueryRowContext(ctx, `SELECT lease_generation FROM jobs WHERE id = ?`, jobID).Scan(&gen)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return gen, err == nil, err
}

// refusal answers a fenced write that matched no row: fencing.ErrStale when
// the job exists, jobstore.ErrNotFound when it does not.
func refusal(ctx context.Context, tx txn, jobID string) error {
	_, ok, err := currentGeneration(ctx, tx, jobID)
	if err != nil {
		return err
	}
	if ok {
		return answer(fencing.ErrStale)
	}
	return answer(jobstore.ErrNotFound)
}

// modifier is ttl as an SQLite date modifier, rounded up to the millisecond.
func modifier(ttl time.Duration) string {
	ms := (ttl + time.Millisecond - 1) / time.Millisecond
	return fmt.Sprintf("+%d.%03d seconds", ms/1000, ms%1000)
}

// formatTime is t as a stored time.
func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) (time.Time, error) {
	t, err := time.ParseInLocation(timeLayout, s, time.UTC)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse stored time: %w", err)
	}
	return t, nil
}

func nullString(s sql.NullString) string {
	if s.Valid {
		return s.String
	}
	return ""
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

const jobColumns = sqlstore.JobColumns

// times decodes the timestamps SQLite keeps as text (sqlstore.Times).
var times = sqlstore.Times[string](parseTime)

func scanJob(row sqlstore.Row) (jobstore.Job, error) { return sqlstore.ScanJob(row, times) }

// Submit inserts a queued job at generation 0.
func (s *Store) Submit(ctx context.Context, spec jobstore.JobSpec) (jobstore.Job, error) {
	id, task, err := sqlstore.PrepareSubmit(spec)
	if err != nil {
		return jobstore.Job{}, err
	}
	p := jobstore.Policy(spec)
	var notBefore any
	if !spec.NotBefore.IsZero() {
		notBefore = formatTime(spec.NotBefore)
	}
	var j jobstore.Job
	err = s.write(ctx, func(tx txn) error {
		var err error
		j, err = scanJob(tx.QueryRowContext(ctx, `
			INSERT INTO jobs (id, status, task, project, priority, not_before, max_attempts, submitted_by)
			VALUES (?, 'QUEUED', ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING
			RETURNING `+jobColumns, id, string(task), p.Project, p.Priority, notBefore, p.MaxAttempts, p.SubmittedBy))
		if errors.Is(err, sql.ErrNoRows) {
			return answer(jobstore.ErrConflict)
		}
		if err != nil {
			return err
		}
		return recordDetail(ctx, tx, id, jobstore.VerbSubmit, "", 0, true, p.SubmittedBy)
	})
	if errors.Is(err, jobstore.ErrConflict) {
		return jobstore.Job{}, fmt.Errorf("submit job %s: id in use: %w", id, err)
	}
	if err != nil {
		return jobstore.Job{}, fmt.Errorf("submit job %s: %w", id, err)
	}
	return j, nil
}

// Get returns a job, or ErrNotFound.
func (s *Store) Get(ctx context.Context, jobID string) (jobstore.Job, error) {
	j, err := scanJob(s.rc.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, jobID))
	return sqlstore.Found(j, err, jobstore.ErrNotFound, "get job %s", jobID)
}

// scanLease reads the dest columns and then generation, expiry, task and
// deadline of a granted job (sqlstore.ScanLease).
func scanLease(row sqlstore.Row, jobID, owner string, dest ...any) (jobstore.Lease, error) {
	return sqlstore.ScanLease(row, times, jobID, owner, dest...)
}

func scanWriteEvent(row sqlstore.Row) (jobstore.WriteEvent, error) {
	return sqlstore.ScanWriteEvent(row, times)
}

func scanArtifact(row sqlstore.Row) (jobstore.ArtifactRecord, error) {
	return sqlstore.ScanArtifact(row, times)
}

// grantSQL raises the generation of one job in an allowed status and grants
// it to the owner until the database clock plus the ttl.
func grantSQL(statusCond string) string {
	return `
	UPDATE jobs
	SET status = 'IN_PROGRESS',
	    lease_generation = lease_generation + 1,
	    worker_id = ?,
	    device_serial = NULL,
	    lease_expires_at = ` + nowPlus + `,` + grantCounts + `,
	    updated_at = ` + now + `
	WHERE id = ? AND ` + statusCond + `
	RETURNING lease_generation, lease_expires_at, task, deadline_at`
}

var (
	claimSQL    = grantSQL(`status = 'QUEUED'`)
	reassignSQL = grantSQL(`status IN ('QUEUED', 'IN_PROGRESS')`)
)

func (s *Store) grant(ctx context.Context, verb, query, jobID, owner string, ttl time.Duration) (jobstore.Lease, error) {
	if err := sqlstore.CheckGrant(owner, ttl); err != nil {
		return jobstore.Lease{}, fmt.Errorf("%s job %s: %w", verb, jobID, err)
	}
	var l jobstore.Lease
	err := s.write(ctx, func(tx txn) error {
		var err error
		l, err = scanLease(tx.QueryRowContext(ctx, query, owner, modifier(ttl), jobID), jobID, owner)
		if err == nil {
			return record(ctx, tx, jobID, verb, owner, l.Token.Generation, true)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		gen, ok, err := currentGeneration(ctx, tx, jobID)
		if err != nil {
			return err
		}
		if err := record(ctx, tx, jobID, verb, owner, gen, false); err != nil {
			return err
		}
		if ok {
			return answer(jobstore.ErrConflict)
		}
		return answer(jobstore.ErrNotFound)
	})
	if err != nil {
		return jobstore.Lease{}, fmt.Errorf("%s job %s: %w", verb, jobID, err)
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
	UPDATE jobs
	SET status = 'IN_PROGRESS',
	    lease_generation = lease_generation + 1,
	    worker_id = ?,
	    device_serial = NULL,
	    lease_expires_at = ` + nowPlus + `,` + grantCounts + `,
	    updated_at = ` + now + `
	WHERE id = (SELECT id FROM jobs WHERE status = 'QUEUED' ORDER BY created_at, rowid LIMIT 1)
	  AND status = 'QUEUED'
	RETURNING id, lease_generation, lease_expires_at, task, deadline_at`

// ClaimNext grants the oldest queued job to owner (generation + 1).
func (s *Store) ClaimNext(ctx context.Context, owner string, ttl time.Duration) (jobstore.Lease, error) {
	if err := sqlstore.CheckGrant(owner, ttl); err != nil {
		return jobstore.Lease{}, fmt.Errorf("claim next job: %w", err)
	}
	var l jobstore.Lease
	err := s.write(ctx, func(tx txn) error {
		var (
			jobID string
			err   error
		)
		row := tx.QueryRowContext(ctx, claimNextSQL, owner, modifier(ttl))
		l, err = scanLease(row, "", owner, &jobID)
		if errors.Is(err, sql.ErrNoRows) {
			return answer(jobstore.ErrNoJob)
		}
		if err != nil {
			return err
		}
		l.Token.JobID = jobID
		return record(ctx, tx, jobID, jobstore.VerbClaim, owner, l.Token.Generation, true)
	})
	if err != nil {
		return jobstore.Lease{}, fmt.Errorf("claim next job: %w", err)
	}
	return l, nil
}

// fenced runs one fenced statement, which returns a row when accepted,
// records the attempt under tok and classifies a refusal. When the
// statement is accepted, then runs in the same transaction.
func (s *Store) fenced(ctx context.Context, verb string, tok fencing.Token, query string, args []any, scan func(*sql.Row) error, then ...func(txn) error) error {
	return s.write(ctx, func(tx txn) error {
		row := tx.QueryRowContext(ctx, query, args...)
		err := scan(row)
		accepted := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err := record(ctx, tx, tok.JobID, verb, tok.Owner, tok.Generation, accepted); err != nil {
			return err
		}
		if accepted {
			for _, fn := range then {
				if err := fn(tx); err != nil {
					return err
				}
			}
			return nil
		}
		return refusal(ctx, tx, tok.JobID)
	})
}

var renewSQL = `
	UPDATE jobs
	SET lease_expires_at = ` + nowPlus + `, updated_at = ` + now + `
	WHERE id = ? AND lease_generation = ? AND worker_id = ? AND status = 'IN_PROGRESS'
	  AND lease_expires_at > ` + now + `
	RETURNING lease_expires_at`

// Renew extends a current, unexpired lease; it never changes generation.
func (s *Store) Renew(ctx context.Context, tok fencing.Token, ttl time.Duration) (time.Time, error) {
	if err := sqlstore.CheckTTL(ttl); err != nil {
		return time.Time{}, fmt.Errorf("renew %s: %w", tok, err)
	}
	var exp string
	err := s.fenced(ctx, jobstore.VerbRenew, tok, renewSQL,
		[]any{modifier(ttl), tok.JobID, tok.Generation, tok.Owner},
		func(r *sql.Row) error { return r.Scan(&exp) })
	if err != nil {
		return time.Time{}, fmt.Errorf("renew %s: %w", tok, err)
	}
	t, err := parseTime(exp)
	if err != nil {
		return time.Time{}, fmt.Errorf("renew %s: %w", tok, err)
	}
	return t, nil
}

// commitSQL is the fenced result write of docs/design.md ("Token rules", rule 2).
var commitSQL = `
	UPDATE jobs
	SET status = 'SUCCEEDED', result = ?, completed_by = ?, updated_at = ` + now + `
	WHERE id = ? AND lease_generation = ? AND worker_id = ? AND status = 'IN_PROGRESS'
	RETURNING id`

// Commit accepts a result for the current token: status SUCCEEDED.
func (s *Store) Commit(ctx context.Context, tok fencing.Token, result json.RawMessage) error {
	if err := sqlstore.CheckResult(result); err != nil {
		return fmt.Errorf("commit %s: %w", tok, err)
	}
	var id string
	err := s.fenced(ctx, jobstore.VerbResult, tok, commitSQL,
		[]any{nullJSON(result), tok.Owner, tok.JobID, tok.Generation, tok.Owner},
		func(r *sql.Row) error { return r.Scan(&id) })
	if err != nil {
		return fmt.Errorf("commit %s: %w", tok, err)
	}
	return nil
}

var unfencedCommitSQL = `
	UPDATE jobs
	SET status = 'SUCCEEDED', result = ?, completed_by = ?, updated_at = ` + now + `
	WHERE id = ?
	RETURNING id`

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
	err := s.write(ctx, func(tx txn) error {
		var id string
		err := tx.QueryRowContext(ctx, unfencedCommitSQL, nullJSON(result), owner, jobID).Scan(&id)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		ok = err == nil
		return record(ctx, tx, jobID, jobstore.VerbResultUnfenced, owner, 0, ok)
	})
	if err != nil {
		return false, fmt.Errorf("commit job %s unfenced: %w", jobID, err)
	}
	return ok, nil
}

// artifactSQL inserts the artifact only when the job row matches the token
// in IN_PROGRESS. A duplicate name in the same generation comes back (through
// the no-op DO UPDATE) only with the same sha256.
const artifactSQL = `
	INSERT INTO artifacts (job_id, generation, owner, name, key, size, sha256, content_type, etag)
	SELECT id, lease_generation, worker_id, ?4, ?5, ?6, ?7, ?8, ?9 FROM jobs
	WHERE id = ?1 AND lease_generation = ?2 AND worker_id = ?3 AND status = 'IN_PROGRESS'
	ON CONFLICT (job_id, generation, name)
	DO UPDATE SET sha256 = artifacts.sha256 WHERE artifacts.sha256 = excluded.sha256
	RETURNING 1`

// phoneScreenSQL makes the image artifact ?3 of job ?1 at generation ?2
// its phone's newest screenshot (the fleet page's thumbnail, docs/ui.md).
const phoneScreenSQL = `
	INSERT INTO phone_screens (agent_id, serial, job_id, project, generation, name, content_type, created_at)
	SELECT CASE WHEN instr(j.worker_id, '/') > 0 THEN substr(j.worker_id, 1, instr(j.worker_id, '/') - 1) ELSE j.worker_id END,
	       j.device_serial, j.id, j.project, a.generation, a.name, a.content_type, a.created_at
	FROM jobs j JOIN artifacts a ON a.job_id = j.id AND a.generation = ?2 AND a.name = ?3
	WHERE j.id = ?1 AND j.device_serial IS NOT NULL AND j.device_serial <> ''
	ON CONFLICT (agent_id, serial) DO UPDATE SET job_id = excluded.job_id, project = excluded.project,
		generation = excluded.generation, name = excluded.name, content_type = excluded.content_type,
		created_at = excluded.created_at`

// RegisterArtifact records an artifact under the current token. The job id,
// generation and owner of a are ignored: the token's are used. Registering
// the same name again in the same generation succeeds only with the same
// sha256; another sha256 is ErrConflict.
func (s *Store) RegisterArtifact(ctx context.Context, tok fencing.Token, a jobstore.ArtifactRecord) error {
	if err := protocol.ValidateArtifactName(a.Name); err != nil {
		return fmt.Errorf("register artifact of %s: %w", tok, err)
	}
	err := s.write(ctx, func(tx txn) error {
		var one int
		err := tx.QueryRowContext(ctx, artifactSQL, tok.JobID, tok.Generation, tok.Owner,
			a.Name, a.Key, a.Size, a.SHA256, a.ContentType, a.ETag).Scan(&one)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		accepted := err == nil
		if err := recordDetail(ctx, tx, tok.JobID, jobstore.VerbArtifact, tok.Owner, tok.Generation, accepted, a.Name); err != nil {
			return err
		}
		if accepted {
			if strings.HasPrefix(a.ContentType, "image/") {
				_, err := tx.ExecContext(ctx, phoneScreenSQL, tok.JobID, tok.Generation, a.Name)
				return err
			}
			return nil
		}
		// Classify: the token matched (so the name conflicts) or not.
		var matched bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM jobs
			WHERE id = ? AND lease_generation = ? AND worker_id = ? AND status = 'IN_PROGRESS')`,
			tok.JobID, tok.Generation, tok.Owner).Scan(&matched); err != nil {
			return err
		}
		if matched {
			return answer(fmt.Errorf("another sha256 is registered under this name: %w", jobstore.ErrConflict))
		}
		return refusal(ctx, tx, tok.JobID)
	})
	if err != nil {
		return fmt.Errorf("register artifact %s of %s: %w", a.Name, tok, err)
	}
	return nil
}

// Artifacts lists the artifacts registered for one generation of a job,
// oldest first. ErrNotFound when the job does not exist.
func (s *Store) Artifacts(ctx context.Context, jobID string, generation int64) ([]jobstore.ArtifactRecord, error) {
	rows, err := s.rc.QueryContext(ctx, `
		SELECT job_id, generation, owner, name, key, size, sha256, content_type, etag, created_at
		FROM artifacts WHERE job_id = ? AND generation = ?
		ORDER BY created_at, rowid`, jobID, generation)
	if err != nil {
		return nil, fmt.Errorf("list artifacts of job %s g%d: %w", jobID, generation, err)
	}
	defer rows.Close()
	out, err := sqlstore.Collect(rows, scanArtifact)
	if err != nil {
		return nil, fmt.Errorf("list artifacts of job %s g%d: %w", jobID, generation, err)
	}
	if len(out) == 0 {
		var ok bool
		if err := s.rc.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM jobs WHERE id = ?)`, jobID).Scan(&ok); err != nil {
			return nil, fmt.Errorf("list artifacts of job %s g%d: %w", jobID, generation, err)
		}
		if !ok {
			return nil, fmt.Errorf("list artifacts of job %s g%d: %w", jobID, generation, jobstore.ErrNotFound)
		}
	}
	return out, nil
}

var (
	reclaimCandidatesSQL = `
	SELECT id, lease_generation, worker_id FROM jobs
	WHERE status = 'IN_PROGRESS' AND lease_expires_at <= ` + now + `
	ORDER BY lease_expires_at, id
	LIMIT ?`
	reclaimSQL = releaseSQL(protocol.CauseLeaseExpired, `
	  AND lease_expires_at <= `+now)
)

// ReclaimExpired ends the attempt of up to limit in-progress jobs whose
// lease expired on the database clock (retried or FAILED, see
// jobstore.Store) and returns the tokens they were taken from. Each job
// is taken back by its own fenced statement. A limit of zero or less means
// no limit.
func (s *Store) ReclaimExpired(ctx context.Context, limit int) ([]fencing.Token, error) {
	lim := int64(-1)
	if limit > 0 {
		lim = int64(limit)
	}
	var out []fencing.Token
	err := s.write(ctx, func(tx txn) error {
		var err error
		out, err = s.releaseEach(ctx, tx, reclaimCandidatesSQL, []any{lim}, reclaimSQL, jobstore.DetailLeaseExpired, protocol.CauseLeaseExpired)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reclaim expired leases: %w", err)
	}
	return out, nil
}

// releaseEach takes back, in tx, each in-progress job that the query
// candidates selects (columns id, lease_generation, worker_id, with args):
// release is the fenced statement that does it for one token (arguments job
// id, generation, owner, backoff, backoff cap; RETURNING id), and each job
// it takes back is recorded as a reclaim of that token with detail, class
// infrastructure and cause. It returns the tokens taken away; a candidate
// whose token changed meanwhile is skipped.
func (s *Store) releaseEach(ctx context.Context, tx txn, candidates string, args []any, release, detail, cause string) ([]fencing.Token, error) {
	base, maxB := s.backoffArgs()
	rows, err := tx.QueryContext(ctx, candidates, args...)
	if err != nil {
		return nil, err
	}
	var cands []fencing.Token
	for rows.Next() {
		var t fencing.Token
		if err := rows.Scan(&t.JobID, &t.Generation, &t.Owner); err != nil {
			rows.Close()
			return nil, err
		}
		cands = append(cands, t)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	var out []fencing.Token
	for _, t := range cands {
		var id string
		err := tx.QueryRowContext(ctx, release, t.JobID, t.Generation, t.Owner, base, maxB).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := recordEnd(ctx, tx, t.JobID, jobstore.VerbReclaim, t.Owner, t.Generation, true, detail, protocol.FailClassInfrastructure, cause); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// WriteEvents lists every recorded attempt on a job, oldest first.
func (s *Store) WriteEvents(ctx context.Context, jobID string) ([]jobstore.WriteEvent, error) {
	rows, err := s.rc.QueryContext(ctx, `
		SELECT id, job_id, verb, owner, generation, accepted, at, detail, class, cause
		FROM write_events WHERE job_id = ? AND verb NOT IN `+sqlstore.JobEventOnlyVerbs+` ORDER BY id`, jobID)
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
	rows, err := s.query(ctx, `
		SELECT verb, COALESCE(sum(accepted), 0), COALESCE(sum(1 - accepted), 0)
		FROM write_events WHERE verb NOT IN `+sqlstore.JobEventOnlyVerbs+` GROUP BY verb ORDER BY verb`)
	return sqlstore.List(rows, err, sqlstore.ScanWriteCount, "count write events")
}

// query runs a read on the reader pool (sqlstore.List closes its rows).
func (s *Store) query(ctx context.Context, query string, args ...any) (sqlstore.ResultSet, error) {
	rows, err := s.rc.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return resultSet{rows}, nil
}

// resultSet is *sql.Rows as a sqlstore.ResultSet.
type resultSet struct{ *sql.Rows }

func (r resultSet) Close() { _ = r.Rows.Close() }
