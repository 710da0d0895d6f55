package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent/selfupdate"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/internal/natsconn"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uploader"
)

// NATSDialer connects the agent to NATS. opts are what the agent needs of
// its connection, and the dialer must apply them: the client name, the
// agent's inbox prefix and no reconnect buffer (a request the agent gave up
// on must never be sent after a reconnect).
type NATSDialer func(opts ...nats.Option) (*nats.Conn, error)

// System is what a Daemon is built from besides its config: the
// dependencies a caller may inject in place of those the config describes.
// The zero value builds everything from the config, as `edgeagent run`
// does; the chaos harness, the benchmarks, the lab and tests inject their
// fault links and simulated phones here.
type System struct {
	// DialNATS connects to NATS; default natsconn.Connect with cfg.NATS.
	DialNATS NATSDialer
	// Phones, when set, are the phones offered, in place of the adb phones
	// and simulated phones of cfg.ADB and cfg.Devices. The daemon does not
	// close it.
	Phones *capture.Inventory
	// Storage adjusts the storage built from cfg.Storage.
	Storage StorageHooks
	// WallClock is the wall clock the lease guards read; default time.Now.
	WallClock func() time.Time
	// GuardCheckInterval overrides the lease guards' periodic clock check
	// (fencing.WithCheckInterval).
	GuardCheckInterval time.Duration
	// Log is the root logger; the daemon adds agent_id to its lines.
	Log zerolog.Logger
	// LogLevel, when set, is the switch the log_level setting turns.
	LogLevel *LevelSwitch
	// Version is reported to the coordinator; default "dev".
	Version string
	// Registry receives the agent's metrics and the uploads' (package
	// uploader); the status endpoint's /metrics serves it. Default a new
	// registry.
	Registry *prometheus.Registry
	// Executable is the path of the running edgeagent binary, which a
	// self-update replaces (docs/updates.md); "" refuses every update.
	// Only the edgeagent command sets it: an agent in another program
	// (edgelab, tests) must not replace that program.
	Executable string
	// AfterUpdateRecord, when set, is called right after the update
	// record was read at start; an error ends NewDaemon with it.
	AfterUpdateRecord func() error
}

// StorageHooks adjust the storage NewDaemon builds from cfg.Storage: the
// upload spool (state_dir/spool/uploads) in front of the bucket (direct
// mode) or of presigned PUTs authorised by the coordinator (presigned
// mode). Nil hooks change nothing.
type StorageHooks struct {
	// S3 adjusts the options of the direct-mode uploader before it is
	// built (its transport, its retry policy).
	S3 func(*uploader.S3Options)
	// Spool adjusts the options of the upload spool.
	Spool func(*uploader.SpoolOptions)
	// Wrap wraps the uploader the spool sends to.
	Wrap func(uploader.Uploader) uploader.Uploader
}

// Daemon is the agent as a process runs it: the Agent core with its NATS
// connection, phones, upload spool, metrics and status endpoint, built by
// NewDaemon from the config and a System. Run it once, then Close it.
type Daemon struct {
	cfg    *config.Agent
	log    zerolog.Logger
	agent  *Agent
	spool  *uploader.Spool
	nc     *nats.Conn
	status net.Listener
	lock   *StateLock

	sleepM      *sleepMetrics // sleep.go
	closePhones func()
	inv         *capture.Inventory
	watch       *PhoneWatch
	recovery    *Recovery
	recovered   uploader.RecoverReport
	recoverErr  error
	closeOnce   sync.Once
}

