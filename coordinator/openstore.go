package coordinator

import (
	"context"
	"fmt"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
)

// OpenStore opens the job store c names, applying pending migrations: the
// PostgreSQL database of c.DSN (driver postgres, package pgstore) or the
// SQLite file c.Path (driver sqlite, package sqlitestore). It is the store a
// Daemon takes in its System.
func OpenStore(ctx context.Context, c config.Store) (jobstore.Store, error) {
	switch c.Driver {
	case config.StorePostgres:
		return pgstore.Open(ctx, c.DSN.Value())
	case config.StoreSQLite:
		return sqlitestore.Open(ctx, c.Path)
	}
	return nil, fmt.Errorf("open store: unknown driver %q (want %s or %s)", c.Driver, config.StoreSQLite, config.StorePostgres)
}

// OpenExistingStore opens the job store c names without migrating it, for
// the commands that must not change the schema: it fails with an error
// wrapping jobstore.ErrSchemaOutdated when the schema is behind this
// binary's (a database never migrated included), and with another error
// when it is ahead.
func OpenExistingStore(ctx context.Context, c config.Store) (jobstore.Store, error) {
	switch c.Driver {
	case config.StorePostgres:
		return pgstore.OpenExisting(ctx, c.DSN.Value())
	case config.StoreSQLite:
		return sqlitestore.OpenExisting(ctx, c.Path)
	}
	return nil, fmt.Errorf("open store: unknown driver %q (want %s or %s)", c.Driver, config.StoreSQLite, config.StorePostgres)
}
