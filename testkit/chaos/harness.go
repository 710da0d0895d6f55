package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/testkit/labs3"
	"github.com/edgeagent/edgeagent/uploader"
)

// MaxNATSNodes bounds the nodes of a schedule's NATS cluster.
const MaxNATSNodes = 5

// Store kinds.
const (
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// S3Target is an S3-compatible server (MinIO) the schedules use instead of
// an in-process one. Each schedule creates a bucket of its own there and
// removes it at the end.
type S3Target struct {
	Endpoint  string // host:port, plain HTTP
	Region    string // default us-east-1
	AccessKey string
	SecretKey string
}

// Options configures how schedules run.
type Options struct {
	Shape Shape
	// Store is StoreSQLite (default: a database file per schedule, one
	// handle per coordinator process) or StorePostgres.
	Store string
	// PostgresDSN, for StorePostgres, reaches a server (over TCP) where its
	// role may create databases: each schedule gets a database of its own,
	// dropped at the end.
	PostgresDSN string
	// S3 selects an S3 server; nil starts an in-process one (labs3) per
	// schedule.
	S3 *S3Target
	// TempDir holds the schedules' files; default /dev/shm when it can be
	// written, else os.TempDir().
	TempDir string
	// WrapStore, when set, wraps every coordinator's store handle (the
	// innermost wrapper, right on the database). Tests plant bugs with it.
	WrapStore func(jobstore.Store) jobstore.Store
	// Grace is how long after an agent recorded a stop a side effect of
	// that token may still be seen leaving it: a message or request that
	// was past its lease check when the stop landed, and the time the
	// agent's link took to read it on a loaded machine; default the lease
	// TTL.
	Grace time.Duration
	// Settle is how long the system has, after the last fault healed, to
	// bring every job to an end; default 16 × the lease TTL.
	Settle time.Duration
	// RecordingSize is the size of every simulated screen recording;
	// default 8 KiB.
	RecordingSize int64
	// PartSize is the agents' multipart part size (uploader default when
	// zero).
	PartSize int64
	// Log receives the components' logs; default none.
	Log zerolog.Logger
}

func (o Options) withDefaults() Options {
	o.Shape = o.Shape.withDefaults()
	if o.Store == "" {
		o.Store = StoreSQLite
	}
	if o.Grace <= 0 {
		o.Grace = o.Shape.LeaseTTL
	}
	if o.Settle <= 0 {
		o.Settle = 16 * o.Shape.LeaseTTL
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
		// A schedule fsyncs its spool and database files many times a
		// second; on a RAM disk that costs nothing.
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			if f, err := os.CreateTemp("/dev/shm", "edgechaos-probe-"); err == nil {
				f.Close()
				os.Remove(f.Name())
				o.TempDir = "/dev/shm"
			}
		}
	}
	if o.RecordingSize <= 0 {
		o.RecordingSize = 8 << 10
	}
	return o
}

// Validate reports what is wrong with the options.
func (o Options) Validate() error {
	switch o.Store {
	case "", StoreSQLite:
	case StorePostgres:
		if o.PostgresDSN == "" {
			return errors.New("validate chaos options: store postgres needs a postgres dsn")
		}
	default:
		return fmt.Errorf("validate chaos options: unknown store %q (want sqlite or postgres)", o.Store)
	}
	n := o.Shape.NATSNodes
	if n < 0 || n > MaxNATSNodes {
		return fmt.Errorf("validate chaos options: nats nodes %d: want 1 (one server) to %d (a cluster)", n, MaxNATSNodes)
	}
	if n > 1 && o.Store != StorePostgres {
		return fmt.Errorf("validate chaos options: a %d-node nats cluster runs its coordinators on one postgresql: use store postgres", n)
	}
	for _, k := range o.Shape.Kinds {
		if !slices.Contains(AllKinds, k) {
			return fmt.Errorf("validate chaos options: unknown fault kind %q", k)
		}
		if n <= 1 && slices.Contains(ClusterKinds, k) {
			return fmt.Errorf("validate chaos options: fault kind %s needs a nats cluster (nats nodes above 1)", k)
		}
	}
	if o.S3 != nil && (o.S3.Endpoint == "" || o.S3.AccessKey == "" || o.S3.SecretKey == "") {
		return errors.New("validate chaos options: s3 needs endpoint, access key and secret key")
	}
	return nil
}

