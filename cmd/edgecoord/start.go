package main

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/coordstore"
)

// openStore opens the job store the config names, applying pending
// migrations.
func openStore(ctx context.Context, cfg *config.Coordinator) (coordinator.Store, error) {
	return coordstore.Open(ctx, cfg.Store)
}

// startCoordinator runs the coordinator until ctx is cancelled: the NATS
// service, scheduler and reaper, and the metrics and health endpoint when
// metrics.listen is set. It opens the configured store, applying pending
// migrations, and builds the rest with coordinator.NewDaemon.
func startCoordinator(ctx context.Context, cfg *config.Coordinator, log zerolog.Logger) error {
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	d, err := coordinator.NewDaemon(cfg, coordinator.System{Store: store, Log: log, Version: version, API: newAPI(cfg, store, log)})
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Run(ctx)
}
