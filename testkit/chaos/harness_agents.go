package chaos

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/uploader"
)

// ── Agents ──────────────────────────────────────────────────────────────

// wallClock is the wall clock an agent's lease guards read; a clock jump
// moves it.
type wallClock struct{ offset atomic.Int64 }

func (c *wallClock) Now() time.Time { return time.Now().Round(0).Add(time.Duration(c.offset.Load())) }

// trigger is a fault waiting for a message or a storage write of an agent.
type trigger struct {
	on    string // a verb (result, artifact, renew), "put" (any storage write) or "part" (a multipart part)
	fire  func(process, what string) Verdict
	fired chan struct{}
	done  bool
}

type agentSlot struct {
	r     *run
	idx   int
	id    string
	gate  pauseGate
	clock wallClock
	rnd   *lockedRand

	mu       sync.Mutex
	windows  map[int]MsgFaults
	triggers []*trigger
	inst     *agentInst
	n        int
}

type agentInst struct {
	name   string // owner: <agent_id>/<boot_id>
	d      *agent.Daemon
	a      *agent.Agent
	nlink  *NATSLink
	s3link *S3Link
	tr     *http.Transport
	hard   chan struct{} // closed to stop the process at once
	done   chan struct{}
}

var (
	_ LinkControl = (*agentSlot)(nil)
	_ S3Control   = (*agentSlot)(nil)
)

func (s *agentSlot) Gate() <-chan struct{} { return s.gate.Gate() }

func (s *agentSlot) Rand() float64 { return s.rnd.Float64() }

// Msg combines the open message-fault windows.
func (s *agentSlot) Msg() MsgFaults {
	s.mu.Lock()
	defer s.mu.Unlock()
	var m MsgFaults
	for _, w := range s.windows {
		m.Delay = max(m.Delay, w.Delay)
		m.DupProb = max(m.DupProb, w.DupProb)
		m.DupLate = max(m.DupLate, w.DupLate)
		m.ReorderProb = max(m.ReorderProb, w.ReorderProb)
		m.ReorderLate = max(m.ReorderLate, w.ReorderLate)
	}
	return m
}

func (s *agentSlot) setWindow(i int, m *MsgFaults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.windows == nil {
		s.windows = map[int]MsgFaults{}
	}
	if m == nil {
		delete(s.windows, i)
	} else {
		s.windows[i] = *m
	}
}

func (s *agentSlot) Hook(l *NATSLink, dir Dir, rec *FrameRecord) Verdict {
	if dir != ToServer || rec.Copy {
		return Verdict{}
	}
	return s.fire(rec.Verb, rec.Link, fmt.Sprintf("%s %s", rec.Verb, rec.Token))
}

func (s *agentSlot) S3Hook(l *S3Link, rec *S3Record) Verdict {
	if !rec.writes() {
		return Verdict{}
	}
	what := fmt.Sprintf("storage %s %s", rec.Kind, rec.Key)
	if rec.Kind == s3Part {
		if v, ok := s.tryFire("part", rec.Link, what); ok {
			return v
		}
	}
	return s.fire("put", rec.Link, what)
}

func (s *agentSlot) fire(on, process, what string) Verdict {
	v, _ := s.tryFire(on, process, what)
	return v
}

// tryFire fires the first armed trigger waiting for on, and reports whether
// there was one.
func (s *agentSlot) tryFire(on, process, what string) (Verdict, bool) {
	s.mu.Lock()
	var t *trigger
	if s.inst != nil && s.inst.name == process {
		for _, c := range s.triggers {
			if !c.done && c.on == on {
				c.done = true
				t = c
				break
			}
		}
	}
	s.mu.Unlock()
	if t == nil {
		return Verdict{}, false
	}
	v := t.fire(process, what)
	close(t.fired)
	return v, true
}

// arm registers a trigger; disarm removes it if it has not fired.
func (s *agentSlot) arm(t *trigger) {
	t.fired = make(chan struct{})
	s.mu.Lock()
	s.triggers = append(s.triggers, t)
	s.mu.Unlock()
}

func (s *agentSlot) disarm(t *trigger) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	return true
}

func (s *agentSlot) current() *agentInst {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inst
}

func (s *agentSlot) pending() int {
	inst := s.current()
	if inst == nil {
		return 0
	}
	return inst.nlink.Pending()
}