// NewDaemon builds the agent of cfg: it takes the state directory's lock,
// sets up the upload spool in front of the storage (uploads spooled by
// previous boots, whose tokens are stale, are dropped before the first
// job), the phones, the status endpoint (when cfg.Status.Listen is set) and
// the NATS connection. ctx bounds the start (the adb server's answer, the
// spool's recovery). Close releases what NewDaemon took, also when Run was
// never called.
func NewDaemon(ctx context.Context, cfg *config.Agent, sys System) (_ *Daemon, err error) {
	if cfg == nil {
		return nil, errors.New("new daemon: no config")
	}
	if sys.Version == "" {
		sys.Version = "dev"
	}
	if sys.Registry == nil {
		sys.Registry = prometheus.NewRegistry()
	}
	d := &Daemon{cfg: cfg, log: sys.Log.With().Str("agent_id", cfg.AgentID).Logger(), closePhones: func() {}}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if d.lock, err = LockStateDir(cfg.StateDir); err != nil {
		return nil, err
	}
	// First of all, the update record: a new binary on trial counts its
	// start and may put the previous binary back (docs/updates.md).
	update, err := beginUpdate(cfg, sys, d.log)
	if err != nil {
		return nil, err
	}
	if sys.AfterUpdateRecord != nil {
		if err := sys.AfterUpdateRecord(); err != nil {
			return nil, err
		}
	}
	spoolDir := filepath.Join(cfg.StateDir, SpoolDir)
	captureDir := filepath.Join(spoolDir, "capture")
	if err := os.MkdirAll(captureDir, 0o700); err != nil {
		return nil, fmt.Errorf("create spool directory: %w", err)
	}
	removeStaleCaptures(captureDir, d.log)
	upMetrics, err := uploader.NewMetrics(sys.Registry)
	if err != nil {
		return nil, err
	}
	// In presigned mode the uploader asks the coordinator through the agent
	// (fenced like the job's other calls); the agent exists only later.
	var ag atomic.Pointer[Agent]
	authorize := func(ctx context.Context, req protocol.Upload) (protocol.UploadReply, error) {
		a := ag.Load()
		if a == nil {
			return protocol.UploadReply{}, errors.New("authorize upload: agent not running")
		}
		return a.AuthorizeUpload(ctx, req)
	}
	if d.spool, err = buildStorage(cfg, spoolDir, authorize, upMetrics, sys.Storage, d.log); err != nil {
		return nil, err
	}
	var rec atomic.Pointer[Recovery]
	serverLost := func() {
		if r := rec.Load(); r != nil {
			r.ServerLost()
		}
	}
	inv := sys.Phones
	if inv == nil {
		if inv, d.closePhones, err = buildPhones(ctx, cfg, serverLost, d.log); err != nil {
			return nil, err
		}
	}
	d.inv = inv
	// Phone facts and resting phones (docs/capture.md).
	d.watch = NewPhoneWatch(inv, cfg.Phones, d.log.With().Str("component", "phones").Logger())
	if sys.Registry != nil {
		if err := d.watch.Register(sys.Registry); err != nil {
			return nil, err
		}
	}
	if d.recovery, err = NewRecovery(inv, cfg.Phones.Recovery, sys.Registry, d.log); err != nil {
		return nil, err
	}
	rec.Store(d.recovery)
	if cfg.Status.Listen != "" {
		if d.status, err = ListenStatus(cfg.Status.Listen); err != nil {
			return nil, fmt.Errorf("status endpoint (status.listen): %w", err)
		}
	}
	dial := sys.DialNATS
	if dial == nil {
		dial = func(opts ...nats.Option) (*nats.Conn, error) {
			return natsconn.Connect(cfg.NATS, natsconn.Options{Log: d.log, Extra: opts})
		}
	}
	d.nc, err = dial(nats.Name("edgeagent "+cfg.AgentID), nats.CustomInboxPrefix(protocol.InboxPrefix(cfg.AgentID)), nats.ReconnectBufSize(-1))
	if err != nil {
		return nil, err
	}
	spool := d.spool
	phones := InventoryPhones(inv, captureDir, capture.OpLogOptions{})
	phones.(*invPhones).rec = d.recovery
	d.agent, err = New(Options{
		AgentID: cfg.AgentID, Version: sys.Version, Conn: d.nc, Phones: phones,
		Store: spool, Slots: cfg.Jobs.Concurrency, SafetyMargin: cfg.Lease.SafetyMargin.Duration(),
		RequestTimeout: cfg.NATS.RequestTimeout.Duration(), Log: sys.Log, LogLevel: sys.LogLevel,
		StateDir: cfg.StateDir, UploadMode: cfg.Storage.Mode, Registry: sys.Registry,
		GuardCheckInterval: sys.GuardCheckInterval, WallClock: sys.WallClock, Update: update,
		// The stop path drops what the spool holds of the stopped token.
		OnStop: func(tok fencing.Token, _ error) {
			dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := spool.DropGeneration(dctx, tok); err != nil {
				d.log.Warn().Err(err).Str("job_id", tok.JobID).Str("owner", tok.Owner).Int64("generation", tok.Generation).Msg("drop spooled uploads")
			}
		},
	})
	if err != nil {
		return nil, err
	}
	ag.Store(d.agent)
	if d.sleepM, err = newSleepMetrics(sys.Registry); err != nil {
		return nil, err
	}
	// Uploads spooled by previous boots carry stale tokens: drop them.
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	d.recovered, d.recoverErr = spool.Recover(rctx, d.agent.Owner())
	cancel()
	if d.recoverErr != nil {
		d.log.Warn().Err(d.recoverErr).Msg("recover upload spool")
	}
	return d, nil
}

