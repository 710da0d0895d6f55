package main

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/events"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// eventsOptions mounts package events in the API's options: the job and
// project event streams, the artifact list with presigned URLs (signed
// with the daemon's storage key, valid storage.presign_expiry) and the
// long poll ?wait=, all on broker, the one broker of the process
// (docs/api.md, "Events", "Waiting for the end", "Artifacts"). The
// handlers see the projects of the caller the API authenticated; a
// refusal they make themselves is recorded as the API records its own
// once denials is bound to the API's handler.
func eventsOptions(opts *api.Options, cfg *config.Coordinator, store jobstore.Store, d *coordinator.Daemon, broker *events.Broker, log zerolog.Logger) *denials {
	den := &denials{}
	st, ok := store.(events.Store)
	if !ok || broker == nil {
		return den
	}
	h := &events.Handlers{
		Broker:    broker,
		Store:     st,
		Presigner: d.Server().Presigner(),
		URLExpiry: cfg.Storage.PresignExpiry.Duration(),
		Projects: func(r *http.Request) ([]string, bool) {
			c, ok := api.CallerFrom(r.Context())
			return c.Projects, ok
		},
		Forbidden: den.record,
		Log:       log.With().Str("component", "events").Logger(),
	}
	mux := http.NewServeMux()
	h.Register(mux)
	opts.Events, opts.Artifacts = mux, mux
	opts.Waiter = longPoll{&events.Waiter{Broker: broker, Jobs: store}}
	return den
}

// denials records the refusals of the events handlers through the API.
type denials struct{ h *api.Handler }

// bind makes h record the refusals.
func (d *denials) bind(h *api.Handler) { d.h = h }

func (d *denials) record(r *http.Request, jobID, project string) {
	if d.h != nil {
		d.h.RecordDenial(r, jobID, project)
	}
}

// longPoll is the API's Waiter on an events.Waiter: a wait that times out
// answers the job as it then is.
type longPoll struct{ w *events.Waiter }

func (l longPoll) Wait(ctx context.Context, jobID string, timeout time.Duration) error {
	err := l.w.Wait(ctx, jobID, timeout)
	if errors.Is(err, events.ErrWaitTimeout) {
		return nil
	}
	return err
}
