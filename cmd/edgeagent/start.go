package main

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/config"
)

// logging is the root logger of `edgeagent run` and the switch of its
// level.
type logging struct {
	root  zerolog.Logger // without agent_id, which the agent adds itself
	level *agent.LevelSwitch
}

// startFunc runs the agent of `edgeagent run` until ctx is cancelled (a
// drain) or hardStop is closed (a stop at once).
type startFunc func(ctx context.Context, hardStop <-chan struct{}, cfg *config.Agent, logs logging) error

// startAgent runs the agent until ctx is cancelled, then shuts it down
// gracefully: no new jobs, running jobs get jobs.shutdown_timeout to finish,
// the rest are released with a fenced fail so the coordinator reassigns them
// at once. Closing hardStop (a second signal) stops every job at once
// instead. The agent is built by agent.NewDaemon from the config alone.
func startAgent(ctx context.Context, hardStop <-chan struct{}, cfg *config.Agent, logs logging) error {
	d, err := agent.NewDaemon(ctx, cfg, agent.System{Log: logs.root, LogLevel: logs.level, Version: version})
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Run(ctx, hardStop)
}