// Result is what one schedule left: its history, the checker's report, or
// the error that kept the harness from running it.
type Result struct {
	Seed    int64
	History *History
	Report  *Report
	Err     error
	Took    time.Duration
	Phases  Phases
}

// Phases is where a schedule's time went: starting the system, running
// the plan until every job ended (or the settle time ran out), stopping the
// processes and reading the final state, and tearing down plus checking.
type Phases struct {
	Setup, Run, Collect, TeardownCheck time.Duration
}

// Failed reports whether the schedule could not run or its history broke a
// rule.
func (r *Result) Failed() bool {
	return r.Err != nil || (r.Report != nil && !r.Report.OK())
}

// timing derived from the lease TTL.
type timing struct {
	ttl, reap, schedule, heartbeat, offline, assign time.Duration
	margin, request, guardCheck                     time.Duration
}

func timingFor(ttl time.Duration) timing {
	return timing{
		ttl: ttl, reap: ttl / 4, schedule: ttl / 4, heartbeat: ttl / 4, offline: ttl, assign: ttl / 2,
		margin: ttl * 3 / 10, request: ttl, guardCheck: max(ttl/25, 5*time.Millisecond),
	}
}

// run is one schedule being run.
type run struct {
	opts Options
	plan Plan
	tm   timing
	rec  *Recorder
	log  zerolog.Logger
	ctx  context.Context
	dir  string
	t0   time.Time

	natsMu sync.Mutex
	nodes  []*natsNode // the NATS servers: one, or the nodes of a cluster

	sqlitePath string
	pgDirect   string // the schedule's database, straight
	pgProxied  string // the same through the proxy the coordinators use
	pgProxy    *tcpProxy
	pgDrop     func()
	operator   jobstore.Store // the harness's own handle (client "operator")
	opRaw      jobstore.Store
	storeF     storeFaults

	s3ep, bucket, region, ak, sk string
	lab                          *labs3.Server
	direct                       *uploader.S3
	s3tr                         *http.Transport
	dropBucket                   func()
	storageF                     storageFaults

	coords []*coordSlot
	agents []*agentSlot
	phones phoneLedger // every simulated phone created (effects.go)

	bgMu    sync.Mutex
	bgDone  []chan struct{} // background work (process stops and restarts) in flight
	closing atomic.Bool     // the schedule is ending: no more restarts

	submitted atomic.Int32

	recurring     []RecurringFinal // the recurring schedules created (recurring.go)
	recurringDone atomic.Bool      // they ended and their jobs were cancelled
}

// RunSchedule runs the schedule of seed and checks its history.
func RunSchedule(ctx context.Context, opts Options, seed int64) *Result {
	opts = opts.withDefaults()
	return RunPlan(ctx, opts, NewPlan(seed, opts.Shape))
}

// RunPlan runs one plan (drawn by NewPlan, or written by hand) and checks
// its history. The plan's shape decides the system; opts.Shape is not used.
func RunPlan(ctx context.Context, opts Options, plan Plan) *Result {
	plan.Shape = plan.Shape.withDefaults()
	opts.Shape = plan.Shape
	opts = opts.withDefaults()
	seed := plan.Seed
	start := time.Now()
	res := &Result{Seed: seed}
	if err := opts.Validate(); err != nil {
		res.Err = err
		return res
	}
	r := &run{
		opts: opts, plan: plan, tm: timingFor(opts.Shape.LeaseTTL), ctx: ctx,
		rec: NewRecorder(seed, plan, start),
		log: opts.Log.With().Str("component", "chaos").Int64("seed", seed).Logger(),
	}
	h, err := r.run()
	if err == nil && ctx.Err() != nil {
		// Cut short: the history is not one the rules can judge.
		err = fmt.Errorf("run schedule %d: interrupted: %w", seed, ctx.Err())
	}
	res.History = h
	res.Err = err
	if h != nil && err == nil {
		res.Report = Check(h, CheckOptions{Grace: opts.Grace})
	}
	res.Took = time.Since(start)
	if h != nil {
		res.Phases = Phases{Setup: h.Start.Sub(start), Run: h.Settled.Sub(h.Start), Collect: h.End.Sub(h.Settled)}
		res.Phases.TeardownCheck = res.Took - h.End.Sub(start)
	}
	return res
}

