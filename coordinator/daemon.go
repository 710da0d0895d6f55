package coordinator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/outbox"
	"github.com/edgeagent/edgeagent/internal/natsconn"
)

// NATSDialer connects the coordinator to NATS. opts are what the
// coordinator needs of its connection, and the dialer must apply them: the
// client name and the coordinator's inbox prefix.
type NATSDialer func(opts ...nats.Option) (*nats.Conn, error)

// System is what a Daemon is built from besides its config: the
// dependencies a caller provides or injects in place of those the config
// describes. `edgecoord serve` opens the configured store (OpenStore) and
// leaves the rest to the config; the chaos harness, the benchmarks and the
// lab inject their stores and links.
type System struct {
	// Store is the job store. Required; the daemon does not close it.
	Store jobstore.Store
	// DialNATS connects to NATS; default natsconn.Connect with cfg.NATS.
	DialNATS NATSDialer
	// Presigner, when set, replaces the one cfg.Storage describes.
	Presigner Presigner
	// Log is the root logger.
	Log zerolog.Logger
	// Version is announced by the micro service; default "dev".
	Version string
	// API builds the HTTP API handler served on api.listen (package
	// coordinator/api); required when api.listen is set.
	API APIFactory
	// Schedules builds the loop that fires recurring schedules (package
	// coordinator/schedule/firing, docs/schedules.md), run beside the
	// server; nil runs none.
	Schedules ScheduleLoop
}

// ScheduleLoop builds the schedule loop of a daemon: NewDaemon calls it
// once the daemon is connected, and Run runs what it returns until its
// context ends.
type ScheduleLoop func(d *Daemon) (func(ctx context.Context) error, error)

// Daemon is the coordinator as a process runs it: the Server on its NATS
// connection with the store, the presigner and the outbox the config
// describes, and the metrics and health endpoint when metrics.listen is
// set. Build it with NewDaemon, run it, then Close it.
type Daemon struct {
	cfg *config.Coordinator
	log zerolog.Logger
	srv *Server
	nc  *nats.Conn

	api       http.Handler                    // served on cfg.API.Listen; nil when unset
	schedules func(ctx context.Context) error // the schedule loop; nil when none

	mu        sync.Mutex
	httpAddr  net.Addr
	apiAddr   net.Addr
	closeOnce sync.Once
}

// NewDaemon builds the coordinator of cfg on sys.Store: it builds the
// presigner (when storage is configured), connects to NATS and sets up the
// outbox (NATS subject or HTTP endpoint, when one is configured).
func NewDaemon(cfg *config.Coordinator, sys System) (*Daemon, error) {
	if cfg == nil {
		return nil, errors.New("new coordinator daemon: no config")
	}
	if sys.Store == nil {
		return nil, errors.New("new coordinator daemon: no store")
	}
	if sys.Version == "" {
		sys.Version = "dev"
	}
	opts, err := serverOptions(cfg, sys)
	if err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, log: sys.Log}
	dial := sys.DialNATS
	if dial == nil {
		dial = func(opts ...nats.Option) (*nats.Conn, error) {
			return natsconn.Connect(cfg.NATS, natsconn.Options{Log: sys.Log, Extra: opts})
		}
	}
	nc, err := dial(nats.Name("edgecoord "+cfg.CoordinatorID), nats.CustomInboxPrefix(InboxPrefix))
	if err != nil {
		return nil, err
	}
	d.nc = nc
	opts.Outbox = outboxOptions(cfg.Outbox, nc)
	d.srv = New(nc, sys.Store, opts)
	if cfg.API.Listen != "" {
		if sys.API == nil {
			nc.Close()
			return nil, errors.New("new coordinator daemon: api.listen is set but no API was given")
		}
		h, err := sys.API(d)
		if err != nil {
			nc.Close()
			return nil, err
		}
		d.api = h
	}
	if sys.Schedules != nil {
		run, err := sys.Schedules(d)
		if err != nil {
			nc.Close()
			return nil, err
		}
		d.schedules = run
	}
	return d, nil
}

