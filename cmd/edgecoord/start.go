package main

import (
	"context"
	"errors"

	"github.com/edgeagent/edgeagent/config"
	"github.com/rs/zerolog"
)

// startCoordinator runs the coordinator until ctx is cancelled.
func startCoordinator(ctx context.Context, cfg *config.Coordinator, log zerolog.Logger) error {
	return errors.New("coordinator runtime not wired")
}
