package chaos

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/metrics"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/internal/labs3"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uploader"
)

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
	WrapStore func(coordinator.Store) coordinator.Store
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

	natsMu   sync.Mutex
	ns       *server.Server
	natsPort int
	natsDown int // restarts in progress

	sqlitePath string
	pgDirect   string // the schedule's database, straight
	pgProxied  string // the same through the proxy the coordinators use
	pgProxy    *tcpProxy
	pgDrop     func()
	operator   coordinator.Store // the harness's own handle (client "operator")
	opRaw      coordinator.Store
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
	if err := r.startNATS(-1); err != nil {
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
	r.natsMu.Lock()
	ns := r.ns
	r.ns = nil
	r.natsMu.Unlock()
	if ns != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
	}
}

// ── NATS ────────────────────────────────────────────────────────────────

// natsPort picks a free loopback port below the kernel's ephemeral range,
// so that, while the server is down, no outgoing connection (nor a
// connection of a client to itself, which TCP allows) takes it.
func natsPort() (int, error) {
	var last error
	for range 100 {
		p := 10000 + int(randUint()%22000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			last = err
			continue
		}
		l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("find a port for nats: %w", last)
}

func (r *run) startNATS(port int) error {
	if port <= 0 {
		p, err := natsPort()
		if err != nil {
			return err
		}
		port = p
	}
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		var ns *server.Server
		ns, err = server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
		if err != nil {
			return fmt.Errorf("start nats server: %w", err)
		}
		go ns.Start()
		if ns.ReadyForConnections(2 * time.Second) {
			r.natsMu.Lock()
			r.ns = ns
			r.natsPort = ns.Addr().(*net.TCPAddr).Port
			r.natsMu.Unlock()
			return nil
		}
		ns.Shutdown()
		ns.WaitForShutdown()
		err = errors.New("start nats server: not ready")
		time.Sleep(20 * time.Millisecond) // the port may not be free yet
	}
	return err
}

func (r *run) natsAddr() string {
	r.natsMu.Lock()
	defer r.natsMu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.natsPort))
}

// restartNATS takes the NATS server down for down and starts a new one on
// the same port. Overlapping restarts keep it down until the last ends.
func (r *run) restartNATS(ctx context.Context, down time.Duration) string {
	r.natsMu.Lock()
	ns := r.ns
	r.ns = nil
	r.natsDown++
	r.natsMu.Unlock()
	if ns != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
		r.rec.note("nats server down")
	}
	sleepCtx(ctx, down)
	r.natsMu.Lock()
	r.natsDown--
	last := r.natsDown == 0
	port := r.natsPort
	r.natsMu.Unlock()
	if !last {
		return fmt.Sprintf("down %s, overlapping another restart", ms(down))
	}
	if err := r.startNATS(port); err != nil {
		r.rec.note("nats server failed to restart: " + err.Error())
		return "restart failed: " + err.Error()
	}
	r.rec.note("nats server up")
	return fmt.Sprintf("down %s", ms(down))
}

// ── Store ───────────────────────────────────────────────────────────────

func (r *run) setupStore() error {
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	var raw coordinator.Store
	switch r.opts.Store {
	case StoreSQLite:
		r.sqlitePath = filepath.Join(r.dir, "coordinator.db")
		st, err := sqlitestore.Open(ctx, r.sqlitePath)
		if err != nil {
			return err
		}
		raw = st
	case StorePostgres:
		if err := r.setupPostgres(ctx); err != nil {
			return err
		}
		st, err := pgstore.Open(ctx, r.pgDirect)
		if err != nil {
			return err
		}
		raw = st
	}
	r.opRaw = raw
	r.operator = &recordingStore{Store: raw, client: "operator", rec: r.rec}
	return nil
}