// serverOptions maps the config to the server's options, with the
// presigner of sys or of cfg.Storage (none when storage is not configured);
// the outbox, which needs the connection, is set by NewDaemon.
func serverOptions(cfg *config.Coordinator, sys System) (Options, error) {
	p := sys.Presigner
	if p == nil && cfg.Storage.Enabled() {
		var err error
		p, err = NewS3Presigner(s3Options(cfg.Storage))
		if err != nil {
			return Options{}, err
		}
	}
	var exports ExportOptions
	if cfg.Storage.Enabled() && cfg.Exports.Enabled() {
		b, err := NewS3Bucket(s3Options(cfg.Storage))
		if err != nil {
			return Options{}, err
		}
		exports = ExportOptions{Bucket: b, Every: cfg.Exports.Every.Duration(), After: cfg.Exports.After.Duration(), FileRows: cfg.Exports.FileRows}
	}
	return Options{
		ID: cfg.CoordinatorID, Version: sys.Version, LeaseTTL: cfg.Lease.TTL.Duration(),
		ReapInterval: cfg.Lease.ReapInterval.Duration(), ScheduleInterval: cfg.Scheduler.Interval.Duration(),
		HeartbeatEvery: cfg.Agents.Heartbeat.Duration(), OfflineAfter: cfg.Agents.OfflineAfter.Duration(),
		AssignTimeout: cfg.NATS.RequestTimeout.Duration(),
		RequestRate:   cfg.Agents.RequestRate, RequestBurst: cfg.Agents.RequestBurst,
		Presigner: p, PresignExpiry: cfg.Storage.PresignExpiry.Duration(),
		ProjectLimits: cfg.ProjectLimits(), DefaultProjectLimit: cfg.Jobs.DefaultMaxRunning,
		Phones:  NewPhoneRule(cfg.ProjectPhones()),
		Retry:   RetryPolicyOf(cfg.Jobs),
		Exports: exports,
		Log:     sys.Log,
	}, nil
}

// s3Options are the bucket and credentials of the storage section.
func s3Options(s config.CoordinatorStorage) S3Options {
	return S3Options{
		Endpoint: s.Endpoint, Secure: s.Secure, Region: s.Region, Bucket: s.Bucket,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey.Value(),
	}
}

// outboxOptions maps the outbox section of the config to the
// coordinator's options: results are published to the NATS subject (over
// the coordinator's own connection nc) or the HTTP endpoint; nothing when
// neither is set.
func outboxOptions(o config.CoordinatorOutbox, nc *nats.Conn) outbox.Options {
	timeout := o.Timeout.Duration()
	switch {
	case o.Subject != "":
		return outbox.Options{Sender: outbox.NATSSender{Conn: nc, Subject: o.Subject}, Timeout: timeout}
	case o.URL != "":
		return outbox.Options{Sender: outbox.HTTPSender{URL: o.URL, Client: &http.Client{Timeout: timeout}}, Timeout: timeout}
	}
	return outbox.Options{}
}

// Server returns the coordinator's server.
func (d *Daemon) Server() *Server { return d.srv }

// MetricsAddr returns the address the metrics and health endpoint listens
// on while Run serves it, nil otherwise.
func (d *Daemon) MetricsAddr() net.Addr {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.httpAddr
}

// Run serves until ctx is cancelled: the NATS service, the scheduler and
// the reaper, the metrics and health endpoint (/metrics, /healthz,
// /readyz) when metrics.listen is set, and the HTTP API when api.listen is
// set (shut down gracefully); a failing endpoint stops the whole,
// since a coordinator without it is not what was configured. Run may be
// called again after it returned.
func (d *Daemon) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		httpErr error
	)
	if l := d.cfg.Metrics.Listen; l != "" {
		ln, err := net.Listen("tcp", l)
		if err != nil {
			return fmt.Errorf("listen for metrics: %w", err)
		}
		d.mu.Lock()
		d.httpAddr = ln.Addr()
		d.mu.Unlock()
		d.log.Info().Str("listen", ln.Addr().String()).Msg("serving /metrics, /healthz and /readyz")
		wg.Go(func() {
			if err := d.srv.ServeHTTP(ctx, ln); err != nil {
				httpErr = err
				cancel()
			}
		})
	}
	var apiErr error
	if d.api != nil {
		ln, err := d.listenAPI()
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		d.mu.Lock()
		d.apiAddr = ln.Addr()
		d.mu.Unlock()
		d.log.Info().Str("listen", ln.Addr().String()).Bool("tls", d.cfg.API.TLS()).Msg("serving the HTTP API under /api/v1/")
		wg.Go(func() {
			if err := d.serveAPI(ctx, ln); err != nil {
				apiErr = err
				cancel()
			}
		})
	}
	if d.schedules != nil {
		wg.Go(func() {
			if err := d.schedules(ctx); err != nil {
				d.log.Error().Err(err).Msg("schedule loop stopped")
			}
		})
	}
	err := d.srv.Run(ctx)
	cancel()
	wg.Wait()
	d.mu.Lock()
	d.httpAddr, d.apiAddr = nil, nil
	d.mu.Unlock()
	return errors.Join(err, httpErr, apiErr)
}

// Close closes the NATS connection. The store is the caller's.
func (d *Daemon) Close() {
	d.closeOnce.Do(func() { d.nc.Close() })
}