// start runs a new process of the agent: new boot id, its own NATS link,
// storage link, NATS connection and simulated phones. The agent is built by
// agent.NewDaemon, as `edgeagent run` builds it, with the links, the
// phones, the wall clock and the retry policies injected.
func (s *agentSlot) start() error {
	r := s.r
	tm := r.tm
	if r.closing.Load() {
		return nil
	}
	// On a cluster the link has a port per node and the agent's server
	// list starts with its home node (natsAddrs).
	nlink, err := NewNATSLinkTo("", r.natsAddrs(r.agentHome(s.idx)), s, r.rec)
	if err != nil {
		return err
	}
	s3link, err := NewS3Link(r.s3ep, r.bucket, s, &r.storageF, r.rec)
	if err != nil {
		nlink.Close()
		return err
	}
	tr := newTransport()
	fail := func(err error) error {
		nlink.Close()
		s3link.Close()
		tr.CloseIdleConnections()
		return err
	}
	inv := capture.NewInventory()
	for k := range r.plan.Shape.PhonesPerAgent {
		ph := capture.NewSimulated(capture.SimOptions{
			Serial: fmt.Sprintf("%s-p%d", s.id, k), Model: "ChaosPhone", Width: 32, Height: 64, RecordingSize: r.opts.RecordingSize,
		})
		r.keepPhone(ph)
		if err := inv.Add(ph); err != nil {
			return fail(err)
		}
	}
	cfg := config.DefaultAgent()
	cfg.Sleep.Inhibit = false // an in-process agent never holds the PC awake
	cfg.AgentID = s.id
	// The state directory outlives the process, as on a PC: a restarted
	// process finds the upload spool of the one before.
	cfg.StateDir = filepath.Join(r.dir, "agents", s.id)
	cfg.Lease.SafetyMargin = config.Duration(tm.margin)
	cfg.NATS.RequestTimeout = config.Duration(tm.request)
	cfg.Jobs.Concurrency = r.plan.Shape.PhonesPerAgent
	cfg.Storage.S3 = config.S3{Endpoint: s3link.Endpoint(), Region: r.region, Bucket: r.bucket, AccessKey: r.ak, SecretKey: config.Secret(r.sk)}
	if r.opts.PartSize > 0 {
		cfg.Storage.PartSize = config.ByteSize(r.opts.PartSize)
	}
	cfg.Status.Listen = ""
	d, err := agent.NewDaemon(context.Background(), cfg, agent.System{
		DialNATS: func(opts ...nats.Option) (*nats.Conn, error) {
			nc, err := nats.Connect(nlink.URLs(), append(opts, nats.DontRandomize(),
				nats.MaxReconnects(-1), nats.ReconnectWait(25*time.Millisecond), nats.ReconnectJitter(0, 10*time.Millisecond),
				nats.RetryOnFailedConnect(true), nats.Timeout(time.Second), natsErrors(r.log))...)
			if err != nil {
				return nil, fmt.Errorf("connect agent %s: %w", s.id, err)
			}
			return nc, nil
		},
		Phones: inv,
		Storage: agent.StorageHooks{
			S3: func(o *uploader.S3Options) {
				o.Transport = stampTransport{tr}
				o.Retry = uploader.RetryPolicy{Attempts: 3, Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}
			},
			Spool: func(o *uploader.SpoolOptions) {
				o.Retry = uploader.RetryPolicy{Initial: tm.ttl / 10, Max: tm.ttl / 2}
				o.GiveUpAfter = 4 * tm.ttl
			},
		},
		WallClock: s.clock.Now, GuardCheckInterval: tm.guardCheck,
		Log: r.opts.Log.With().Int64("seed", r.plan.Seed).Logger(), Version: "chaos",
	})
	if err != nil {
		return fail(err)
	}
	a := d.Agent()
	nlink.setName(a.Owner())
	s3link.setName(a.Owner())
	if rep, err := d.Recovered(); err != nil {
		r.rec.note(fmt.Sprintf("agent process %s: recover upload spool: %v", a.Owner(), err))
	} else if rep.Dropped > 0 {
		r.rec.note(fmt.Sprintf("agent process %s dropped %d uploads of previous boots", a.Owner(), rep.Dropped))
	}
	hard := make(chan struct{})
	inst := &agentInst{name: a.Owner(), d: d, a: a, nlink: nlink, s3link: s3link, tr: tr, hard: hard, done: make(chan struct{})}
	s.mu.Lock()
	s.n++
	s.inst = inst
	s.mu.Unlock()
	r.rec.note("agent process " + inst.name + " started")
	go func() {
		defer close(inst.done)
		if err := d.Run(context.Background(), hard); err != nil {
			r.rec.note(fmt.Sprintf("agent process %s ended: %v", inst.name, err))
		}
	}()
	return nil
}

// kill cuts the running process off from everything at once and lets its
// goroutines wind down out of sight. It returns the process's name.
func (s *agentSlot) kill(why string) string {
	s.mu.Lock()
	inst := s.inst
	s.inst = nil
	s.mu.Unlock()
	if inst == nil {
		return ""
	}
	inst.nlink.Kill()
	inst.s3link.Kill()
	// What the dead process held goes at once, as the OS would take it:
	// its NATS connection and the lock on its state directory, which a
	// restarted process takes.
	inst.d.Close()
	s.r.rec.note("agent process " + inst.name + " killed (" + why + ")")
	s.r.goBG(func() {
		close(inst.hard)
		<-inst.done
		s.finish(inst)
	})
	return inst.name
}

// finish records the stops of an ended process and releases its links.
func (s *agentSlot) finish(inst *agentInst) {
	var recs []StopRec
	for _, st := range inst.a.Stops() {
		recs = append(recs, StopRec{Token: st.Token, Cause: st.Cause, At: st.At, CutShort: st.CutShort})
	}
	s.r.rec.stops(inst.name, recs)
	inst.nlink.Close()
	inst.s3link.Close()
	inst.tr.CloseIdleConnections()
}

// stop ends the running process at the end of the schedule, noting the
// jobs it still ran.
func (s *agentSlot) stop(running map[string]string, live map[string]bool) {
	s.mu.Lock()
	inst := s.inst
	s.inst = nil
	s.mu.Unlock()
	if inst == nil {
		return
	}
	if running != nil {
		for _, j := range inst.a.Jobs() {
			running[j.Token.JobID] = inst.name
		}
		live[inst.name] = true
	}
	close(inst.hard)
	<-inst.done
	inst.d.Close()
	s.finish(inst)
}