// setupPostgres creates the schedule's schema in the database of
// PostgresDSN and the proxy the coordinators reach it through.
func (r *run) setupPostgres(ctx context.Context) error {
	cfg, err := pgx.ParseConfig(r.opts.PostgresDSN)
	if err != nil {
		return fmt.Errorf("parse postgres dsn: %w", err)
	}
	if cfg.Host == "" || filepath.IsAbs(cfg.Host) {
		return errors.New("postgres dsn: chaos needs a TCP host, not a unix socket")
	}
	schema := fmt.Sprintf("chaos_%d_%s", uint64(r.plan.Seed), randHex(4))
	ident := pgx.Identifier{schema}.Sanitize()
	admin, err := pgx.Connect(ctx, r.opts.PostgresDSN)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	_, err = admin.Exec(ctx, "CREATE SCHEMA "+ident)
	admin.Close(ctx)
	if err != nil {
		return fmt.Errorf("create schema %s: %w", schema, err)
	}
	adminDSN := r.opts.PostgresDSN
	r.pgDrop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, adminDSN)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP SCHEMA IF EXISTS "+ident+" CASCADE")
	}
	upstream := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if r.pgProxy, err = newTCPProxy(upstream); err != nil {
		return err
	}
	dsn := func(hostport string) string {
		q := url.Values{"sslmode": {"disable"}, "search_path": {schema}, "pool_max_conns": {"4"}}
		u := url.URL{Scheme: "postgres", Host: hostport, Path: "/" + cfg.Database, RawQuery: q.Encode()}
		if cfg.Password != "" {
			u.User = url.UserPassword(cfg.User, cfg.Password)
		} else {
			u.User = url.User(cfg.User)
		}
		return u.String()
	}
	r.pgDirect = dsn(upstream)
	r.pgProxied = dsn(r.pgProxy.addr())
	return nil
}

// openStore opens a coordinator process's own store handle.
func (r *run) openStore(ctx context.Context) (coordinator.Store, error) {
	if r.opts.Store == StorePostgres {
		return pgstore.Open(ctx, r.pgProxied)
	}
	return sqlitestore.Open(ctx, r.sqlitePath)
}

// ── Storage ─────────────────────────────────────────────────────────────

func (r *run) setupStorage() error {
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	r.s3tr = newTransport()
	if t := r.opts.S3; t != nil {
		r.s3ep, r.ak, r.sk, r.region = t.Endpoint, t.AccessKey, t.SecretKey, t.Region
		if r.region == "" {
			r.region = "us-east-1"
		}
		r.bucket = fmt.Sprintf("chaos-%d-%s", uint64(r.plan.Seed), randHex(4))
		c, err := r.minio()
		if err != nil {
			return err
		}
		if err := c.MakeBucket(ctx, r.bucket, minio.MakeBucketOptions{Region: r.region}); err != nil {
			return fmt.Errorf("create bucket %s: %w", r.bucket, err)
		}
		r.dropBucket = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = c.RemoveBucketWithOptions(ctx, r.bucket, minio.RemoveBucketOptions{ForceDelete: true})
		}
	} else {
		lab, err := labs3.Start(labs3.Options{})
		if err != nil {
			return err
		}
		r.lab = lab
		r.s3ep, r.ak, r.sk, r.region, r.bucket = lab.Endpoint, lab.AccessKey, lab.SecretKey, lab.Region, lab.Bucket
	}
	var err error
	r.direct, err = uploader.NewS3(uploader.S3Options{Endpoint: r.s3ep, Region: r.region, Bucket: r.bucket,
		AccessKey: r.ak, SecretKey: r.sk, Transport: r.s3tr})
	return err
}

func (r *run) minio() (*minio.Client, error) {
	c, err := minio.New(r.s3ep, &minio.Options{Creds: credentials.NewStaticV4(r.ak, r.sk, ""), Region: r.region, Transport: r.s3tr})
	if err != nil {
		return nil, fmt.Errorf("create s3 client: %w", err)
	}
	return c, nil
}

// retry runs f until it succeeds, five times at most: the harness's own
// reads of the final state must not fail because the machine is slow.
func retry(ctx context.Context, f func() error) error {
	var err error
	for attempt := range 5 {
		if err = f(); err == nil || ctx.Err() != nil {
			return err
		}
		sleepCtx(ctx, time.Duration(attempt+1)*200*time.Millisecond)
	}
	return err
}

func newTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     10 * time.Second,
	}
}

// ── Workload and settling ───────────────────────────────────────────────

// waitCoordinators waits until every coordinator answers the micro service
// ping.
func (r *run) waitCoordinators(limit time.Duration) error {
	nc, err := nats.Connect("nats://"+r.natsAddr(), nats.Name("chaos harness"), nats.Timeout(5*time.Second),
		nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), natsErrors(r.log))
	if err != nil {
		return fmt.Errorf("connect harness to nats: %w", err)
	}
	defer nc.Close()
	want := len(r.coords)
	deadline := time.Now().Add(limit)
	for {
		inbox := nats.NewInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			return fmt.Errorf("ping coordinators: %w", err)
		}
		seen := map[string]bool{}
		if err := nc.PublishRequest("$SRV.PING."+coordinator.ServiceName, inbox, nil); err == nil {
			for {
				m, err := sub.NextMsg(100 * time.Millisecond)
				if err != nil {
					break
				}
				seen[string(m.Data)] = true
			}
		}
		_ = sub.Unsubscribe()
		if len(seen) >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for coordinators: %d of %d serving after %s", len(seen), want, limit)
		}
	}
}

