package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

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

// crashAfterUpdateRecord, set with -ldflags "-X
// main.crashAfterUpdateRecord=1", makes `edgeagent run` fail (exit 1)
// right after it read the update record: the simulated crash of a bad
// release, for the rollback test (docs/updates.md). Never set in a release.
var crashAfterUpdateRecord string

// startAgent runs the agent until ctx is cancelled, then shuts it down
// gracefully: no new jobs, running jobs get jobs.shutdown_timeout to finish,
// the rest are released with a fenced fail so the coordinator reassigns them
// at once. Closing hardStop (a second signal) stops every job at once
// instead. The agent is built by agent.NewDaemon from the config alone. It
// returns agent.ErrUpdateRestart when the agent exits for a self-update.
func startAgent(ctx context.Context, hardStop <-chan struct{}, cfg *config.Agent, logs logging) error {
	sys := agent.System{Log: logs.root, LogLevel: logs.level, Version: version}
	// The running binary, which a self-update replaces; resolved now,
	// before a swap renames it.
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			sys.Executable = exe
		}
	}
	if crashAfterUpdateRecord != "" {
		sys.AfterUpdateRecord = func() error {
			return fmt.Errorf("crash simulation (built with main.crashAfterUpdateRecord=%s)", crashAfterUpdateRecord)
		}
	}
	d, err := agent.NewDaemon(ctx, cfg, sys)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Run(ctx, hardStop)
}

// updateExit maps an agent that stopped for a self-update to its exit
// status, agent.ExitUpdate, so that the service manager starts the binary
// now in place; any other error is returned as it is.
func updateExit(err error, exit *error) error {
	if errors.Is(err, agent.ErrUpdateRestart) {
		*exit = &exitError{code: agent.ExitUpdate}
		return nil
	}
	return err
}
