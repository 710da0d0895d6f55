package sqlitestore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
)

// Releases, agents' update states and rollouts (docs/releases.md): the
// statements are sqlstore.Releases', written on the writer connection and
// read on the readers.

var _ jobstore.ReleaseStore = (*Store)(nil)

// sqlQuerier is the readers' statements or a write transaction as a
// sqlstore.Querier.
type sqlQuerier struct {
	q interface {
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	}
	// write runs Exec and QueryRow (which may write: RETURNING) through
	// it when set; nil runs them on q.
	write func(ctx context.Context, fn func(tx txn) error) error
}

func (p sqlQuerier) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	if p.write != nil && !strings.HasPrefix(strings.TrimSpace(q), "SELECT") {
		return &writtenRow{ctx: ctx, write: p.write, q: q, args: args}
	}
	return p.q.QueryRowContext(ctx, q, args...)
}

func (p sqlQuerier) Query(ctx context.Context, q string, args ...any) (sqlstore.ResultSet, error) {
	rows, err := p.q.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return resultSet{rows}, nil
}

func (p sqlQuerier) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	var n int64
	run := func(e interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	}) error {
		res, err := e.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	}
	if p.write != nil {
		return n, p.write(ctx, func(tx txn) error { return run(tx) })
	}
	return n, run(p.q)
}

// writtenRow is a statement with RETURNING run in a write transaction
// when it is scanned.
type writtenRow struct {
	ctx   context.Context
	write func(ctx context.Context, fn func(tx txn) error) error
	q     string
	args  []any
}

func (w *writtenRow) Scan(dest ...any) error {
	return w.write(w.ctx, func(tx txn) error { return tx.QueryRowContext(w.ctx, w.q, w.args...).Scan(dest...) })
}

// newReleases is the store's jobstore.ReleaseStore, embedded in Store.
func (s *Store) newReleases() *sqlstore.Releases[string] {
	return &sqlstore.Releases[string]{
		Times:   times,
		Rewrite: func(q string) string { return sqlstore.RewriteSQLite(q, now) },
		Read:    sqlQuerier{q: s.rc, write: s.write},
		Tx: func(ctx context.Context, fn func(sqlstore.Querier) error) error {
			return s.write(ctx, func(tx txn) error { return fn(sqlQuerier{q: tx}) })
		},
		Unique: func(err error) bool { return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed") },
	}
}
