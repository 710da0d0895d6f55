package main

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/events"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/ui"
)

// withUI serves the web dashboard (docs/ui.md) under /ui/, and its icon at
// /favicon.ico, beside the API handler apiH on the API's listener. It acts
// through the same store calls and the same revoke and control pushes as
// the API (opts).
func withUI(cfg *config.Coordinator, store jobstore.Store, d *coordinator.Daemon, broker *events.Broker, opts api.Options, apiH *api.Handler, log zerolog.Logger) (http.Handler, error) {
	origin := ""
	if cfg.Storage.Enabled() {
		origin = "https://" + cfg.Storage.Endpoint
		if !cfg.Storage.Secure {
			origin = "http://" + cfg.Storage.Endpoint
		}
	}
	public := ""
	if cfg.API.PublicURL != "" {
		var err error
		if public, err = cfg.API.PublicOrigin(); err != nil {
			return nil, fmt.Errorf("api.public_url: %w", err)
		}
	}
	h, err := ui.New(ui.Options{
		PublicOrigin:  public,
		Phones:        d.Server().Phones(),
		StorageOrigin: origin,
		Store:         store,
		Broker:        broker,
		Presigner:     d.Server().Presigner(),
		URLExpiry:     cfg.Storage.PresignExpiry.Duration(),
		OfflineAfter:  cfg.Agents.OfflineAfter.Duration(),
		Revoke:        opts.Revoke,
		PushControl:   opts.PushControl,
		SecureCookie:  cfg.API.TLS() || strings.HasPrefix(public, "https://"),
		Admit:         apiH.Admit,
		Streams:       opts.Streams,
		Log:           log.With().Str("component", "ui").Logger(),
	})
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ui.Serves(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		apiH.ServeHTTP(w, r)
	}), nil
}
