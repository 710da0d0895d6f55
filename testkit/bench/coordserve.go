package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/internal/cli"
)

// ServeCoordinator runs a coordinator in this process for a benchmark that
// runs it apart from its load (edgelab bench coordinator): it prints
// "ready" on stdout once it serves every verb, and stops when ctx is
// cancelled, writing its CPU profile when asked to. Its log goes to
// stderr.
func ServeCoordinator(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("edgelab bench coordinator", stderr)
	url := fs.String("nats", "", "NATS server URL")
	driver := fs.String("store", DriverSQLite, "store driver: sqlite or postgres")
	dsn := fs.String("dsn", "", "SQLite file or PostgreSQL URL")
	ttl := fs.Duration("lease-ttl", 30*time.Second, "lease TTL")
	reap := fs.Duration("reap-interval", time.Second, "reaper interval")
	sched := fs.Duration("schedule-interval", 500*time.Millisecond, "scheduler interval")
	hb := fs.Duration("heartbeat", 5*time.Second, "heartbeat interval asked of agents")
	offline := fs.Duration("offline-after", 15*time.Second, "agents silent this long get no jobs")
	level := fs.String("log-level", "info", "log level")
	prof := fs.String("cpuprofile", "", "write a CPU profile to `file`")
	if err := cli.ParseFlagsOnly(fs, args); err != nil {
		return err
	}
	lvl, err := zerolog.ParseLevel(*level)
	if err != nil {
		return fmt.Errorf("parse log level: %w", err)
	}
	log := zerolog.New(stderr).Level(lvl).With().Timestamp().Logger()
	cfg := CoordConfig{LeaseTTL: *ttl, ReapInterval: *reap, ScheduleInterval: *sched, HeartbeatEvery: *hb, OfflineAfter: *offline}.config(*url)
	cfg.Store = storeConfig(*driver, *dsn)
	store, err := coordinator.OpenStore(ctx, cfg.Store)
	if err != nil {
		return err
	}
	defer store.Close()
	d, err := coordinator.NewDaemon(cfg, coordinator.System{Store: store, Log: log})
	if err != nil {
		return err
	}
	defer d.Close()
	srv := d.Server()
	if *prof != "" {
		f, err := os.Create(*prof)
		if err != nil {
			return fmt.Errorf("create cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("start cpu profile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	for {
		if _, bad := srv.Ready(ctx)["service"]; !bad {
			break
		}
		select {
		case err := <-done:
			return fmt.Errorf("run coordinator: %w", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	fmt.Fprintln(stdout, "ready")
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("run coordinator: %w", err)
	}
	return nil
}
