package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// Store drivers.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// CoordConfig is the coordinator a scenario runs against.
type CoordConfig struct {
	LeaseTTL         time.Duration
	ReapInterval     time.Duration
	ScheduleInterval time.Duration
	HeartbeatEvery   time.Duration
	OfflineAfter     time.Duration
	// LogLevel of the coordinator's log, written to a file in the run's
	// directory (the cost of logging is part of what is measured).
	LogLevel zerolog.Level
}

// config returns the config of a coordinator with cc's timing on the NATS
// server at url, without a metrics endpoint.
func (cc CoordConfig) config(url string) *config.Coordinator {
	cfg := config.DefaultCoordinator()
	cfg.CoordinatorID = "bench-coord"
	cfg.NATS.URL = url
	cfg.Lease.TTL = config.Duration(cc.LeaseTTL)
	cfg.Lease.ReapInterval = config.Duration(cc.ReapInterval)
	cfg.Scheduler.Interval = config.Duration(cc.ScheduleInterval)
	cfg.Agents.Heartbeat = config.Duration(cc.HeartbeatEvery)
	cfg.Agents.OfflineAfter = config.Duration(cc.OfflineAfter)
	// The benchmarks measure the coordinator at full speed: one bench
	// agent sends far more than a real agent's request budget.
	cfg.Agents.RequestRate, cfg.Agents.RequestBurst = 1<<30, 1<<30
	cfg.Metrics.Listen = ""
	return cfg
}

// storeConfig is the store section for driver and dsn (a PostgreSQL URL, or
// an SQLite file).
func storeConfig(driver, dsn string) config.Store {
	if driver == DriverPostgres {
		return config.Store{Driver: config.StorePostgres, DSN: config.Secret(dsn)}
	}
	return config.Store{Driver: driver, Path: dsn}
}

// Common are the settings every scenario shares.
type Common struct {
	// Dir is the working directory (SQLite files, logs, profiles); a
	// temporary directory when empty, removed at the end.
	Dir string
	// Postgres is the server PostgreSQL runs use; nil skips them.
	Postgres *Postgres
	// CoordCommand, when set, runs the coordinator of the commit and
	// capacity scenarios as a separate process: it returns the command
	// that runs ServeCoordinator with args (edgelab bench coordinator).
	// Nil runs it in this process.
	CoordCommand func(args ...string) *exec.Cmd
	// ProfileDir, when set, receives a CPU profile of the coordinator of
	// each run (coordinator-<scenario>-<store>.pprof).
	ProfileDir string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

func (c *Common) logf(format string, a ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "# "+format+"\n", a...)
	}
}

// system is NATS, a fresh store and a coordinator.
type system struct {
	common *Common
	dir    string
	tmp    bool
	NATS   *server.Server
	Driver string
	DSN    string // postgres DSN or SQLite path
	Store  sqlstore.Lab
	dropDB func()

	Coord     *coordinator.Server // in-process only
	coordD    *coordinator.Daemon
	coordStop context.CancelFunc
	coordDone chan error
	proc      *exec.Cmd // separate process
	procDone  chan error
	logFile   *os.File

	mu    sync.Mutex
	conns []*nats.Conn
}

// Where a system's coordinator runs.
const (
	coordNone      = iota // no coordinator
	coordInProcess        // in this process
	coordSeparate         // in a process of its own when CoordCommand is set, else in this one
)