func (r *run) waitReady(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ready := true
		for _, s := range r.agents {
			if a := s.current(); a == nil || !a.a.Ready() {
				ready = false
			}
		}
		if ready {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *run) submitJobs(ctx context.Context) {
	for _, j := range r.plan.Jobs {
		if !sleepUntil(ctx, r.t0.Add(j.At)) {
			return
		}
		for {
			_, err := r.operator.Submit(context.WithoutCancel(ctx), coordinator.JobSpec{ID: j.ID, Task: j.Task})
			if err == nil || errors.Is(err, coordinator.ErrConflict) {
				break // a conflict: an earlier attempt got in
			}
			if !sleepCtx(ctx, 20*time.Millisecond) {
				return
			}
		}
		r.rec.note("job " + j.ID + " submitted")
		r.submitted.Add(1)
	}
}

// settle waits until the faults are over, every job was submitted and has
// ended, and nothing is left in the links; or until the settle time after
// the faults has passed.
func (r *run) settle(ctx context.Context, faultsDone <-chan struct{}) {
	var deadline time.Time
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		select {
		case <-faultsDone:
			if deadline.IsZero() {
				deadline = time.Now().Add(r.opts.Settle)
			}
		default:
			continue
		}
		if time.Now().After(deadline) {
			r.rec.note("settle time over")
			return
		}
		if int(r.submitted.Load()) < len(r.plan.Jobs) || r.pendingMessages() > 0 {
			continue
		}
		counts, err := r.opRaw.JobCounts(ctx)
		if err != nil {
			continue
		}
		if counts[coordinator.StatusQueued] == 0 && counts[coordinator.StatusInProgress] == 0 {
			return
		}
	}
}

func (r *run) pendingMessages() int {
	n := 0
	for _, s := range r.agents {
		n += s.pending()
	}
	return n
}

// collect reads the final state back from the store and the storage.
func (r *run) collect(f *Final) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f.Jobs = map[string]coordinator.Job{}
	f.Events = map[string][]coordinator.WriteEvent{}
	f.Manifests = map[string][]coordinator.ArtifactRecord{}
	for _, jp := range r.plan.Jobs {
		var j coordinator.Job
		err := retry(ctx, func() error {
			var err error
			j, err = r.opRaw.Get(ctx, jp.ID)
			if errors.Is(err, coordinator.ErrNotFound) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("collect final state: %w", err)
		}
		if j.ID == "" {
			continue // never submitted
		}
		f.Jobs[j.ID] = j
		var evs []coordinator.WriteEvent
		err = retry(ctx, func() error {
			var err error
			evs, err = r.opRaw.WriteEvents(ctx, j.ID)
			return err
		})
		if err != nil {
			return fmt.Errorf("collect final state: %w", err)
		}
		f.Events[j.ID] = evs
		if j.Status == coordinator.StatusSucceeded {
			var arts []coordinator.ArtifactRecord
			err := retry(ctx, func() error {
				var err error
				arts, err = r.opRaw.Artifacts(ctx, j.ID, j.Generation)
				return err
			})
			if err != nil {
				return fmt.Errorf("collect final state: %w", err)
			}
			f.Manifests[j.ID] = arts
		}
	}
	var objs []uploader.Object
	err := retry(ctx, func() error {
		var err error
		objs, err = r.direct.List(ctx, "jobs/")
		return err
	})
	if err != nil {
		return fmt.Errorf("collect final state: %w", err)
	}
	f.Objects = objs
	c, err := r.minio()
	if err != nil {
		return err
	}
	// MinIO lists the multipart uploads of one key at a time: ask for every
	// key an agent started one for.
	keys := map[string]bool{}
	r.rec.mu.Lock()
	for _, s := range r.rec.h.S3 {
		if s.Kind == s3Initiate && s.Key != "" {
			keys[s.Key] = true
		}
	}
	r.rec.mu.Unlock()
	for k := range keys {
		var open []string
		err := retry(ctx, func() error {
			var err error
			open, err = incompleteUploads(ctx, c, r.bucket, k)
			return err
		})
		if err != nil {
			return fmt.Errorf("collect final state: %w", err)
		}
		for _, o := range open {
			if o == k {
				f.Incomplete = append(f.Incomplete, o)
			}
		}
	}
	sort.Strings(f.Incomplete)
	return r.collectEffects(ctx, f)
}

