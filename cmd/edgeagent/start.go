package main

import (
	"context"
	"errors"

	"github.com/edgeagent/edgeagent/config"
	"github.com/rs/zerolog"
)

// startAgent runs the agent until ctx is cancelled.
func startAgent(ctx context.Context, cfg *config.Agent, log zerolog.Logger) error {
	return errors.New("agent runtime not wired")
}