// Agent returns the agent core.
func (d *Daemon) Agent() *Agent { return d.agent }

// Spool returns the upload spool the agent stores artifacts through.
func (d *Daemon) Spool() *uploader.Spool { return d.spool }

// Recovered returns what the spool's recovery at start dropped, and its
// error.
func (d *Daemon) Recovered() (uploader.RecoverReport, error) { return d.recovered, d.recoverErr }

// StatusAddr returns the status endpoint's address, nil when none is
// served.
func (d *Daemon) StatusAddr() net.Addr {
	if d.status == nil {
		return nil
	}
	return d.status.Addr()
}

// Run runs the agent until ctx is cancelled or hardStop is closed.
// Cancelling ctx drains it: no new jobs, running jobs get
// jobs.shutdown_timeout to finish, the rest are released with a fenced fail
// so the coordinator reassigns them at once. Closing hardStop (even during
// the drain) stops every job at once, with no further call. Run returns an
// error when the coordinator refuses the agent or the agent fails; a drain
// or a hard stop returns nil.
func (d *Daemon) Run(ctx context.Context, hardStop <-chan struct{}) error {
	a := d.agent
	addr := ""
	if d.status != nil {
		addr = d.status.Addr().String()
	}
	d.log.Info().Str("boot_id", a.BootID()).Str("state_dir", d.cfg.StateDir).Str("status", addr).Msg("agent starting")

	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	var wg sync.WaitGroup
	defer wg.Wait()
	if d.status != nil {
		l := d.status
		wg.Go(func() {
			if err := a.ServeStatus(runCtx, l); err != nil {
				d.log.Error().Err(err).Msg("status endpoint stopped")
			}
		})
	}
	d.watch.OnChange(a.kickHello)
	wg.Go(func() { d.watch.Run(runCtx) })
	d.recovery.notify(a.kickHello, func(serials []string) {
		a.noteError(protocol.RungHubDrop, "", fmt.Errorf("hub drop: %d phones dropped within %s: %s", len(serials), HubWindow, strings.Join(serials, ", ")))
	})
	wg.Go(func() { d.recovery.Run(runCtx) })
	d.startInhibitor(runCtx, &wg)
	runErr := make(chan error, 1)
	wg.Go(func() { runErr <- a.Run(runCtx) })

	select {
	case err := <-runErr:
		stopRun()
		return err
	case <-hardStop:
	case <-ctx.Done():
	}
	select {
	case <-hardStop: // also when both came at once
		d.log.Warn().Msg("stopping at once: running jobs are cut short")
		stopRun()
		return <-runErr
	default:
	}
	timeout := d.cfg.Jobs.ShutdownTimeout.Duration()
	d.log.Info().Dur("shutdown_timeout", timeout).Msg("draining: no new jobs; waiting for running jobs (signal again to stop at once)")
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	hard := make(chan struct{})
	go func() {
		select {
		case <-hardStop:
			// Stopping Run stops every job with no further call; Shutdown
			// then sees them gone. (Cancelling sctx instead would release
			// them, which is a call.)
			d.log.Warn().Msg("stopping at once: running jobs are cut short")
			close(hard)
			stopRun()
		case <-sctx.Done():
		}
	}()
	if err := a.Shutdown(sctx); err != nil {
		select {
		case <-hard:
		default:
			d.log.Warn().Dur("shutdown_timeout", timeout).Msg("running jobs outlasted the shutdown timeout and were released")
		}
	}
	stopRun()
	return <-runErr
}

