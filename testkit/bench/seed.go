package bench

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// seedTask is the task of seeded jobs: what a small screenshot job holds.
const seedTask = `{"device":{},"steps":[{"op":"launch","package":"com.android.settings"},{"op":"screenshot","name":"screen.png"}]}`

// seedSpec describes in-progress jobs written straight into the jobs table
// for the commit benchmarks: ids <jobPrefix><g> for g in [0, n), each at
// generation gen, owned by <agentPrefix><g mod agents, 4 digits>/<boot>,
// with a lease that outlives the run. Writing them with one statement keeps
// the setup of a hundred thousand jobs to seconds; the benchmarks then use
// them only through the coordinator or the store.
type seedSpec struct {
	jobPrefix   string
	n           int
	agentPrefix string
	agents      int
	boot        string
	gen         int64
}

func (s seedSpec) jobID(g int) string { return fmt.Sprintf("%s%d", s.jobPrefix, g) }
func (s seedSpec) agentID(i int) string {
	return fmt.Sprintf("%s%04d", s.agentPrefix, i)
}
func (s seedSpec) owner(i int) string { return s.agentID(i) + "/" + s.boot }

func seedJobs(ctx context.Context, driver, dsn string, s seedSpec) error {
	switch driver {
	case DriverPostgres:
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return fmt.Errorf("seed jobs: %w", err)
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `
			INSERT INTO jobs (id, status, task, lease_generation, worker_id, lease_expires_at)
			SELECT $1 || g, 'IN_PROGRESS', $2::jsonb, $3,
			       $4 || lpad((g % $5)::text, 4, '0') || '/' || $6, clock_timestamp() + interval '1 day'
			FROM generate_series(0, $7::int - 1) AS g`,
			s.jobPrefix, seedTask, s.gen, s.agentPrefix, s.agents, s.boot, s.n)
		if err != nil {
			return fmt.Errorf("seed jobs: %w", err)
		}
		if _, err := conn.Exec(ctx, `ANALYZE jobs`); err != nil {
			return fmt.Errorf("seed jobs: analyze: %w", err)
		}
		return nil
	case DriverSQLite:
		db, err := openSQLite(dsn)
		if err != nil {
			return fmt.Errorf("seed jobs: %w", err)
		}
		defer db.Close()
		_, err = db.ExecContext(ctx, `
			WITH RECURSIVE s(g) AS (SELECT 0 UNION ALL SELECT g + 1 FROM s WHERE g + 1 < ?)
			INSERT INTO jobs (id, status, task, lease_generation, worker_id, lease_expires_at)
			SELECT ? || g, 'IN_PROGRESS', ?, ?, ? || printf('%04d', g % ?) || '/' || ?,
			       strftime('%Y-%m-%d %H:%M:%f', 'now', '+1 day')
			FROM s`,
			s.n, s.jobPrefix, seedTask, s.gen, s.agentPrefix, s.agents, s.boot)
		if err != nil {
			return fmt.Errorf("seed jobs: %w", err)
		}
		if _, err := db.ExecContext(ctx, `ANALYZE`); err != nil {
			return fmt.Errorf("seed jobs: analyze: %w", err)
		}
		return nil
	}
	return fmt.Errorf("seed jobs: unknown store %q", driver)
}

// openSQLite opens a connection of its own to the store's file, with the
// store's settings.
func openSQLite(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}
