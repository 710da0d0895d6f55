package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/schedule/firing"
)

// ── Coordinators ────────────────────────────────────────────────────────

type coordSlot struct {
	r   *run
	idx int

	mu   sync.Mutex
	inst *coordInst
	n    int
}

type coordInst struct {
	name   string
	srv    *coordinator.Server
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *coordSlot) current() *coordInst {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inst
}

// start runs a new coordinator process in the background: it opens its own
// store handle and NATS connection (retrying while they are down) and
// serves until stopped.
func (s *coordSlot) start() {
	r := s.r
	s.mu.Lock()
	s.n++
	name := fmt.Sprintf("coord-%d.%d", s.idx, s.n)
	ctx, cancel := context.WithCancel(context.Background())
	inst := &coordInst{name: name, cancel: cancel, done: make(chan struct{})}
	s.inst = inst
	s.mu.Unlock()
	log := r.opts.Log.With().Int64("seed", r.plan.Seed).Str("process", name).Logger()
	go func() {
		defer close(inst.done)
		var raw jobstore.Store
		for {
			octx, ocancel := context.WithTimeout(ctx, 5*time.Second)
			st, err := r.openStore(octx)
			ocancel()
			if err == nil {
				raw = st
				break
			}
			if !sleepCtx(ctx, 25*time.Millisecond) {
				return
			}
		}
		defer raw.Close()
		var st jobstore.Store = raw
		if r.opts.WrapStore != nil {
			st = r.opts.WrapStore(st)
		}
		faulty := &faultyStore{Store: st, f: &r.storeF}
		rs := &recordingStore{Store: faulty, client: name, rec: r.rec}
		st = rs
		var loop coordinator.ScheduleLoop
		if _, ok := faulty.Store.(jobstore.ScheduleStore); ok {
			// The schedule loop of the process, its store calls recorded.
			st = &recordingSchedules{recordingStore: rs, ss: faulty}
			loop = firing.ForDaemon(r.coordConfig(name), st, log)
		}
		d, err := coordinator.NewDaemon(r.coordConfig(name), coordinator.System{
			Store: st, Log: log, Version: "chaos", Schedules: loop,
			DialNATS: func(opts ...nats.Option) (*nats.Conn, error) {
				// Every node, its home node first: it reconnects to
				// another when that one goes down.
				return nats.Connect(r.natsURLs(r.coordHome(s.idx)), append(opts, nats.DontRandomize(), nats.MaxReconnects(-1),
					nats.ReconnectWait(20*time.Millisecond), nats.ReconnectJitter(0, 10*time.Millisecond),
					nats.RetryOnFailedConnect(true), nats.Timeout(time.Second), natsErrors(log))...)
			},
		})
		if err != nil {
			r.rec.note(name + " could not start: " + err.Error())
			return
		}
		defer d.Close()
		s.mu.Lock()
		inst.srv = d.Server()
		s.mu.Unlock()
		r.rec.note(name + " started")
		for {
			err := d.Run(ctx)
			if ctx.Err() != nil {
				return
			}
			r.rec.note(fmt.Sprintf("%s stopped: %v; starting again", name, err))
			if !sleepCtx(ctx, 25*time.Millisecond) {
				return
			}
		}
	}()
}

// coordConfig is the config of the coordinator process name: the
// schedule's timing, no metrics endpoint.
func (r *run) coordConfig(name string) *config.Coordinator {
	tm := r.tm
	cfg := config.DefaultCoordinator()
	cfg.CoordinatorID = name
	cfg.Lease.TTL = config.Duration(tm.ttl)
	cfg.Lease.ReapInterval = config.Duration(tm.reap)
	cfg.Scheduler.Interval = config.Duration(tm.schedule)
	cfg.Schedules.Interval = config.Duration(tm.schedule)
	cfg.Agents.Heartbeat = config.Duration(tm.heartbeat)
	cfg.Agents.OfflineAfter = config.Duration(tm.offline)
	cfg.NATS.RequestTimeout = config.Duration(tm.assign) // the assign timeout
	cfg.Metrics.Listen = ""
	// Retries wait a fraction of a lease, not the default seconds, so a
	// schedule's retried jobs run within it.
	cfg.Jobs.RetryBackoff = config.Duration(tm.ttl / 5)
	cfg.Jobs.RetryBackoffMax = config.Duration(tm.ttl)
	return cfg
}

// stop stops the running coordinator process and waits for it.
func (s *coordSlot) stop() {
	s.mu.Lock()
	inst := s.inst
	s.inst = nil
	s.mu.Unlock()
	if inst == nil {
		return
	}
	inst.cancel()
	<-inst.done
	s.r.rec.note(inst.name + " stopped")
}

func (s *coordSlot) server() *coordinator.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inst == nil {
		return nil
	}
	return s.inst.srv
}
