package main

import (
	"context"
	"sync"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/coordstore"
	"github.com/edgeagent/edgeagent/coordinator/events"
)

// openStore opens the job store the config names, applying pending
// migrations.
func openStore(ctx context.Context, cfg *config.Coordinator) (coordinator.Store, error) {
	return coordstore.Open(ctx, cfg.Store)
}

// startCoordinator runs the coordinator until ctx is cancelled: the NATS
// service, scheduler and reaper, the metrics and health endpoint when
// metrics.listen is set, and with an outbox the publisher of the job ends
// that are not agent failures (events.EndPublisher). It opens the configured store, applying pending
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
	if !cfg.Outbox.Enabled() {
		return d.Run(ctx)
	}
	// The outbox publishes the ends no agent reports (cancels, deadlines,
	// attempts used up) from the job events.
	bctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	broker := events.NewBroker(store, events.BrokerOptions{Log: log})
	pub := &events.EndPublisher{Broker: broker, Store: store, Log: log.With().Str("component", "outbox").Logger()}
	wg.Go(func() { _ = broker.Run(bctx) })
	wg.Go(func() {
		if err := pub.Run(bctx); err != nil {
			log.Error().Err(err).Msg("publish job ends")
		}
	})
	return d.Run(ctx)
}
