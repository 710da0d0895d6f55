package rollout

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// ForDaemon returns the factory of a coordinator daemon's rollout loop:
// orders go out on the daemon's NATS connection, waiting at most
// nats.request_timeout for the agent's answer, with download URLs
// presigned by its storage. A store that keeps no releases runs none.
func ForDaemon(cfg *config.Coordinator, store jobstore.Store, log zerolog.Logger) coordinator.ScheduleLoop {
	return func(d *coordinator.Daemon) (func(ctx context.Context) error, error) {
		if _, ok := store.(jobstore.ReleaseStore); !ok {
			return func(ctx context.Context) error { <-ctx.Done(); return nil }, nil
		}
		srv := d.Server()
		o := Options{
			Store: store, PresignExpiry: srv.PresignExpiry(), OfflineAfter: srv.OfflineAfter(),
			Push: func(ctx context.Context, agentID string, c protocol.Control) error {
				ctx, cancel := context.WithTimeout(ctx, cfg.NATS.RequestTimeout.Duration())
				defer cancel()
				_, err := coordinator.PushControl(ctx, d.Conn(), agentID, c)
				return err
			},
			Log: log.With().Str("component", "rollouts").Logger(),
		}
		if p := srv.Presigner(); p != nil {
			o.PresignGet = p.PresignGet
		}
		l, err := New(o)
		if err != nil {
			return nil, err
		}
		return l.Run, nil
	}
}

// Together runs the loops of loops side by side as one.
func Together(loops ...coordinator.ScheduleLoop) coordinator.ScheduleLoop {
	return func(d *coordinator.Daemon) (func(ctx context.Context) error, error) {
		runs := make([]func(ctx context.Context) error, 0, len(loops))
		for _, l := range loops {
			run, err := l(d)
			if err != nil {
				return nil, err
			}
			runs = append(runs, run)
		}
		return func(ctx context.Context) error {
			errs := make(chan error, len(runs))
			for _, run := range runs {
				go func() { errs <- run(ctx) }()
			}
			var first error
			for range runs {
				if err := <-errs; err != nil && first == nil {
					first = err
				}
			}
			return first
		}, nil
	}
}