// startSystem brings up NATS, a fresh database of driver and a
// coordinator where mode says.
func startSystem(ctx context.Context, c *Common, name, driver string, cc CoordConfig, mode int) (_ *system, err error) {
	s := &system{common: c, Driver: driver}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if c.Dir != "" {
		s.dir = filepath.Join(c.Dir, name+"-"+driver)
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return nil, fmt.Errorf("start system: %w", err)
		}
	} else {
		if s.dir, err = os.MkdirTemp("", "edgebench-"); err != nil {
			return nil, fmt.Errorf("start system: %w", err)
		}
		s.tmp = true
	}
	s.NATS, err = server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, MaxPayload: 8 << 20})
	if err != nil {
		return nil, fmt.Errorf("start nats server: %w", err)
	}
	go s.NATS.Start()
	if !s.NATS.ReadyForConnections(10 * time.Second) {
		return nil, errors.New("start nats server: not ready")
	}
	switch driver {
	case DriverSQLite:
		s.DSN = filepath.Join(s.dir, "edgecoord.db")
		_ = os.Remove(s.DSN)
		st, err := sqlitestore.Open(ctx, s.DSN)
		if err != nil {
			return nil, fmt.Errorf("open sqlite store: %w", err)
		}
		s.Store = st
	case DriverPostgres:
		if c.Postgres == nil {
			return nil, errors.New("start system: no postgres server")
		}
		if s.DSN, s.dropDB, err = c.Postgres.CreateDatabase(ctx); err != nil {
			return nil, err
		}
		st, err := pgstore.Open(ctx, s.DSN+dsnSep(s.DSN)+"pool_max_conns=8")
		if err != nil {
			return nil, fmt.Errorf("open postgres store: %w", err)
		}
		s.Store = st
	default:
		return nil, fmt.Errorf("start system: unknown store %q", driver)
	}
	if s.logFile, err = os.Create(filepath.Join(s.dir, "coordinator.log")); err != nil {
		return nil, fmt.Errorf("start system: %w", err)
	}
	prof := ""
	if c.ProfileDir != "" {
		prof = filepath.Join(c.ProfileDir, fmt.Sprintf("coordinator-%s-%s.pprof", name, driver))
	}
	switch {
	case mode == coordNone:
	case mode == coordSeparate && c.CoordCommand != nil:
		err = s.startProc(ctx, cc, prof)
	default:
		err = s.startInProcess(ctx, cc, prof)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

func dsnSep(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if strings.Contains(dsn, "?") {
			return "&"
		}
		return "?"
	}
	return " "
}

// coordArgs are the flags of ServeCoordinator for this system.
func (s *system) coordArgs(cc CoordConfig, prof string) []string {
	args := []string{
		"-nats", s.NATS.ClientURL(), "-store", s.Driver, "-dsn", s.DSN,
		"-lease-ttl", cc.LeaseTTL.String(), "-reap-interval", cc.ReapInterval.String(),
		"-schedule-interval", cc.ScheduleInterval.String(), "-heartbeat", cc.HeartbeatEvery.String(),
		"-offline-after", cc.OfflineAfter.String(), "-log-level", cc.LogLevel.String(),
	}
	if prof != "" {
		args = append(args, "-cpuprofile", prof)
	}
	return args
}

