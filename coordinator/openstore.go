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
	return openStore(ctx, c, pgstore.Open, sqlitestore.Open)
}

// OpenExistingStore opens the job store c names without migrating it, for
// the commands that must not change the schema: it fails with an error
// wrapping jobstore.ErrSchemaOutdated when the schema is behind this
// binary's (a database never migrated included), and with another error
// when it is ahead.
func OpenExistingStore(ctx context.Context, c config.Store) (jobstore.Store, error) {
	return openStore(ctx, c, pgstore.OpenExisting, sqlitestore.OpenExisting)
}

// openStore opens c with the opener of its driver.
func openStore(ctx context.Context, c config.Store,
	pg func(context.Context, string) (*pgstore.Store, error),
	lite func(context.Context, string) (*sqlitestore.Store, error)) (jobstore.Store, error) {
	switch c.Driver {
	case config.StorePostgres:
		s, err := pg(ctx, c.DSN.Value())
		if err != nil {
			return nil, err
		}
		return s, nil
	case config.StoreSQLite:
		s, err := lite(ctx, c.Path)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("open store: unknown driver %q (want %s or %s)", c.Driver, config.StoreSQLite, config.StorePostgres)
}