func (r *run) run() (h *History, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("run schedule %d: %w", r.plan.Seed, err)
		}
	}()
	if r.dir, err = os.MkdirTemp(r.opts.TempDir, fmt.Sprintf("edgechaos-%d-", r.plan.Seed)); err != nil {
		return nil, err
	}
	defer os.RemoveAll(r.dir)
	defer r.teardown()
	if err := r.setup(); err != nil {
		return nil, err
	}
	for i := range r.plan.Shape.Coordinators {
		s := &coordSlot{r: r, idx: i}
		r.coords = append(r.coords, s)
		s.start()
	}
	if err := r.waitCoordinators(time.Minute); err != nil {
		return nil, err
	}
	for i := range r.plan.Shape.Agents {
		// Agent ids carry the seed: schedules sharing a PostgreSQL
		// database do not share the per-agent grant locks.
		id := fmt.Sprintf("a%d-s%d", i, uint64(r.plan.Seed))
		s := &agentSlot{r: r, idx: i, id: id, rnd: newLockedRand(uint64(r.plan.Seed)*31 + uint64(i))}
		r.agents = append(r.agents, s)
		if err := s.start(); err != nil {
			return nil, err
		}
	}
	r.waitReady(30 * time.Second)

	r.t0 = time.Now()
	r.rec.mu.Lock()
	r.rec.h.Start = r.t0
	r.rec.mu.Unlock()
	runCtx, stop := context.WithCancel(r.ctx)
	defer stop()
	var work sync.WaitGroup
	work.Go(func() { r.submitJobs(runCtx) })
	work.Go(func() { r.runRecurring(runCtx) })
	faultsDone := make(chan struct{})
	var fwg sync.WaitGroup
	for i, f := range r.plan.Faults {
		fwg.Go(func() { r.inject(runCtx, i, f) })
	}
	go func() { fwg.Wait(); close(faultsDone) }()

	stalls := make(chan []Stall, 1)
	go func() { stalls <- probeStalls(runCtx) }()
	r.settle(runCtx, faultsDone)
	settled := time.Now()
	stop()
	work.Wait()
	fwg.Wait()
	r.waitBG()
	r.closing.Store(true)

	final := Final{Running: map[string]string{}, Live: map[string]bool{}}
	for _, s := range r.agents {
		s.stop(final.Running, final.Live)
	}
	r.waitBG()
	for _, s := range r.coords {
		s.stop()
	}
	if err := r.collect(&final); err != nil {
		return nil, err
	}
	h = r.rec.History()
	h.Stalls = <-stalls
	h.Settled = settled
	h.End = time.Now()
	h.Final = final
	return h, nil
}

func (r *run) setup() error {
	if err := r.setupNATS(); err != nil {
		return err
	}
	if err := r.setupStore(); err != nil {
		return err
	}
	return r.setupStorage()
}

// goBG runs f in the background; waitBG waits for it.
func (r *run) goBG(f func()) {
	done := make(chan struct{})
	r.bgMu.Lock()
	r.bgDone = append(r.bgDone, done)
	r.bgMu.Unlock()
	go func() {
		defer close(done)
		f()
	}()
}

// waitBG waits until no background work is in flight.
func (r *run) waitBG() {
	for {
		r.bgMu.Lock()
		pending := r.bgDone
		r.bgDone = nil
		r.bgMu.Unlock()
		if len(pending) == 0 {
			return
		}
		for _, d := range pending {
			<-d
		}
	}
}

func (r *run) teardown() {
	r.closing.Store(true)
	r.waitBG()
	for _, s := range r.agents {
		s.stop(nil, nil)
	}
	r.waitBG()
	for _, s := range r.coords {
		s.stop()
	}
	if r.opRaw != nil {
		r.opRaw.Close()
	}
	if r.pgProxy != nil {
		r.pgProxy.close()
	}
	if r.pgDrop != nil {
		r.pgDrop()
	}
	if r.dropBucket != nil {
		r.dropBucket()
	}
	if r.lab != nil {
		r.lab.Close()
	}
	if r.s3tr != nil {
		r.s3tr.CloseIdleConnections()
	}
	r.shutdownNATS()
}
