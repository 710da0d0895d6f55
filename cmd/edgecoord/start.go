package main

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/internal/natsconn"
)

// openStore opens the job store the config names.
func openStore(ctx context.Context, cfg *config.Coordinator) (coordinator.Store, error) {
	switch cfg.Store.Driver {
	case config.StorePostgres:
		return pgstore.Open(ctx, cfg.Store.DSN.Value())
	case config.StoreSQLite:
		return sqlitestore.Open(ctx, cfg.Store.Path)
	}
	return nil, fmt.Errorf("open store: unknown driver %q", cfg.Store.Driver)
}

// startCoordinator runs the coordinator until ctx is cancelled.
func startCoordinator(ctx context.Context, cfg *config.Coordinator, log zerolog.Logger) error {
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	nc, err := natsconn.Connect(cfg.NATS, natsconn.Options{Name: "edgecoord " + cfg.CoordinatorID, Log: log})
	if err != nil {
		return err
	}
	defer nc.Close()
	srv := coordinator.New(nc, store, coordinator.Options{
		ID: cfg.CoordinatorID, Version: version, LeaseTTL: cfg.Lease.TTL.Duration(),
		ReapInterval: cfg.Lease.ReapInterval.Duration(), ScheduleInterval: cfg.Scheduler.Interval.Duration(),
		Log: log,
	})
	return srv.Run(ctx)
}
