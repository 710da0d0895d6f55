package firing

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// ForDaemon returns the factory of a coordinator daemon's schedule loop
// (coordinator.System.Schedules, docs/schedules.md): every
// schedules.interval of cfg it fires the slots due on the database clock
// with the daemon's job defaults and phone rule, its metrics in the
// coordinator's registry.
func ForDaemon(cfg *config.Coordinator, store jobstore.Store, log zerolog.Logger) coordinator.ScheduleLoop {
	return func(d *coordinator.Daemon) (func(ctx context.Context) error, error) {
		l, err := New(Options{
			Store:    store,
			Interval: cfg.Schedules.Interval.Duration(),
			Submit: api.SubmitOptions{Jobs: cfg.Jobs, OfflineAfter: cfg.Agents.OfflineAfter.Duration(),
				Phones: d.Server().Phones()},
			Revoke:     d.Server().Revoke,
			Registerer: d.Server().Registry(),
			Log:        log.With().Str("component", "schedules").Logger(),
		})
		if err != nil {
			return nil, err
		}
		return l.Run, nil
	}
}
