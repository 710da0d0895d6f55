package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
)

// Releases, agents' update states and rollouts (docs/releases.md): the
// statements are sqlstore.Releases', run on the pool.

var _ jobstore.ReleaseStore = (*Store)(nil)

// pgQuerier is a pool or a transaction as a sqlstore.Querier.
type pgQuerier struct{ q pgxQuerier }

type pgxQuerier interface {
	querier
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func (p pgQuerier) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	return p.q.QueryRow(ctx, q, args...)
}

func (p pgQuerier) Query(ctx context.Context, q string, args ...any) (sqlstore.ResultSet, error) {
	return p.q.Query(ctx, q, args...)
}

func (p pgQuerier) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := p.q.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

// newReleases is the store's jobstore.ReleaseStore, embedded in Store.
func (s *Store) newReleases() *sqlstore.Releases[time.Time] {
	return &sqlstore.Releases[time.Time]{
		Times:   times,
		Rewrite: func(q string) string { return sqlstore.RewriteNow(q, "clock_timestamp()") },
		Read:    pgQuerier{s.pool},
		Tx: func(ctx context.Context, fn func(sqlstore.Querier) error) error {
			return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return fn(pgQuerier{tx}) })
		},
		Unique: uniqueViolation,
	}
}
