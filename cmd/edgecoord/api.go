package main

import (
	"context"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/events"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule"
	"github.com/edgeagent/edgeagent/coordinator/session"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// apiOptions are the HTTP API's options for the daemon d on store, from
// the config's api section (docs/api.md).
func apiOptions(cfg *config.Coordinator, store jobstore.Store, d *coordinator.Daemon, log zerolog.Logger) api.Options {
	nc := d.Conn()
	return api.Options{
		Store: store,
		Revoke: func(tok fencing.Token, reason string) error {
			return coordinator.PublishRevoke(nc, tok, reason, cfg.NATS.RequestTimeout.Duration())
		},
		PushControl: func(ctx context.Context, agentID string, ctl protocol.Control) error {
			ctx, cancel := context.WithTimeout(ctx, cfg.NATS.RequestTimeout.Duration())
			defer cancel()
			_, err := coordinator.PushControl(ctx, nc, agentID, ctl)
			return err
		},
		OfflineAfter: cfg.Agents.OfflineAfter.Duration(),
		Phones:       d.Server().Phones(),
		Jobs:         cfg.Jobs,
		Schedules:    schedule.Limits{MinEvery: cfg.Schedules.MinEvery.Duration()},
		MaxBodyBytes: cfg.API.MaxBodyBytes.Int64(),
		Rate:         float64(cfg.API.Rate),
		Burst:        cfg.API.Burst,
		Log:          log,
		APKs:         d.Server().APKBucket(),
		Releases:     d.Server().ReleaseBucket(),
	}
}

// newAPI returns the factory of the daemon's HTTP API, its events on
// broker.
// The parts it builds are registered in rv, which ends what a revoked
// token holds open.
func newAPI(cfg *config.Coordinator, store jobstore.Store, broker *events.Broker, rv *revocations, log zerolog.Logger) coordinator.APIFactory {
	return func(d *coordinator.Daemon) (http.Handler, error) {
		opts := apiOptions(cfg, store, d, log)
		opts.Streams = rv.streams
		var err error
		if opts.Enroll, err = enrollOptions(cfg); err != nil {
			return nil, err
		}
		m, err := session.New(session.ForServer(d.Server(), store, d.Conn(), log))
		if err != nil {
			return nil, err
		}
		opts.Sessions = newSessions(cfg, store, m, log)
		mcpSrv, err := newMCP(cfg, store, m, log)
		if err != nil {
			return nil, err
		}
		opts.MCP = mcpSrv
		rv.mcp, rv.sessions = mcpSrv, m
		den := eventsOptions(&opts, cfg, store, d, broker, log)
		h, err := api.New(opts)
		if err != nil {
			return nil, err
		}
		den.bind(h)
		return withUI(cfg, store, d, broker, opts, h, log)
	}
}
