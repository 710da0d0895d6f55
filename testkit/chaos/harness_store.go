package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
)

// ── Store ───────────────────────────────────────────────────────────────

func (r *run) setupStore() error {
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	var raw jobstore.Store
	switch r.opts.Store {
	case StoreSQLite:
		r.sqlitePath = filepath.Join(r.dir, "coordinator.db")
		empty, err := migratedSQLite()
		if err != nil {
			return fmt.Errorf("migrate the empty store every schedule starts from: %w", err)
		}
		if err := os.WriteFile(r.sqlitePath, empty, 0o600); err != nil {
			return err
		}
		st, err := sqlitestore.Open(ctx, r.sqlitePath)
		if err != nil {
			return err
		}
		raw = st
	case StorePostgres:
		if err := r.setupPostgres(ctx); err != nil {
			return err
		}
		st, err := pgstore.Open(ctx, r.pgDirect)
		if err != nil {
			return err
		}
		raw = st
	}
	r.opRaw = raw
	r.operator = &recordingStore{Store: raw, client: "operator", rec: r.rec}
	return nil
}

// migratedSQLite is the database file of an empty SQLite store, migrated
// once per process: every schedule's store starts as a copy of it instead
// of running each migration again, which was most of the SQLite statement
// compilation of a chaos run (docs/benchmarks.md). Closed, the database is
// all in its main file.
var migratedSQLite = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "edge-chaos-store-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "empty.db")
	st, err := sqlitestore.Open(context.Background(), path)
	if err != nil {
		return nil, err
	}
	if err := st.Close(); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
})

// setupPostgres creates the schedule's schema in the database of
// PostgresDSN and the proxy the coordinators reach it through.
func (r *run) setupPostgres(ctx context.Context) error {
	cfg, err := pgx.ParseConfig(r.opts.PostgresDSN)
	if err != nil {
		return fmt.Errorf("parse postgres dsn: %w", err)
	}
	if cfg.Host == "" || filepath.IsAbs(cfg.Host) {
		return errors.New("postgres dsn: chaos needs a TCP host, not a unix socket")
	}
	schema := fmt.Sprintf("chaos_%d_%s", uint64(r.plan.Seed), randHex(4))
	ident := pgx.Identifier{schema}.Sanitize()
	admin, err := pgx.Connect(ctx, r.opts.PostgresDSN)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	_, err = admin.Exec(ctx, "CREATE SCHEMA "+ident)
	admin.Close(ctx)
	if err != nil {
		return fmt.Errorf("create schema %s: %w", schema, err)
	}
	adminDSN := r.opts.PostgresDSN
	r.pgDrop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, adminDSN)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP SCHEMA IF EXISTS "+ident+" CASCADE")
	}
	upstream := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if r.pgProxy, err = newTCPProxy(upstream); err != nil {
		return err
	}
	dsn := func(hostport string) string {
		q := url.Values{"sslmode": {"disable"}, "search_path": {schema}, "pool_max_conns": {"4"}}
		u := url.URL{Scheme: "postgres", Host: hostport, Path: "/" + cfg.Database, RawQuery: q.Encode()}
		if cfg.Password != "" {
			u.User = url.UserPassword(cfg.User, cfg.Password)
		} else {
			u.User = url.User(cfg.User)
		}
		return u.String()
	}
	r.pgDirect = dsn(upstream)
	r.pgProxied = dsn(r.pgProxy.addr())
	return nil
}

// openStore opens a coordinator process's own store handle.
func (r *run) openStore(ctx context.Context) (jobstore.Store, error) {
	if r.opts.Store == StorePostgres {
		return pgstore.Open(ctx, r.pgProxied)
	}
	return sqlitestore.Open(ctx, r.sqlitePath)
}
