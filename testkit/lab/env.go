package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/labs3"
	"github.com/edgeagent/edgeagent/uploader"
)

// Options configures an Env.
type Options struct {
	Dir      string        // working directory for the SQLite file; a temp dir when empty
	LeaseTTL time.Duration // default 5s
	Log      zerolog.Logger
}

// Env is a running lab system.
type Env struct {
	NATS  *server.Server
	Store *sqlitestore.Store
	S3    *labs3.Server
	Up    *uploader.S3
	Coord *coordinator.Server

	opts    Options
	dir     string
	daemons []interface{ Close() }
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	conns   []*nats.Conn
	tmp     string
	mu      sync.Mutex
	runErrs []error
}

// Start brings up NATS, the store, S3 and the coordinator.
func Start(ctx context.Context, opts Options) (_ *Env, err error) {
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 5 * time.Second
	}
	e := &Env{opts: opts}
	e.ctx, e.cancel = context.WithCancel(ctx)
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	dir := opts.Dir
	if dir == "" {
		if e.tmp, err = os.MkdirTemp("", "edgelab-"); err != nil {
			return nil, fmt.Errorf("start lab: %w", err)
		}
		dir = e.tmp
	}
	e.dir = dir
	e.NATS, err = server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		return nil, fmt.Errorf("start nats server: %w", err)
	}
	go e.NATS.Start()
	if !e.NATS.ReadyForConnections(10 * time.Second) {
		return nil, fmt.Errorf("start nats server: not ready")
	}
	if e.Store, err = sqlitestore.Open(e.ctx, filepath.Join(dir, "edgelab.db")); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if e.S3, err = labs3.Start(labs3.Options{}); err != nil {
		return nil, fmt.Errorf("start s3: %w", err)
	}
	if e.Up, err = uploader.NewS3(e.S3.UploaderOptions()); err != nil {
		return nil, fmt.Errorf("new uploader: %w", err)
	}
	cfg := config.DefaultCoordinator()
	cfg.CoordinatorID = "lab-coord"
	cfg.NATS.URL = e.NATS.ClientURL()
	cfg.Lease.TTL = config.Duration(opts.LeaseTTL)
	cfg.Lease.ReapInterval = config.Duration(200 * time.Millisecond)
	cfg.Scheduler.Interval = config.Duration(50 * time.Millisecond)
	cfg.Agents.Heartbeat = config.Duration(time.Second)
	cfg.Agents.OfflineAfter = config.Duration(3 * time.Second)
	cfg.Metrics.Listen = ""
	d, err := coordinator.NewDaemon(cfg, coordinator.System{Store: e.Store, DialNATS: e.dialer(), Log: opts.Log, Version: "lab"})
	if err != nil {
		return nil, fmt.Errorf("start coordinator: %w", err)
	}
	e.daemons = append(e.daemons, d)
	e.Coord = d.Server()
	e.goRun("coordinator", d.Run)
	return e, nil
}

func (e *Env) goRun(what string, f func(context.Context) error) {
	e.wg.Go(func() {
		if err := f(e.ctx); err != nil {
			e.mu.Lock()
			e.runErrs = append(e.runErrs, fmt.Errorf("%s: %w", what, err))
			e.mu.Unlock()
		}
	})
}

// dialer connects a daemon to the lab's NATS server.
func (e *Env) dialer() func(...nats.Option) (*nats.Conn, error) {
	return func(opts ...nats.Option) (*nats.Conn, error) {
		nc, err := nats.Connect(e.NATS.ClientURL(), opts...)
		if err != nil {
			return nil, fmt.Errorf("connect nats: %w", err)
		}
		return nc, nil
	}
}

// Conn connects to the lab's NATS server; agentID sets the inbox prefix.
func (e *Env) Conn(name, agentID string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name)}
	if agentID != "" {
		opts = append(opts, nats.CustomInboxPrefix(protocol.InboxPrefix(agentID)))
	}
	nc, err := nats.Connect(e.NATS.ClientURL(), opts...)
	if err != nil {
		return nil, fmt.Errorf("connect nats: %w", err)
	}
	e.conns = append(e.conns, nc)
	return nc, nil
}

// StartAgent runs an agent with the given simulated phones, its state
// directory in the lab's directory and its uploads going to the lab's S3.
func (e *Env) StartAgent(id string, phones ...*capture.Simulated) (*agent.Agent, error) {
	inv := capture.NewInventory()
	for _, p := range phones {
		if err := inv.Add(p); err != nil {
			return nil, err
		}
	}
	cfg := config.DefaultAgent()
	cfg.Sleep.Inhibit = false // an in-process agent never holds the PC awake
	cfg.AgentID = id
	cfg.StateDir = filepath.Join(e.dir, "agents", id)
	cfg.Lease.SafetyMargin = config.Duration(e.opts.LeaseTTL / 5)
	cfg.Jobs.Concurrency = max(1, len(phones))
	cfg.Storage.S3 = config.S3{Endpoint: e.S3.Endpoint, Region: e.S3.Region, Bucket: e.S3.Bucket, AccessKey: e.S3.AccessKey, SecretKey: config.Secret(e.S3.SecretKey)}
	cfg.Status.Listen = ""
	d, err := agent.NewDaemon(e.ctx, cfg, agent.System{DialNATS: e.dialer(), Phones: inv, Log: e.opts.Log, Version: "lab"})
	if err != nil {
		return nil, fmt.Errorf("start agent %s: %w", id, err)
	}
	e.daemons = append(e.daemons, d)
	// The lab's end stops the agent at once.
	e.goRun("agent "+id, func(ctx context.Context) error { return d.Run(ctx, ctx.Done()) })
	return d.Agent(), nil
}

// WaitJob polls the store until cond holds for the job or ctx ends.
func (e *Env) WaitJob(ctx context.Context, id string, cond func(jobstore.Job) bool) (jobstore.Job, error) {
	for {
		j, err := e.Store.Get(ctx, id)
		if err == nil && cond(j) {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, fmt.Errorf("wait for job %s: %w (status %s)", id, ctx.Err(), j.Status)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Close stops everything and removes the lab's temporary files.
func (e *Env) Close() error {
	e.cancel()
	e.wg.Wait()
	for _, d := range e.daemons {
		d.Close()
	}
	for _, nc := range e.conns {
		nc.Close()
	}
	if e.S3 != nil {
		e.S3.Close()
	}
	if e.Store != nil {
		e.Store.Close()
	}
	if e.NATS != nil {
		e.NATS.Shutdown()
		e.NATS.WaitForShutdown()
	}
	if e.tmp != "" {
		os.RemoveAll(e.tmp)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.runErrs) > 0 {
		return e.runErrs[0]
	}
	return nil
}
