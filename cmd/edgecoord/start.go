package main

import (
	"context"
	"sync"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/events"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/rollout"
	"github.com/edgeagent/edgeagent/coordinator/schedule/firing"
)

// openStore opens the job store the config names, applying pending
// migrations.
func openStore(ctx context.Context, cfg *config.Coordinator) (jobstore.Store, error) {
	return coordinator.OpenStore(ctx, cfg.Store)
}

// startCoordinator runs the coordinator until ctx is cancelled: the NATS
// service, scheduler and reaper, the metrics and health endpoint when
// metrics.listen is set, the HTTP API when api.listen is set, and with an
// outbox the publisher of the job ends that are not agent failures
// (events.EndPublisher). One event broker per process
// (docs/api.md, "Events") serves the API's event streams, its long poll
// and the end publisher; it runs whenever one of them is on. It opens the
// configured store, applying pending migrations, and builds the rest with
// coordinator.NewDaemon.
func startCoordinator(ctx context.Context, cfg *config.Coordinator, log zerolog.Logger) error {
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	var broker *events.Broker
	if cfg.API.Listen != "" || cfg.Outbox.Enabled() {
		broker = events.NewBroker(store, events.BrokerOptions{Log: log})
	}
	rv := &revocations{streams: &api.Streams{PerToken: cfg.API.MaxStreamsPerToken, Max: cfg.API.MaxStreams},
		log: log.With().Str("component", "api").Logger()}
	rv.store, _ = store.(jobstore.APIStore)
	d, err := coordinator.NewDaemon(cfg, coordinator.System{Store: store, Log: log, Version: version, API: newAPI(cfg, store, broker, rv, log),
		Schedules: rollout.Together(firing.ForDaemon(cfg, store, log), rollout.ForDaemon(cfg, store, log))})
	if err != nil {
		return err
	}
	defer d.Close()
	if broker == nil {
		return d.Run(ctx)
	}
	// The broker outlives the daemon's Run, which ends the API's streams
	// and long polls first: they end as the API shuts down, not with an
	// error of a stopped broker.
	bctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	wg.Go(func() { _ = broker.Run(bctx) })
	if cfg.API.Listen != "" && rv.store != nil {
		wg.Go(func() { rv.run(bctx) })
	}
	if cfg.Outbox.Enabled() {
		// The outbox publishes the ends no agent reports (cancels,
		// deadlines, attempts used up) from the job events.
		pub := &events.EndPublisher{Broker: broker, Store: store, Log: log.With().Str("component", "outbox").Logger()}
		wg.Go(func() {
			if err := pub.Run(bctx); err != nil {
				log.Error().Err(err).Msg("publish job ends")
			}
		})
	}
	return d.Run(ctx)
}
