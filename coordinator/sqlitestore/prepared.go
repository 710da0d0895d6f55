package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// preparedSQL are the writer's statements that are prepared once, when the
// store opens, instead of compiled again for every use: the grants (the
// scheduler's pick statements take milliseconds to compile, far more than
// they take to run, and the scheduler tries one per agent and queued job),
// the reassignment and the renewal. The writer is one connection, so a
// compile there holds up every other write behind it and takes CPU from the
// coordinator's path from a reassignment to its revoke (docs/design.md,
// "The stop path"; the figures in docs/benchmarks.md, "Stop latency through
// the coordinator"). PostgreSQL needs none of this: pgx caches the
// statements it prepares.
var preparedSQL = []string{
	canGrantSQL, pickQueuedSQL, claimPickedSQL, pickExpiredSQL, takeOverPickedSQL,
	claimSQL, reassignSQL, renewSQL,
}

// prepare prepares preparedSQL on the writer connection.
func (s *Store) prepare(ctx context.Context) error {
	s.stmts = make(map[string]*sql.Stmt, len(preparedSQL))
	for _, q := range preparedSQL {
		st, err := s.w.PrepareContext(ctx, q)
		if err != nil {
			return errors.Join(fmt.Errorf("prepare statement: %w", err), s.closeStmts())
		}
		s.stmts[q] = st
	}
	return nil
}

// closeStmts closes the statements prepare prepared.
func (s *Store) closeStmts() error {
	var errs []error
	for _, st := range s.stmts {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

// queryRow runs query in tx, as the statement prepared when the store
// opened when it is one of preparedSQL.
func (s *Store) queryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	if st, ok := s.stmts[query]; ok {
		return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, query, args...)
}
