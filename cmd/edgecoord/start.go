package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/internal/natsconn"
)

// openStore opens the job store the config names, applying pending
// migrations.
func openStore(ctx context.Context, cfg *config.Coordinator) (coordinator.Store, error) {
	switch cfg.Store.Driver {
	case config.StorePostgres:
		return pgstore.Open(ctx, cfg.Store.DSN.Value())
	case config.StoreSQLite:
		return sqlitestore.Open(ctx, cfg.Store.Path)
	}
	return nil, fmt.Errorf("open store: unknown driver %q", cfg.Store.Driver)
}

// presigner returns the presigner for the configured storage, or nil when
// none is configured.
func presigner(cfg *config.Coordinator) (coordinator.Presigner, error) {
	if !cfg.Storage.Enabled() {
		return nil, nil
	}
	s := cfg.Storage
	return coordinator.NewS3Presigner(coordinator.S3Options{
		Endpoint: s.Endpoint, Secure: s.Secure, Region: s.Region, Bucket: s.Bucket,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey.Value(),
	})
}

// serverOptions maps the config to the coordinator's options.
func serverOptions(cfg *config.Coordinator, log zerolog.Logger) (coordinator.Options, error) {
	p, err := presigner(cfg)
	if err != nil {
		return coordinator.Options{}, err
	}
	return coordinator.Options{
		ID: cfg.CoordinatorID, Version: version, LeaseTTL: cfg.Lease.TTL.Duration(),
		ReapInterval: cfg.Lease.ReapInterval.Duration(), ScheduleInterval: cfg.Scheduler.Interval.Duration(),
		HeartbeatEvery: cfg.Agents.Heartbeat.Duration(), OfflineAfter: cfg.Agents.OfflineAfter.Duration(),
		AssignTimeout: cfg.NATS.RequestTimeout.Duration(),
		Presigner:     p, PresignExpiry: cfg.Storage.PresignExpiry.Duration(),
		Log: log,
	}, nil
}

// startCoordinator runs the coordinator until ctx is cancelled: the NATS
// service, scheduler and reaper, and the metrics and health endpoint when
// metrics.listen is set.
func startCoordinator(ctx context.Context, cfg *config.Coordinator, log zerolog.Logger) error {
	opts, err := serverOptions(cfg, log)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	nc, err := natsconn.Connect(cfg.NATS, natsconn.Options{
		Name: "edgecoord " + cfg.CoordinatorID, InboxPrefix: coordinator.InboxPrefix, Log: log,
	})
	if err != nil {
		return err
	}
	defer nc.Close()
	opts.Outbox = outboxOptions(cfg.Outbox, nc)
	srv := coordinator.New(nc, store, opts)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		httpErr error
	)
	if cfg.Metrics.Listen != "" {
		ln, err := net.Listen("tcp", cfg.Metrics.Listen)
		if err != nil {
			return fmt.Errorf("listen for metrics: %w", err)
		}
		log.Info().Str("listen", ln.Addr().String()).Msg("serving /metrics, /healthz and /readyz")
		wg.Go(func() {
			if err := srv.ServeHTTP(ctx, ln); err != nil {
				httpErr = err
				cancel() // a coordinator without its endpoint is not what was configured
			}
		})
	}
	err = srv.Run(ctx)
	cancel()
	wg.Wait()
	return errors.Join(err, httpErr)
}
