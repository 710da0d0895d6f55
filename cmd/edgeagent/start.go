package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/internal/natsconn"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uploader"
)

// startAgent runs the agent until ctx is cancelled, then shuts it down
// gracefully: no new jobs, running jobs get jobs.shutdown_timeout to finish,
// the rest are released with a fenced fail so the coordinator reassigns them
// at once. A hard stop (see withHardStop: a second signal) stops every job
// at once instead.
func startAgent(ctx context.Context, cfg *config.Agent, log zerolog.Logger) error {
	lock, err := agent.LockStateDir(cfg.StateDir)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	spool := filepath.Join(cfg.StateDir, agent.SpoolDir)
	captureDir := filepath.Join(spool, "capture")
	if err := os.MkdirAll(captureDir, 0o700); err != nil {
		return fmt.Errorf("create spool directory: %w", err)
	}
	// In presigned mode the uploader asks the coordinator through the agent
	// (fenced like the job's other calls); the agent exists only later.
	var ag atomic.Pointer[agent.Agent]
	authorize := func(ctx context.Context, req protocol.Upload) (protocol.UploadReply, error) {
		a := ag.Load()
		if a == nil {
			return protocol.UploadReply{}, errors.New("authorize upload: agent not running")
		}
		return a.AuthorizeUpload(ctx, req)
	}
	store, err := buildStorage(cfg, spool, authorize, log)
	if err != nil {
		return err
	}
	phones, closePhones, err := buildPhones(ctx, cfg, captureDir, log)
	if err != nil {
		return err
	}
	defer closePhones()

	statusL, err := agent.ListenStatus(cfg.Status.Listen)
	if err != nil {
		return fmt.Errorf("status endpoint (status.listen): %w", err)
	}
	defer statusL.Close()

	nc, err := natsconn.Connect(cfg.NATS, natsconn.Options{
		Name: "edgeagent " + cfg.AgentID, InboxPrefix: protocol.InboxPrefix(cfg.AgentID), Log: log,
		NoReconnectBuffer: true,
	})
	if err != nil {
		return err
	}
	defer nc.Close()

	a, err := agent.New(agent.Options{
		AgentID: cfg.AgentID, Version: version, Conn: nc, Phones: phones, Store: store,
		Slots: cfg.Jobs.Concurrency, SafetyMargin: cfg.Lease.SafetyMargin.Duration(),
		RequestTimeout: cfg.NATS.RequestTimeout.Duration(), Log: agentLogger(ctx, log),
		LogLevel: levelSwitch(ctx), StateDir: cfg.StateDir, UploadMode: cfg.Storage.Mode,
		// The stop path drops what the spool holds of the stopped token.
		OnStop: func(tok fencing.Token, _ error) {
			dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := store.DropGeneration(dctx, tok); err != nil {
				log.Warn().Err(err).Str("job_id", tok.JobID).Str("owner", tok.Owner).Int64("generation", tok.Generation).Msg("drop spooled uploads")
			}
		},
	})
	if err != nil {
		return err
	}
	ag.Store(a)
	// Uploads spooled by previous boots carry stale tokens: drop them.
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if _, err := store.Recover(rctx, a.Owner()); err != nil {
		log.Warn().Err(err).Msg("recover upload spool")
	}
	cancel()
	log.Info().Str("boot_id", a.BootID()).Str("state_dir", cfg.StateDir).Str("status", statusL.Addr().String()).Msg("agent starting")

	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		if err := a.ServeStatus(runCtx, statusL); err != nil {
			log.Error().Err(err).Msg("status endpoint stopped")
		}
	})
	runErr := make(chan error, 1)
	wg.Go(func() { runErr <- a.Run(runCtx) })

	select {
	case err := <-runErr:
		stopRun()
		return err
	case <-ctx.Done():
	}
	hard := hardStop(ctx)
	timeout := cfg.Jobs.ShutdownTimeout.Duration()
	log.Info().Dur("shutdown_timeout", timeout).Msg("draining: no new jobs; waiting for running jobs (signal again to stop at once)")
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	go func() {
		select {
		case <-hard:
			// Stopping Run stops every job with no further call; Shutdown
			// then sees them gone. (Cancelling sctx instead would release
			// them, which is a call.)
			log.Warn().Msg("stopping at once: running jobs are cut short")
			stopRun()
		case <-sctx.Done():
		}
	}()
	if err := a.Shutdown(sctx); err != nil {
		select {
		case <-hard:
		default:
			log.Warn().Dur("shutdown_timeout", timeout).Msg("running jobs outlasted the shutdown timeout and were released")
		}
	}
	stopRun()
	return <-runErr
}