// Close releases what NewDaemon took: the NATS connection, the phones, the
// status endpoint and the state directory's lock. Closing a running daemon
// cuts it off as a killed process would be; Run still has to return.
func (d *Daemon) Close() {
	d.closeOnce.Do(func() {
		if d.nc != nil {
			d.nc.Close()
		}
		d.closePhones()
		if d.status != nil {
			d.status.Close()
		}
		if d.lock != nil {
			d.lock.Unlock()
		}
	})
}

// S3Options are the options of the direct-mode uploader for cfg: the one
// place where storage settings become uploader options, for the agent's
// uploads and for `edgeagent doctor`'s check alike. tempDir holds the
// uploader's spool files of bodies it cannot seek.
func S3Options(cfg *config.Agent, tempDir string) uploader.S3Options {
	s := cfg.Storage
	return uploader.S3Options{
		Endpoint: s.Endpoint, Secure: s.Secure, Region: s.Region,
		Bucket: s.Bucket, AccessKey: s.AccessKey, SecretKey: s.SecretKey.Value(),
		PartSize: s.PartSize.Int64(), Parallelism: s.Parallelism, TempDir: tempDir,
		BytesPerSecond: s.BandwidthLimit.Int64(),
	}
}

// buildStorage returns the uploader the agent stores artifacts with: the
// on-disk upload spool (spoolDir/uploads) in front of the bucket (direct
// mode) or of presigned PUTs authorised by the coordinator (presigned
// mode, through authorize).
func buildStorage(cfg *config.Agent, spoolDir string, authorize uploader.Authorize, m *uploader.Metrics, hooks StorageHooks, log zerolog.Logger) (*uploader.Spool, error) {
	var up uploader.Uploader
	switch cfg.Storage.Mode {
	case config.StorageDirect:
		o := S3Options(cfg, spoolDir)
		o.Metrics = m
		if hooks.S3 != nil {
			hooks.S3(&o)
		}
		s3, err := uploader.NewS3(o)
		if err != nil {
			return nil, fmt.Errorf("set up storage: %w", err)
		}
		up = s3
	case config.StoragePresigned:
		p, err := uploader.NewPresigned(authorize, uploader.PresignedOptions{
			TempDir: spoolDir, BytesPerSecond: cfg.Storage.BandwidthLimit.Int64(), Metrics: m,
		})
		if err != nil {
			return nil, fmt.Errorf("set up presigned uploads: %w", err)
		}
		up = p
	default:
		return nil, fmt.Errorf("set up storage: unknown storage.mode %q", cfg.Storage.Mode)
	}
	if hooks.Wrap != nil {
		up = hooks.Wrap(up)
	}
	so := uploader.SpoolOptions{Log: log, Metrics: m}
	if hooks.Spool != nil {
		hooks.Spool(&so)
	}
	sp, err := uploader.NewSpool(filepath.Join(spoolDir, "uploads"), up, so)
	if err != nil {
		return nil, fmt.Errorf("set up upload spool: %w", err)
	}
	return sp, nil
}

