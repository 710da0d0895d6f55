package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/internal/cli"
)

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
			probe, err := coordinator.OpenExistingStore(ctx, m.cfg.Store)
			switch {
			case errors.Is(err, jobstore.ErrSchemaOutdated):
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