// incompleteUploads lists the keys of the multipart uploads open under
// prefix.
func incompleteUploads(ctx context.Context, c *minio.Client, bucket, prefix string) ([]string, error) {
	core := minio.Core{Client: c}
	var out []string
	keyMarker, idMarker := "", ""
	for {
		res, err := core.ListMultipartUploads(ctx, bucket, prefix, keyMarker, idMarker, "", 1000)
		if minio.ToErrorResponse(err).Code == "NoSuchUpload" {
			break // the in-process server's answer when none was ever started
		}
		if err != nil {
			return nil, fmt.Errorf("list incomplete uploads: %w", err)
		}
		for _, u := range res.Uploads {
			out = append(out, u.Key)
		}
		if !res.IsTruncated || (res.NextKeyMarker == keyMarker && res.NextUploadIDMarker == idMarker) {
			break
		}
		keyMarker, idMarker = res.NextKeyMarker, res.NextUploadIDMarker
	}
	sort.Strings(out)
	return out, nil
}

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
		var raw coordinator.Store
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
		nc, err := nats.Connect("nats://"+r.natsAddr(), nats.Name(name), nats.MaxReconnects(-1),
			nats.ReconnectWait(20*time.Millisecond), nats.ReconnectJitter(0, 10*time.Millisecond),
			nats.RetryOnFailedConnect(true), nats.Timeout(time.Second), natsErrors(log))
		if err != nil {
			r.rec.note(name + " could not connect: " + err.Error())
			return
		}
		defer nc.Close()
		var st coordinator.Store = raw
		if r.opts.WrapStore != nil {
			st = r.opts.WrapStore(st)
		}
		st = &recordingStore{Store: &faultyStore{Store: st, f: &r.storeF}, client: name, rec: r.rec}
		tm := r.tm
		srv := coordinator.New(nc, st, coordinator.Options{
			ID: name, LeaseTTL: tm.ttl, ReapInterval: tm.reap, ScheduleInterval: tm.schedule,
			HeartbeatEvery: tm.heartbeat, OfflineAfter: tm.offline, AssignTimeout: tm.assign, Log: log,
		})
		s.mu.Lock()
		inst.srv = srv
		s.mu.Unlock()
		r.rec.note(name + " started")
		for {
			err := srv.Run(ctx)
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
	a      *agent.Agent
	nc     *nats.Conn
	nlink  *NATSLink
	s3link *S3Link
	tr     *http.Transport
	cancel context.CancelFunc
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
// storage link, NATS connection and simulated phones.
func (s *agentSlot) start() error {
	r := s.r
	tm := r.tm
	if r.closing.Load() {
		return nil
	}
	// The state directory outlives the process, as on a PC: a restarted
	// process finds the upload spool of the one before.
	stateDir := filepath.Join(r.dir, "agents", s.id)
	captureDir := filepath.Join(stateDir, agent.SpoolDir, "capture")
	if err := os.MkdirAll(captureDir, 0o700); err != nil {
		return fmt.Errorf("create state directory of %s: %w", s.id, err)
	}
	nlink, err := NewNATSLink("", r.natsAddr(), s, r.rec)
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
	log := r.opts.Log.With().Int64("seed", r.plan.Seed).Logger()
	// Storage as cmd/edgeagent wires it: the upload spool in front of the
	// bucket, its entries dropped when a job stops and those of previous
	// boots recovered at start.
	s3, err := uploader.NewS3(uploader.S3Options{
		Endpoint: s3link.Endpoint(), Region: r.region, Bucket: r.bucket, AccessKey: r.ak, SecretKey: r.sk,
		Transport: stampTransport{tr}, PartSize: r.opts.PartSize, TempDir: filepath.Join(stateDir, agent.SpoolDir),
		Retry: uploader.RetryPolicy{Attempts: 3, Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond},
	})
	if err != nil {
		return fail(err)
	}
	spool, err := uploader.NewSpool(filepath.Join(stateDir, agent.SpoolDir, "uploads"), s3, uploader.SpoolOptions{
		Log: log, Retry: uploader.RetryPolicy{Initial: tm.ttl / 10, Max: tm.ttl / 2}, GiveUpAfter: 4 * tm.ttl,
	})
	if err != nil {
		return fail(err)
	}
	nc, err := nats.Connect(nlink.URL(), nats.Name("edgeagent "+s.id), nats.CustomInboxPrefix(protocol.InboxPrefix(s.id)),
		nats.MaxReconnects(-1), nats.ReconnectWait(25*time.Millisecond), nats.ReconnectJitter(0, 10*time.Millisecond),
		nats.ReconnectBufSize(-1), nats.RetryOnFailedConnect(true), nats.Timeout(time.Second), natsErrors(r.log))
	if err != nil {
		return fail(fmt.Errorf("connect agent %s: %w", s.id, err))
	}
	inv := capture.NewInventory()
	for k := range r.plan.Shape.PhonesPerAgent {
		ph := capture.NewSimulated(capture.SimOptions{
			Serial: fmt.Sprintf("%s-p%d", s.id, k), Model: "ChaosPhone", Width: 32, Height: 64, RecordingSize: r.opts.RecordingSize,
		})
		r.keepPhone(ph)
		if err := inv.Add(ph); err != nil {
			nc.Close()
			return fail(err)
		}
	}
	a, err := agent.New(agent.Options{
		AgentID: s.id, Version: "chaos", Conn: nc, Phones: agent.InventoryPhones(inv, captureDir, capture.OpLogOptions{}),
		Store: spool, Slots: r.plan.Shape.PhonesPerAgent, SafetyMargin: tm.margin, RequestTimeout: tm.request,
		Log: log, GuardCheckInterval: tm.guardCheck, WallClock: s.clock.Now,
		OnStop: func(tok fencing.Token, _ error) {
			dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _ = spool.DropGeneration(dctx, tok)
		},
	})
	if err != nil {
		nc.Close()
		return fail(err)
	}
	nlink.setName(a.Owner())
	s3link.setName(a.Owner())
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	if rep, err := spool.Recover(rctx, a.Owner()); err != nil {
		r.rec.note(fmt.Sprintf("agent process %s: recover upload spool: %v", a.Owner(), err))
	} else if rep.Dropped > 0 {
		r.rec.note(fmt.Sprintf("agent process %s dropped %d uploads of previous boots", a.Owner(), rep.Dropped))
	}
	rcancel()
	ctx, cancel := context.WithCancel(context.Background())
	inst := &agentInst{name: a.Owner(), a: a, nc: nc, nlink: nlink, s3link: s3link, tr: tr, cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	s.n++
	s.inst = inst
	s.mu.Unlock()
	r.rec.note("agent process " + inst.name + " started")
	go func() {
		defer close(inst.done)
		if err := a.Run(ctx); err != nil {
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
	s.r.rec.note("agent process " + inst.name + " killed (" + why + ")")
	s.r.goBG(func() {
		inst.cancel()
		inst.nc.Close()
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
	inst.cancel()
	<-inst.done
	inst.nc.Close()
	s.finish(inst)
}

// ── helpers ─────────────────────────────────────────────────────────────

// probeStalls measures, until ctx is done, how long goroutines of this
// process waited to run: every 10ms it notes how late it woke itself, and
// every 50ms it reads the runtime's histogram of scheduling latencies
// (runtime/metrics /sched/latencies:seconds) and notes the longest wait
// any goroutine had since the last read. It returns every such wait of
// more than 5ms, with when it was seen.
func probeStalls(ctx context.Context) []Stall {
	const every = 10 * time.Millisecond
	var out []Stall
	note := func(at time.Time, late time.Duration) {
		if late > 5*time.Millisecond {
			out = append(out, Stall{At: at, Late: late})
		}
	}
	sample := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	var prev []uint64
	readSched := func(now time.Time) {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindFloat64Histogram {
			return
		}
		h := sample[0].Value.Float64Histogram()
		if prev != nil {
			for i := len(h.Counts) - 1; i >= 0; i-- {
				if i < len(prev) && h.Counts[i] > prev[i] {
					// The bucket's upper bound, or twice its lower bound
					// for the last, open one.
					hi := h.Buckets[i+1]
					if math.IsInf(hi, 1) {
						hi = 2 * h.Buckets[i]
					}
					note(now, time.Duration(hi*float64(time.Second)))
					break
				}
			}
		}
		prev = append(prev[:0], h.Counts...)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now()
	readSched(last)
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return out
		case now := <-t.C:
			note(now, now.Sub(last)-every)
			last = now
			if n%5 == 0 {
				readSched(now)
			}
		}
	}
}

// natsErrors sends a connection's asynchronous errors to log instead of
// stderr.
func natsErrors(log zerolog.Logger) nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		log.Debug().Err(err).Msg("nats connection error")
	})
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func sleepUntil(ctx context.Context, t time.Time) bool { return sleepCtx(ctx, time.Until(t)) }

func randUint() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
