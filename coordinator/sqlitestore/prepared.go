package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// Statements are compiled once per connection, not once per use.
//
// SQLite compiles the text of a statement into a program before it runs
// it, and for many of this store's statements compiling costs more than
// running: database/sql compiles the text anew on every ExecContext,
// QueryContext and QueryRowContext it is given, and the driver keeps no
// cache by text. So each pool (the writer and the readers) has a
// stmtCache: the statements it has prepared, by text, each compiled on a
// connection the first time it runs there and run from then on without
// compiling (database/sql keeps the compiled statement of every connection
// a *sql.Stmt ran on). SQLite compiles a prepared statement again by itself
// only when the schema changed (the migrations run before the store uses a
// cache) or when a value bound to it changes that its plan depends on (a
// LIMIT ?, say; such a statement, prepared without values, is compiled once
// more on its first run).
//
// A cache holds at most stmtCacheSize statements; a text beyond them runs
// unprepared, as every text did before, so that statements built for their
// arguments (an IN list as long as the list) cannot grow it without limit.
//
// The writer is one connection, which a write transaction holds from BEGIN
// to COMMIT, so the writer's cache cannot prepare a text it meets inside a
// transaction (preparing takes a connection of the pool: it would wait for
// the transaction that waits for it). Such a text runs unprepared in that
// transaction and is prepared when the transaction has ended (Store.write);
// from the next transaction on it runs prepared.
var stmtCacheSize = 256

// preparedSQL are the writer's statements that are prepared when the store
// opens rather than after their first use: the grants (the scheduler's
// pick statements take milliseconds to compile, far more than they take to
// run, and the scheduler tries one per agent and queued job), the
// reassignment and the renewal. The writer is one connection, so a compile
// there holds up every other write behind it and takes CPU from the
// coordinator's path from a reassignment to its revoke (docs/design.md,
// "The stop path"; the figures in docs/benchmarks.md, "Stop latency through
// the coordinator"): prepared at open, even the first grant compiles none
// of them. PostgreSQL needs none of this: pgx caches the statements it
// prepares.
var preparedSQL = []string{
	canGrantSQL, pickQueuedSQL, claimPickedSQL, pickExpiredSQL, takeOverPickedSQL,
	claimSQL, reassignSQL, renewSQL,
}

// stmtCache is the prepared statements of one pool, by text.
type stmtCache struct {
	db  *sql.DB
	max int

	mu      sync.Mutex
	stmts   map[string]*sql.Stmt
	pending map[string]bool // met in a transaction, to prepare after it
	closed  bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, max: stmtCacheSize, stmts: map[string]*sql.Stmt{}, pending: map[string]bool{}}
}

// prepare prepares each of qs now; it fails on the first text that does
// not prepare.
func (c *stmtCache) prepare(ctx context.Context, qs ...string) error {
	for _, q := range qs {
		if _, err := c.add(ctx, q); err != nil {
			return fmt.Errorf("prepare statement: %w", err)
		}
	}
	return nil
}

// add prepares q on the pool and caches it; nil, without an error, when
// the cache is full or closed.
func (c *stmtCache) add(ctx context.Context, q string) (*sql.Stmt, error) {
	c.mu.Lock()
	st, ok := c.stmts[q]
	room := !c.closed && len(c.stmts) < c.max
	c.mu.Unlock()
	if ok || !room {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	cur, ok := c.stmts[q]
	room = !c.closed && len(c.stmts) < c.max
	if !ok && room {
		c.stmts[q] = st
	}
	c.mu.Unlock()
	if ok || !room {
		_ = st.Close() // another caller prepared it first, or no room
		return cur, nil
	}
	return st, nil
}

// stmt returns q prepared, preparing it now on a miss; nil when it is not
// cached and cannot be (the cache is full or closed, or q does not
// prepare: the caller runs it unprepared and sees the usual error). It is
// for calls on the pool, outside a transaction.
func (c *stmtCache) stmt(ctx context.Context, q string) *sql.Stmt {
	st, err := c.add(ctx, q)
	if err != nil {
		return nil
	}
	return st
}

// lookup returns q when it is cached; otherwise it notes q to be prepared
// by preparePending, while the cache has room, and returns nil.
func (c *stmtCache) lookup(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.stmts[q]
	if !ok && !c.closed && !c.pending[q] && len(c.stmts)+len(c.pending) < c.max {
		c.pending[q] = true
	}
	return st
}

// preparePending prepares the texts lookup noted. A text that fails to
// prepare is left out; it is noted again when it next runs.
func (c *stmtCache) preparePending(ctx context.Context) {
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	qs := make([]string, 0, len(c.pending))
	for q := range c.pending {
		qs = append(qs, q)
	}
	clear(c.pending)
	c.mu.Unlock()
	for _, q := range qs {
		_, _ = c.add(ctx, q)
	}
}

// len is the number of cached statements.
func (c *stmtCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.stmts)
}

// close closes the cached statements; the cache prepares no more and its
// callers run their statements unprepared.
func (c *stmtCache) close() error {
	c.mu.Lock()
	stmts := c.stmts
	c.stmts, c.pending, c.closed = map[string]*sql.Stmt{}, map[string]bool{}, true
	c.mu.Unlock()
	var errs []error
	for _, st := range stmts {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

// ExecContext runs q on the pool, prepared when it can be.
func (c *stmtCache) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := c.stmt(ctx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return c.db.ExecContext(ctx, q, args...)
}

// QueryContext runs q on the pool, prepared when it can be. The rows keep
// their connection until they are closed, so no other caller runs the
// statement on it meanwhile.
func (c *stmtCache) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := c.stmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return c.db.QueryContext(ctx, q, args...)
}

// QueryRowContext runs q on the pool, prepared when it can be.
func (c *stmtCache) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := c.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.db.QueryRowContext(ctx, q, args...)
}

// txn is a write transaction whose statements run as the writer cache's,
// on the transaction's connection (Tx.StmtContext reuses what the cached
// statement compiled on that connection). A text not cached yet runs
// unprepared and is prepared once the transaction has ended.
//
// A cached statement is one compiled program per connection: its rows
// must be read and closed before the same text runs again in the
// transaction, which would reset the program under them. The store reads
// every multi-row result of a transaction to its end before it runs
// another statement.
type txn struct {
	*sql.Tx
	c *stmtCache
}

// stmt returns q as a statement of the transaction when it is cached, nil
// otherwise.
func (t txn) stmt(ctx context.Context, q string) *sql.Stmt {
	if st := t.c.lookup(q); st != nil {
		return t.Tx.StmtContext(ctx, st)
	}
	return nil
}

// ExecContext runs q in the transaction.
func (t txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := t.stmt(ctx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, q, args...)
}

// QueryRowContext runs q in the transaction.
func (t txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := t.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, q, args...)
}

// QueryContext runs q in the transaction; the rows must be closed before
// q runs again in it (see txn).
func (t txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := t.stmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, q, args...)
}

// PrepareContext returns q as a statement of the transaction, for a text
// run many times in it: the cached one, else one prepared for the
// transaction alone.
func (t txn) PrepareContext(ctx context.Context, q string) (*sql.Stmt, error) {
	if st := t.stmt(ctx, q); st != nil {
		return st, nil
	}
	return t.Tx.PrepareContext(ctx, q)
}