// buildPhones returns the phones the config offers and a function that
// releases them. It is the one place where phone backends are wired in:
// simulated phones from the config (devices[].simulated) for labs and
// tests, and the adb backend for real phones.
func buildPhones(ctx context.Context, cfg *config.Agent, serverLost func(), log zerolog.Logger) (*capture.Inventory, func(), error) {
	sims := cfg.SimulatedDevices()
	var inv *capture.Inventory
	closeInv := func() {}
	if cfg.NeedsADB() {
		// Listed adb phones are the only ones offered; no list offers
		// every phone the adb server reports.
		tags := map[string][]string{}
		var serials []string
		for _, d := range cfg.ADBDevices() {
			serials = append(serials, d.Serial)
			if len(d.Tags) > 0 {
				tags[d.Serial] = d.Tags
			}
		}
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var err error
		// The agent's own adb server (adb.server_port), started and
		// supervised here (docs/operations.md, The agent's own adb server).
		var own *capture.ADBServer
		if cfg.ADB.ServerPort != 0 {
			own, err = capture.StartADBServer(actx, capture.ADBServerOptions{
				Port: cfg.ADB.ServerPort, ADBPath: cfg.ADB.Path, KeysDir: cfg.ADB.KeysDir,
				Log: log.With().Str("component", "adb-server").Logger(), OnRestart: serverLost,
			})
			if err != nil {
				return nil, nil, fmt.Errorf("adb.server_port: %w", err)
			}
		}
		inv, closeInv, err = capture.NewADBInventory(actx, capture.ADBOptions{
			Address: cfg.ADB.ServerAddress(), ADBPath: cfg.ADB.Path, NoStart: own != nil, OnServerLost: serverLost, Tags: tags, Serials: serials,
			Connect: cfg.Phones.Connect, OpTimeout: cfg.Phones.OpTimeout.Duration(),
			Log: log.With().Str("component", "capture").Logger(),
		})
		if err != nil {
			if own != nil {
				own.Close()
			}
			return nil, nil, fmt.Errorf("connect to the adb server at %s (adb.address; install adb or set adb.path): %w", cfg.ADB.ServerAddress(), err)
		}
		if own != nil {
			closeTracker := closeInv
			closeInv = func() { closeTracker(); own.Close() }
		}
	} else {
		inv = capture.NewInventory()
	}
	for _, d := range sims {
		if err := inv.Add(capture.NewSimulated(capture.SimOptions{Serial: d.Serial, Tags: d.Tags, IME: d.IME})); err != nil {
			closeInv()
			return nil, nil, fmt.Errorf("add simulated phone %s: %w", d.Serial, err)
		}
		log.Info().Str("serial", d.Serial).Msg("simulated phone added")
	}
	// iPhones, through the WebDriverAgent on each (docs/capture.md,
	// iPhones): the watcher adds them and keeps their state current.
	if ios := cfg.IOSDevices(); len(ios) > 0 {
		phones := make([]capture.IOSPhone, 0, len(ios))
		for _, d := range ios {
			phones = append(phones, capture.IOSPhone{UDID: d.UDID, WDAURL: d.WDAURL, Tags: d.Tags})
		}
		stopIOS, err := capture.WatchIOS(ctx, inv, phones, capture.IOSOptions{
			OpTimeout: cfg.Phones.OpTimeout.Duration(), Log: log.With().Str("component", "ios").Logger(),
		})
		if err != nil {
			closeInv()
			return nil, nil, fmt.Errorf("devices: %w", err)
		}
		prev := closeInv
		closeInv = func() { stopIOS(); prev() }
		log.Info().Int("iphones", len(phones)).Msg("iPhones added; their WebDriverAgents are probed")
	}
	return inv, closeInv, nil
}

// beginUpdate reads the update record at start (selfupdate.Begin) and
// returns the agent's update options from cfg. A binary on trial that
// must give way to the previous one has put it back: the error is
// ErrUpdateRestart.
func beginUpdate(cfg *config.Agent, sys System, log zerolog.Logger) (UpdateOptions, error) {
	o := UpdateOptions{Auto: cfg.Update.Auto, DrainTimeout: cfg.Update.DrainTimeout.Duration(), Executable: sys.Executable}
	if cfg.Update.PublicKey != "" {
		key, err := protocol.ParseReleaseKey(cfg.Update.PublicKey)
		if err != nil {
			return o, fmt.Errorf("update.public_key: %w", err)
		}
		o.PublicKey = key
	}
	if sys.Executable == "" {
		return o, nil
	}
	trial, err := selfupdate.Begin(cfg.StateDir, sys.Executable, sys.Version, cfg.Update.HealthTimeout.Duration(), time.Now())
	o.Trial = trial
	switch {
	case errors.Is(err, selfupdate.ErrRolledBack):
		log.Error().Str("version", sys.Version).Str("reason", trial.Record.Outcome).Int("exit_code", ExitUpdate).
			Msg("update: this binary did not come up healthy; the previous one is back in place, exiting so that the service manager starts it")
		return o, ErrUpdateRestart
	case err != nil:
		// The update record is advice: the agent runs without it.
		log.Warn().Err(err).Msg("update record")
	case trial.OnTrial:
		log.Info().Str("from", trial.Record.From).Int("start", trial.Record.Starts).Time("deadline", trial.Deadline).
			Msg("update: this binary is on trial until the coordinator accepts its hello")
	}
	return o, nil
}
