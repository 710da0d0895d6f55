package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/internal/cli"
)

// openStoreReadOnly opens the job store the config names for the commands
// that only read it: without migrating, and failing with an error that
// wraps errSchemaOutdated when the schema is older than this binary's.
//
// SWITCH-OVER: until the stores have OpenExisting this opens with
// openStore, which migrates. Once pgstore.OpenExisting,
// sqlitestore.OpenExisting and coordinator.ErrSchemaOutdated exist, the
// body becomes
//
//	switch cfg.Store.Driver {
//	case config.StorePostgres:
//		return pgstore.OpenExisting(ctx, cfg.Store.DSN.Value())
//	case config.StoreSQLite:
//		return sqlitestore.OpenExisting(ctx, cfg.Store.Path)
//	}
//	return nil, fmt.Errorf("open store: unknown driver %q", cfg.Store.Driver)
//
// and errSchemaOutdated below is coordinator.ErrSchemaOutdated. Nothing
// else changes.
func openStoreReadOnly(ctx context.Context, cfg *config.Coordinator) (coordinator.Store, error) {
	return openStore(ctx, cfg)
}

// errSchemaOutdated is what the error of openStoreReadOnly wraps when the
// store's schema is behind (SWITCH-OVER: coordinator.ErrSchemaOutdated).
var errSchemaOutdated = errors.New("store schema is older than this edgecoord")

// schemaVersioner is a store that says its schema version.
type schemaVersioner interface {
	SchemaVersion(context.Context) (int64, error)
}

// migrateCommand applies pending schema migrations and says what it did.
func (m *mgmt) migrateCommand() *cli.Command {
	return &cli.Command{
		Name:    "migrate",
		Summary: "create or upgrade the store's schema and print its version",
		Flags:   m.flags,
		Run: func(ctx context.Context, c *cli.Call) error {
			if err := m.load(c); err != nil {
				return err
			}
			// What the schema was: current, or behind (or not there yet).
			behind := false
			probe, err := m.openReadOnly(ctx, m.cfg)
			switch {
			case errors.Is(err, errSchemaOutdated):
				behind = true
			case err != nil:
				return err
			default:
				probe.Close()
			}
			store, err := openStore(ctx, m.cfg)
			if err != nil {
				return err
			}
			defer store.Close()
			v, ok := store.(schemaVersioner)
			if !ok {
				return fmt.Errorf("migrate: store has no schema version")
			}
			n, err := v.SchemaVersion(ctx)
			if err != nil {
				return err
			}
			did := "already up to date"
			if behind {
				did = "migrated"
			}
			_, err = fmt.Fprintf(c.Stdout, "%s store at schema version %d: %s\n", m.cfg.Store.Driver, n, did)
			return err
		},
	}
}