func (s *system) startProc(ctx context.Context, cc CoordConfig, prof string) error {
	cmd := s.common.CoordCommand(s.coordArgs(cc, prof)...)
	cmd.Stderr = s.logFile
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("start coordinator process: %w", err)
	}
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start coordinator process: %w", err)
	}
	s.proc = cmd
	s.procDone = make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "ready" {
				once.Do(func() { close(ready) })
			}
		}
		s.procDone <- cmd.Wait()
	}()
	select {
	case <-ready:
		return nil
	case err := <-s.procDone:
		s.proc = nil
		return fmt.Errorf("coordinator process exited before serving: %v (see %s)", err, s.logFile.Name())
	case <-time.After(30 * time.Second):
		return errors.New("coordinator process not serving after 30s")
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *system) startInProcess(ctx context.Context, cc CoordConfig, prof string) error {
	if prof != "" {
		// A CPU profile of this process would profile the load generator
		// too; only a separate coordinator process is profiled.
		s.common.logf("in-process coordinator: no CPU profile written")
	}
	log := zerolog.New(s.logFile).Level(cc.LogLevel).With().Timestamp().Logger()
	d, err := coordinator.NewDaemon(cc.config(s.NATS.ClientURL()), coordinator.System{Store: s.Store, Log: log})
	if err != nil {
		return fmt.Errorf("start coordinator: %w", err)
	}
	s.coordD = d
	s.Coord = d.Server()
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.coordStop = cancel
	s.coordDone = make(chan error, 1)
	go func() { s.coordDone <- d.Run(cctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, bad := s.Coord.Ready(ctx)["service"]; !bad {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("coordinator not serving after 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// CoordPID is the pid of the coordinator process (this one when it runs
// in process).
func (s *system) CoordPID() int {
	if s.proc != nil {
		return s.proc.Process.Pid
	}
	return os.Getpid()
}

// Separate reports whether the coordinator runs in its own process.
func (s *system) Separate() bool { return s.proc != nil }

// SampleCoord samples the coordinator's process.
func (s *system) SampleCoord() ProcSample {
	if s.proc != nil {
		return SampleProc(s.proc.Process.Pid)
	}
	return SampleSelf()
}

// SampleDB samples the database server (throwaway PostgreSQL only).
func (s *system) SampleDB() ProcSample {
	if s.Driver == DriverPostgres && s.common.Postgres != nil {
		return s.common.Postgres.Sample()
	}
	return ProcSample{At: time.Now(), Desc: "in process"}
}

// Conn connects to NATS as agentID (its own inbox prefix), without a
// reconnect buffer as the agent does.
func (s *system) Conn(agentID string, url string) (*nats.Conn, error) {
	if url == "" {
		url = s.NATS.ClientURL()
	}
	nc, err := nats.Connect(url, nats.Name("bench "+agentID), nats.CustomInboxPrefix(protocol.InboxPrefix(agentID)),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.ReconnectBufSize(-1))
	if err != nil {
		return nil, fmt.Errorf("connect nats as %s: %w", agentID, err)
	}
	s.mu.Lock()
	s.conns = append(s.conns, nc)
	s.mu.Unlock()
	return nc, nil
}

// Kick asks the in-process coordinator to schedule now; a separate
// process schedules on its own interval and when agents report free
// slots.
func (s *system) Kick() {
	if s.Coord != nil {
		s.Coord.Kick()
	}
}

// StopCoord stops the coordinator (and, for a separate process, waits for
// its profile to be written).
func (s *system) StopCoord() error {
	var err error
	if s.proc != nil {
		_ = s.proc.Process.Signal(syscall.SIGTERM)
		select {
		case err = <-s.procDone:
		case <-time.After(30 * time.Second):
			_ = s.proc.Process.Kill()
			err = <-s.procDone
		}
		s.proc = nil
	}
	if s.coordStop != nil {
		s.coordStop()
		err = <-s.coordDone
		s.coordStop = nil
		s.coordD.Close()
	}
	return err
}

// Close stops everything and removes what the run created.
func (s *system) Close() {
	_ = s.StopCoord()
	s.mu.Lock()
	for _, nc := range s.conns {
		nc.Close()
	}
	s.conns = nil
	s.mu.Unlock()
	if s.Store != nil {
		s.Store.Close()
	}
	if s.dropDB != nil {
		s.dropDB()
	}
	if s.NATS != nil {
		s.NATS.Shutdown()
		s.NATS.WaitForShutdown()
	}
	if s.logFile != nil {
		s.logFile.Close()
	}
	if s.tmp {
		os.RemoveAll(s.dir)
	}
}

// workDir returns c.Dir, created, or a new temporary directory named after
// the scenario; done removes the temporary one.
func (c *Common) workDir(scenario string) (dir string, done func(), err error) {
	if c.Dir != "" {
		return c.Dir, func() {}, os.MkdirAll(c.Dir, 0o700)
	}
	tmp, err := os.MkdirTemp("", "edgebench-"+scenario+"-")
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

// openStore opens a fresh store of driver for one run: a new database on
// c.Postgres, or the SQLite file name in dir. It returns nil when the
// driver is PostgreSQL and no server is set (the run is skipped). done
// closes the store and drops its database.
func (c *Common) openStore(ctx context.Context, driver, dir, name string) (st jobstore.Store, done func(), err error) {
	switch driver {
	case DriverPostgres:
		if c.Postgres == nil {
			return nil, func() {}, nil
		}
		dsn, drop, err := c.Postgres.CreateDatabase(ctx)
		if err != nil {
			return nil, nil, err
		}
		s, err := pgstore.Open(ctx, dsn)
		if err != nil {
			drop()
			return nil, nil, err
		}
		return s, func() { s.Close(); drop() }, nil
	case DriverSQLite:
		s, err := sqlitestore.Open(ctx, filepath.Join(dir, name))
		if err != nil {
			return nil, nil, err
		}
		return s, func() { s.Close() }, nil
	}
	return nil, nil, fmt.Errorf("unknown store %q", driver)
}