// ── Storage ─────────────────────────────────────────────────────────────
//
// buildStorage returns the uploader the agent stores artifacts with: the
// on-disk upload spool (state_dir/spool/uploads) in front of the bucket
// (direct mode) or of presigned PUTs authorised by the coordinator
// (presigned mode, through authorize).
func buildStorage(cfg *config.Agent, spool string, authorize uploader.Authorize, log zerolog.Logger) (*uploader.Spool, error) {
	var up uploader.Uploader
	switch cfg.Storage.Mode {
	case config.StorageDirect:
		s3, err := uploader.NewS3(s3Options(cfg, spool))
		if err != nil {
			return nil, fmt.Errorf("set up storage: %w", err)
		}
		up = s3
	case config.StoragePresigned:
		p, err := uploader.NewPresigned(authorize, uploader.PresignedOptions{
			TempDir: spool, BytesPerSecond: cfg.Storage.BandwidthLimit.Int64(),
		})
		if err != nil {
			return nil, fmt.Errorf("set up presigned uploads: %w", err)
		}
		up = p
	default:
		return nil, fmt.Errorf("set up storage: unknown storage.mode %q", cfg.Storage.Mode)
	}
	sp, err := uploader.NewSpool(filepath.Join(spool, "uploads"), up, uploader.SpoolOptions{Log: log})
	if err != nil {
		return nil, fmt.Errorf("set up upload spool: %w", err)
	}
	return sp, nil
}

// ── Phones ──────────────────────────────────────────────────────────────
//
// buildPhones returns the phones this agent offers and a function that
// releases them. It is the one place where phone backends are wired in:
// simulated phones from the config (devices[].simulated) for labs and
// tests, and the adb backend for real phones.
func buildPhones(ctx context.Context, cfg *config.Agent, spool string, log zerolog.Logger) (agent.Phones, func(), error) {
	sims := cfg.SimulatedDevices()
	real := len(cfg.Devices) == 0 || len(sims) < len(cfg.Devices)
	var inv *capture.Inventory
	closeInv := func() {}
	if real {
		// Listed adb phones are the only ones offered; no list offers
		// every phone the adb server reports.
		tags := map[string][]string{}
		var serials []string
		for _, d := range cfg.Devices {
			if d.Simulated {
				continue
			}
			serials = append(serials, d.Serial)
			if len(d.Tags) > 0 {
				tags[d.Serial] = d.Tags
			}
		}
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var err error
		inv, closeInv, err = capture.NewADBInventory(actx, capture.ADBOptions{
			Address: cfg.ADB.Address, ADBPath: cfg.ADB.Path, Tags: tags, Serials: serials,
			Log: log.With().Str("component", "capture").Logger(),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("connect to the adb server at %s (adb.address; install adb or set adb.path): %w", cfg.ADB.Address, err)
		}
	} else {
		inv = capture.NewInventory()
	}
	for _, d := range sims {
		if err := inv.Add(capture.NewSimulated(capture.SimOptions{Serial: d.Serial, Tags: d.Tags})); err != nil {
			closeInv()
			return nil, nil, fmt.Errorf("add simulated phone %s: %w", d.Serial, err)
		}
		log.Info().Str("serial", d.Serial).Msg("simulated phone added")
	}
	return agent.InventoryPhones(inv, spool, capture.OpLogOptions{}), closeInv, nil
}

// ── Process context ─────────────────────────────────────────────────────

type hardStopKey struct{}
type loggingKey struct{}

type logging struct {
	root  zerolog.Logger // without agent_id, which the agent adds itself
	level *agent.LevelSwitch
}

// withHardStop returns ctx carrying hard: closing it stops the agent at
// once, even while it drains (the second SIGTERM or interrupt).
func withHardStop(ctx context.Context, hard <-chan struct{}) context.Context {
	return context.WithValue(ctx, hardStopKey{}, hard)
}

func hardStop(ctx context.Context) <-chan struct{} {
	if ch, ok := ctx.Value(hardStopKey{}).(<-chan struct{}); ok {
		return ch
	}
	return nil
}

// withLogging returns ctx carrying the root logger and its level switch.
func withLogging(ctx context.Context, root zerolog.Logger, s *agent.LevelSwitch) context.Context {
	return context.WithValue(ctx, loggingKey{}, logging{root: root, level: s})
}

func levelSwitch(ctx context.Context) *agent.LevelSwitch {
	l, _ := ctx.Value(loggingKey{}).(logging)
	return l.level
}

// agentLogger returns the logger for the agent core: the root logger when
// ctx carries it (the agent adds agent_id itself), else log.
func agentLogger(ctx context.Context, log zerolog.Logger) zerolog.Logger {
	if l, ok := ctx.Value(loggingKey{}).(logging); ok {
		return l.root
	}
	return log
}
