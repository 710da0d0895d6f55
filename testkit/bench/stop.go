package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/labs3"
	"github.com/edgeagent/edgeagent/uploader"
)

// Ways an old owner is stopped.
const (
	StopRevoke     = "revoke"       // reassigned; the coordinator pushes a revoke
	StopStaleBusy  = "409-busy"     // reassigned without a push; the agent's next fenced call of a busy job gets 409
	StopStaleRenew = "409-renewal"  // reassigned without a push; a waiting job's next renewal gets 409
	StopSelfFence  = "self-fence"   // the agent loses the coordinator; its own deadline stops the job
	StopLeaseOnly  = "lease-expiry" // baseline: the job is free again only once its lease expired and was reclaimed
	stopPrefixA    = "stop-a-"
	stopPrefixB    = "stop-b-"
	stopSubjects   = "edge." + protocol.Version + ".coord.*.*"
	revokeSubjects = "edge." + protocol.Version + ".agent.*." + protocol.VerbRevoke
)

// StopOptions configures the stop latency scenario.
type StopOptions struct {
	Common
	Stops        int           // per way for revoke and both 409 ways (default 1000)
	FenceStops   int           // for the self-fence deadline (default 100)
	Pairs        int           // old and new owners working at once (default 4)
	LeaseTTL     time.Duration // default 3s
	SafetyMargin time.Duration // the agents' self-fence margin (default 500ms)
	// Width and Height of the simulated phones' screens (default 360×640).
	Width, Height int
	// UploadRate caps each old owner's uploads in bytes per second, so
	// that an upload is often in flight when the stop comes (default 1 MiB/s).
	UploadRate int64
}

func (o *StopOptions) defaults() {
	if o.Stops <= 0 {
		o.Stops = 1000
	}
	if o.FenceStops <= 0 {
		o.FenceStops = 100
	}
	if o.Pairs <= 0 {
		o.Pairs = 4
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 3 * time.Second
	}
	if o.SafetyMargin <= 0 {
		o.SafetyMargin = 500 * time.Millisecond
	}
	if o.Width <= 0 || o.Height <= 0 {
		o.Width, o.Height = 360, 640
	}
	if o.UploadRate <= 0 {
		o.UploadRate = 1 << 20
	}
}

// StopSample is one measured stop.
type StopSample struct {
	Way        string
	ToLast     time.Duration // trigger → the old owner's last side effect (0: none after the trigger)
	ToStop     time.Duration // trigger → the old owner's job stopped (its context cancelled)
	To409      time.Duration // trigger → the first 409 to the old owner (409 ways)
	From409    time.Duration // the first 409 → the last side effect (409 ways)
	Verb409    string        // the call the first 409 answered
	ToReclaim  time.Duration // trigger → the coordinator reclaimed the expired lease (self-fence)
	LeaseLeft  time.Duration // lease left at the trigger (database clock): what waiting for expiry would take
	ToRevoke   time.Duration // trigger → the revoke published (revoke way)
	InFlight   bool          // an upload of the old owner was in flight at the trigger
	Cause      string
	SideAfter  int // side effects (requests reaching the coordinator, uploads ending) after the trigger
	LastBefore time.Duration
}

// StopRow summarises one way.
type StopRow struct {
	Way       string
	Samples   []StopSample
	Last      Summary
	Stop      Summary
	From409   Summary
	To409     Summary
	Reclaim   Summary // self-fence: trigger → reclaim (the lease-expiry baseline)
	LastVsRec Summary // self-fence: last side effect − reclaim (negative: before)
	LeaseLeft Summary
	ToRevoke  Summary
	RevToStop Summary
	InFlight  int
	Verbs     map[string]int
	Skipped   int // stops whose job changed hands before the trigger
	// Wakeup is how late a 1 ms sleep of this process woke up during the
	// way's stops: the floor of every latency measured here.
	Wakeup Summary
}

// StopReport is what the stop scenario measured.
type StopReport struct {
	Machine Machine
	Options StopOptions
	Rows    []StopRow
	Elapsed time.Duration
}

// stopEvents records what the coordinator's side of the wire saw from the
// old owners: requests (time, token, reply subject), 409 replies and
// revokes.
type stopEvents struct {
	mu       sync.Mutex
	requests map[string][]reqEvent // job id → requests of old owners
	replies  map[string]reqEvent   // reply subject → request
	first409 map[string]reqEvent   // job id → the request whose reply was the first 409, At = reply time
	revokes  map[string]time.Time  // job id → first revoke published
	// early holds the 409 replies seen before their request: requests and
	// replies arrive on two subscriptions, each delivered on its own
	// goroutine, so a reply can be handled first.
	early map[string]time.Time // reply subject → time of the 409 reply
}

type reqEvent struct {
	At    time.Time
	Verb  string
	Token fencing.Token
}

func newStopEvents() *stopEvents {
	return &stopEvents{requests: map[string][]reqEvent{}, replies: map[string]reqEvent{}, first409: map[string]reqEvent{}, revokes: map[string]time.Time{}, early: map[string]time.Time{}}
}

func (e *stopEvents) onRequest(m *nats.Msg) {
	at := time.Now()
	agentID, verb, err := protocol.ParseCoordSubject(m.Subject)
	if err != nil || !strings.HasPrefix(agentID, stopPrefixA) {
		return
	}
	var body struct {
		Token fencing.Token `json:"token"`
	}
	if json.Unmarshal(m.Data, &body) != nil || body.Token.JobID == "" {
		return
	}
	ev := reqEvent{At: at, Verb: verb, Token: body.Token}
	e.mu.Lock()
	e.requests[body.Token.JobID] = append(e.requests[body.Token.JobID], ev)
	if replyAt, ok := e.early[m.Reply]; ok && m.Reply != "" {
		delete(e.early, m.Reply)
		e.record409(ev, replyAt)
	} else if m.Reply != "" {
		e.replies[m.Reply] = ev
	}
	e.mu.Unlock()
}

func (e *stopEvents) onReply(m *nats.Msg) {
	at := time.Now()
	if !strings.HasPrefix(m.Subject, protocol.InboxPrefix(stopPrefixA)) {
		return
	}
	if m.Header.Get(micro.ErrorCodeHeader) != fmt.Sprint(protocol.CodeStale) {
		e.mu.Lock()
		delete(e.replies, m.Subject)
		e.mu.Unlock()
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	req, ok := e.replies[m.Subject]
	delete(e.replies, m.Subject)
	if !ok {
		e.early[m.Subject] = at
		return
	}
	e.record409(req, at)
}

// record409 keeps req as its job's first 409 answered at at, unless one is
// kept already. e.mu is held.
func (e *stopEvents) record409(req reqEvent, at time.Time) {
	if _, seen := e.first409[req.Token.JobID]; !seen {
		req.At = at
		e.first409[req.Token.JobID] = req
	}
}

func (e *stopEvents) onRevoke(m *nats.Msg) {
	at := time.Now()
	var r protocol.Revoke
	if json.Unmarshal(m.Data, &r) != nil {
		return
	}
	e.mu.Lock()
	if _, ok := e.revokes[r.Token.JobID]; !ok {
		e.revokes[r.Token.JobID] = at
	}
	e.mu.Unlock()
}

// recUploader records when each upload of a job started and ended.
type recUploader struct {
	up uploader.Uploader
	mu sync.Mutex
	// spans by job id
	spans map[string][]span
}

type span struct {
	tok        fencing.Token
	start, end time.Time
}

func (r *recUploader) Upload(ctx context.Context, tok fencing.Token, a uploader.Artifact) (uploader.Result, error) {
	start := time.Now()
	res, err := r.up.Upload(ctx, tok, a)
	end := time.Now()
	r.mu.Lock()
	r.spans[tok.JobID] = append(r.spans[tok.JobID], span{tok, start, end})
	r.mu.Unlock()
	return res, err
}

// UploadResumable records like Upload, so that the spool in front keeps
// resuming and aborting multipart uploads of the S3 uploader.
func (r *recUploader) UploadResumable(ctx context.Context, tok fencing.Token, a uploader.Artifact, mp *uploader.Multipart, save func(uploader.Multipart) error) (uploader.Result, error) {
	ru, ok := r.up.(uploader.Resumable)
	if !ok {
		return r.Upload(ctx, tok, a)
	}
	start := time.Now()
	res, err := ru.UploadResumable(ctx, tok, a, mp, save)
	end := time.Now()
	r.mu.Lock()
	r.spans[tok.JobID] = append(r.spans[tok.JobID], span{tok, start, end})
	r.mu.Unlock()
	return res, err
}

// Abandon passes on to the S3 uploader.
func (r *recUploader) Abandon(ctx context.Context, key, uploadID string) error {
	if ru, ok := r.up.(uploader.Resumable); ok {
		return ru.Abandon(ctx, key, uploadID)
	}
	return nil
}

func (r *recUploader) count(jobID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.spans[jobID])
}

// stopPair is an old owner (a real agent whose NATS connection runs
// through a proxy) and a new owner (a protocol-level agent).
type stopPair struct {
	idx    int
	d      *agent.Daemon
	a      *agent.Agent
	aID    string
	serial string
	up     *recUploader
	px     *proxy
	b      *simAgent
	done   chan struct{}
}

// Stop runs the stop latency scenario: jobs of real agents (simulated
// phones, uploads to an in-process S3) are taken away by each way in turn,
// on an SQLite coordinator in this process, over loopback.
func Stop(ctx context.Context, o StopOptions) (*StopReport, error) {
	o.defaults()
	rep := &StopReport{Machine: DescribeMachine(), Options: o}
	began := time.Now()
	cc := CoordConfig{
		LeaseTTL: o.LeaseTTL, ReapInterval: 100 * time.Millisecond, ScheduleInterval: 50 * time.Millisecond,
		HeartbeatEvery: 500 * time.Millisecond, OfflineAfter: 1500 * time.Millisecond, LogLevel: zerolog.InfoLevel,
	}
	sys, err := startSystem(ctx, &o.Common, "stop", DriverSQLite, cc, coordInProcess)
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	s3, err := labs3.Start(labs3.Options{})
	if err != nil {
		return nil, fmt.Errorf("start s3: %w", err)
	}
	defer s3.Close()

	ev := newStopEvents()
	mon, err := nats.Connect(sys.NATS.ClientURL(), nats.Name("bench monitor"))
	if err != nil {
		return nil, fmt.Errorf("connect monitor: %w", err)
	}
	defer mon.Close()
	for subj, h := range map[string]nats.MsgHandler{
		stopSubjects:   ev.onRequest,
		"_INBOX.>":     ev.onReply,
		revokeSubjects: ev.onRevoke,
	} {
		sub, err := mon.Subscribe(subj, h)
		if err != nil {
			return nil, fmt.Errorf("subscribe %s: %w", subj, err)
		}
		_ = sub.SetPendingLimits(-1, -1)
	}
	if err := mon.Flush(); err != nil {
		return nil, fmt.Errorf("flush monitor: %w", err)
	}

	actx, stopAgents := context.WithCancel(ctx)
	var agentsWG sync.WaitGroup
	pairs := make([]*stopPair, o.Pairs)
	bstats := &agentStats{}
	defer func() {
		stopAgents()
		agentsWG.Wait()
		for _, p := range pairs {
			if p == nil {
				continue
			}
			if p.d != nil {
				p.d.Close()
			}
			if p.b != nil {
				p.b.stop()
			}
			if p.px != nil {
				p.px.Close()
			}
		}
	}()
	for i := range pairs {
		p := &stopPair{idx: i, aID: fmt.Sprintf("%s%02d", stopPrefixA, i), serial: fmt.Sprintf("sim-stop-%02d", i), done: make(chan struct{})}
		pairs[i] = p
		if p.px, err = newProxy(strings.TrimPrefix(sys.NATS.ClientURL(), "nats://")); err != nil {
			return nil, fmt.Errorf("start proxy: %w", err)
		}
		inv := capture.NewInventory()
		if err := inv.Add(capture.NewSimulated(capture.SimOptions{Serial: p.serial, Width: o.Width, Height: o.Height})); err != nil {
			return nil, err
		}
		cfg := config.DefaultAgent()
		cfg.Sleep.Inhibit = false // an in-process agent never holds the PC awake
		cfg.AgentID = p.aID
		cfg.StateDir = filepath.Join(sys.dir, "agents", p.aID)
		cfg.Lease.SafetyMargin = config.Duration(o.SafetyMargin)
		cfg.Storage.S3 = config.S3{Endpoint: s3.Endpoint, Region: s3.Region, Bucket: s3.Bucket, AccessKey: s3.AccessKey, SecretKey: config.Secret(s3.SecretKey)}
		cfg.Storage.BandwidthLimit = config.ByteSize(o.UploadRate)
		cfg.Status.Listen = ""
		p.up = &recUploader{spans: map[string][]span{}}
		url := p.px.URL()
		p.d, err = agent.NewDaemon(ctx, cfg, agent.System{
			// The old owner reaches NATS through the proxy that cuts it
			// off for the self-fence stops.
			DialNATS: func(opts ...nats.Option) (*nats.Conn, error) {
				return nats.Connect(url, append(opts, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))...)
			},
			Phones:  inv,
			Storage: agent.StorageHooks{Wrap: func(up uploader.Uploader) uploader.Uploader { p.up.up = up; return p.up }},
			Log:     zerolog.Nop(), Version: "bench",
		})
		if err != nil {
			return nil, err
		}
		p.a = p.d.Agent()
		agentsWG.Go(func() { _ = p.d.Run(actx, actx.Done()) })
		bID := fmt.Sprintf("%s%02d", stopPrefixB, i)
		bnc, err := sys.Conn(bID, "")
		if err != nil {
			return nil, err
		}
		p.b = newSimAgent(bID, bnc, nil, 100000, 0, bstats)
		p.b.skipWaits = true
		if err := p.b.start(actx); err != nil {
			return nil, err
		}
	}
	for _, p := range pairs {
		if err := waitFor(ctx, 10*time.Second, p.a.Ready); err != nil {
			return nil, fmt.Errorf("agent %s not connected: %w", p.aID, err)
		}
	}
	ways := []struct {
		way string
		n   int
	}{{StopRevoke, o.Stops}, {StopStaleBusy, o.Stops}, {StopStaleRenew, o.Stops}, {StopSelfFence, o.FenceStops}}
	for _, w := range ways {
		o.logf("stop: %s: %d stops over %d pairs", w.way, w.n, o.Pairs)
		var (
			mu      sync.Mutex
			samples []StopSample
			next    atomic.Int64
			wg      sync.WaitGroup
			errOnce sync.Once
			runErr  error
			skipped atomic.Int64
		)
		probe := startProbe()
		for _, p := range pairs {
			wg.Go(func() {
				for next.Add(1) <= int64(w.n) && ctx.Err() == nil {
					s, err := stopOnce(ctx, &o, sys, ev, p, w.way)
					if errors.Is(err, errSkipped) {
						skipped.Add(1)
						next.Add(-1)
						continue
					}
					if err != nil {
						errOnce.Do(func() { runErr = fmt.Errorf("%s stop on %s: %w", w.way, p.aID, err) })
						return
					}
					mu.Lock()
					samples = append(samples, s)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		wake := probe.Stop()
		if runErr != nil {
			return rep, runErr
		}
		row := summarizeStops(w.way, samples)
		row.Skipped = int(skipped.Load())
		row.Wakeup = wake
		rep.Rows = append(rep.Rows, row)
		if w.way == StopSelfFence {
			base := StopRow{Way: StopLeaseOnly, Samples: samples, Last: row.Reclaim, Wakeup: wake}
			rep.Rows = append(rep.Rows, base)
		}
	}
	rep.Elapsed = time.Since(began)
	return rep, nil
}

func waitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}

var stopSeq atomic.Int64

// errSkipped is a stop that did not measure what it set out to.
var errSkipped = errors.New("stop skipped")

// stopTask is the job of an old owner: busy (screenshots back to back,
// each uploaded and registered) or waiting (one screenshot, then a long
// wait during which only renewals are sent).
func stopTask(serial string, busy bool) protocol.Task {
	t := protocol.Task{Device: protocol.DeviceSelector{Serial: serial}}
	if !busy {
		t.Steps = []protocol.Step{{Op: protocol.OpScreenshot}, {Op: protocol.OpWait, DurationMS: 60000}}
		return t
	}
	for range 200 {
		t.Steps = append(t.Steps, protocol.Step{Op: protocol.OpScreenshot}, protocol.Step{Op: protocol.OpWait, DurationMS: 20})
	}
	return t
}

func stopOnce(ctx context.Context, o *StopOptions, sys *system, ev *stopEvents, p *stopPair, way string) (StopSample, error) {
	s := StopSample{Way: way}
	id := fmt.Sprintf("stop-%d", stopSeq.Add(1))
	busy := way != StopStaleRenew
	if _, err := sys.Store.Submit(ctx, jobstore.JobSpec{ID: id, Task: stopTask(p.serial, busy)}); err != nil {
		return s, err
	}
	sys.Kick()
	// The job runs on the old owner and has uploaded its first capture.
	if err := waitFor(ctx, 15*time.Second, func() bool { return p.up.count(id) >= 1 }); err != nil {
		return s, fmt.Errorf("job %s: no upload: %w", id, err)
	}
	var delay time.Duration
	switch way {
	case StopStaleRenew, StopSelfFence:
		// Anywhere in the renewal period.
		delay = 50*time.Millisecond + time.Duration(rand.Int64N(int64(o.LeaseTTL/3)))
	default:
		delay = time.Duration(rand.Int64N(int64(20 * time.Millisecond)))
	}
	sleepCtx(ctx, delay)
	before, err := sys.Store.Get(ctx, id)
	if err != nil {
		return s, err
	}
	old := fencing.Token{JobID: id, Owner: before.WorkerID, Generation: before.Generation}
	if before.Status != jobstore.StatusInProgress || !strings.HasPrefix(before.WorkerID, p.aID+"/") {
		// On a loaded machine the job may have been given back (an assign
		// answered late, a lease run out) after its first upload: drop it.
		if _, err := sys.Store.Cancel(ctx, id, "bench: job moved before the trigger"); err != nil && !errors.Is(err, jobstore.ErrConflict) {
			return s, err
		}
		if err := waitFor(ctx, 2*o.LeaseTTL+5*time.Second, func() bool {
			for _, j := range p.a.Jobs() {
				if j.Token.JobID == id {
					return false
				}
			}
			return true
		}); err != nil {
			return s, fmt.Errorf("job %s still running on %s after its cancel: %w", id, p.aID, err)
		}
		return s, errSkipped
	}
	var t0 time.Time
	switch way {
	case StopRevoke, StopStaleBusy, StopStaleRenew:
		t0 = time.Now()
		// On a loaded machine the new owner's heartbeat may come late
		// enough for the coordinator to count it offline for a moment:
		// try again. The trigger is the grant itself (below), whenever it
		// happened.
		for try := 0; ; try++ {
			_, err := sys.Coord.Reassign(ctx, id, p.b.id, way == StopRevoke)
			if err == nil {
				break
			}
			if try == 50 || !strings.Contains(err.Error(), "not connected") {
				return s, err
			}
			sleepCtx(ctx, 100*time.Millisecond)
		}
	case StopSelfFence:
		t0 = time.Now()
		p.px.Partition()
	}
	s.LeaseLeft = before.LeaseExpiresAt.Sub(t0)
	stoppedBy := func() (agent.StopRecord, bool) {
		for _, r := range p.a.Stops() {
			if r.Token == old {
				return r, true
			}
		}
		return agent.StopRecord{}, false
	}
	running := func() bool {
		for _, j := range p.a.Jobs() {
			if j.Token.JobID == id {
				return true
			}
		}
		return false
	}
	wait := 10 * time.Second
	if way == StopSelfFence {
		wait = 2*o.LeaseTTL + 5*time.Second
	}
	// Polled every 2 ms: the running jobs first, a copy of one or two
	// entries, and the agent's stop records (a copy of every one kept) only
	// once the job is gone, so that the polling adds little to the
	// process's allocations and to its garbage collections, which the
	// stops measured here would wait behind.
	var rec agent.StopRecord
	if err := waitFor(ctx, wait, func() bool {
		if running() {
			return false
		}
		var ok bool
		rec, ok = stoppedBy()
		return ok
	}); err != nil {
		return s, fmt.Errorf("job %s not stopped on %s: %w", id, p.aID, err)
	}
	s.Cause = rec.Cause
	s.ToStop = rec.At.Sub(t0)
	if way == StopSelfFence {
		// The coordinator reclaims the expired lease; the job is then
		// cancelled so that the old owner does not get it again, and the
		// partition heals.
		if err := waitFor(ctx, 2*o.LeaseTTL+5*time.Second, func() bool {
			ev.mu.Lock()
			defer ev.mu.Unlock()
			_, ok := ev.revokes[id]
			return ok
		}); err != nil {
			return s, fmt.Errorf("job %s: no reclaim: %w", id, err)
		}
		if _, err := sys.Store.Cancel(ctx, id, "bench: stop measured"); err != nil && !errors.Is(err, jobstore.ErrConflict) {
			return s, err
		}
		p.px.Heal()
		if err := waitFor(ctx, 15*time.Second, p.a.Ready); err != nil {
			return s, fmt.Errorf("agent %s did not reconnect: %w", p.aID, err)
		}
	}
	// Whatever was on its way has arrived.
	sleepCtx(ctx, 30*time.Millisecond)
	if way != StopSelfFence {
		// The reassignment happened when the store granted the job to the
		// new owner, as its write_events row says (database clock; SQLite
		// keeps milliseconds, so the trigger is up to 1 ms early and the
		// latencies up to 1 ms long).
		evs, err := sys.Store.WriteEvents(ctx, id)
		if err != nil {
			return s, err
		}
		found := false
		for _, e := range evs {
			if e.Verb == "reassign" && e.Accepted && e.Generation == old.Generation+1 {
				t0, found = e.At, true
				break
			}
		}
		if !found {
			// The job changed hands between the read and the reassignment
			// (on a loaded machine, a lease can run out): not a stop of
			// the token read.
			return s, errSkipped
		}
		s.LeaseLeft = before.LeaseExpiresAt.Sub(t0)
		s.ToStop = rec.At.Sub(t0)
	}
	last := t0
	ev.mu.Lock()
	for _, r := range ev.requests[id] {
		if r.Token != old {
			continue
		}
		if r.At.After(t0) {
			s.SideAfter++
		}
		if r.At.After(last) {
			last = r.At
		}
	}
	if f, ok := ev.first409[id]; ok {
		s.To409 = f.At.Sub(t0)
		s.Verb409 = f.Verb
	}
	if r, ok := ev.revokes[id]; ok {
		switch way {
		case StopSelfFence:
			s.ToReclaim = r.Sub(t0)
		case StopRevoke:
			s.ToRevoke = r.Sub(t0)
		}
	}
	delete(ev.requests, id)
	ev.mu.Unlock()
	p.up.mu.Lock()
	for _, sp := range p.up.spans[id] {
		if sp.tok != old {
			continue
		}
		if sp.start.Before(t0) && sp.end.After(t0) {
			s.InFlight = true
		}
		if sp.end.After(t0) {
			s.SideAfter++
		}
		if sp.end.After(last) {
			last = sp.end
		}
	}
	delete(p.up.spans, id)
	p.up.mu.Unlock()
	s.ToLast = last.Sub(t0)
	if s.To409 > 0 {
		s.From409 = max(0, last.Sub(t0.Add(s.To409)))
	}
	if way == StopSelfFence {
		s.LastBefore = last.Sub(t0.Add(s.ToReclaim))
	}
	return s, nil
}

func summarizeStops(way string, ss []StopSample) StopRow {
	row := StopRow{Way: way, Samples: ss, Verbs: map[string]int{}}
	var last, stop, from, to, rec, vs, left, rev, revStop []time.Duration
	for _, s := range ss {
		last = append(last, s.ToLast)
		stop = append(stop, s.ToStop)
		left = append(left, s.LeaseLeft)
		if s.InFlight {
			row.InFlight++
		}
		if s.Verb409 != "" {
			row.Verbs[s.Verb409]++
			from = append(from, s.From409)
			to = append(to, s.To409)
		}
		if way == StopRevoke {
			rev = append(rev, s.ToRevoke)
			revStop = append(revStop, s.ToStop-s.ToRevoke)
		}
		if way == StopSelfFence {
			rec = append(rec, s.ToReclaim)
			vs = append(vs, s.LastBefore)
		}
	}
	row.Last, row.Stop, row.From409, row.To409 = Summarize(last), Summarize(stop), Summarize(from), Summarize(to)
	row.Reclaim, row.LastVsRec, row.LeaseLeft = Summarize(rec), Summarize(vs), Summarize(left)
	row.ToRevoke, row.RevToStop = Summarize(rev), Summarize(revStop)
	return row
}

// PrintStop writes the tables of the stop scenario.
func PrintStop(w io.Writer, r *StopReport) {
	o := r.Options
	t := Table{Title: fmt.Sprintf("Stop latency through the real coordinator: trigger → the old owner's last side effect (lease TTL %v, agent safety margin %v, %d agent pairs at once)", o.LeaseTTL, o.SafetyMargin, o.Pairs),
		Header: []string{"way", "stops", "p50 ms", "p99 ms", "max ms", "trigger → stop p50 ms", "p99 ms", "upload in flight", "ratio p99 ÷ lease-expiry p50", "wakeup p99 / max ms"}}
	var basis time.Duration
	for _, x := range r.Rows {
		if x.Way == StopLeaseOnly {
			basis = x.Last.P50
		}
	}
	for _, x := range r.Rows {
		ratio := "-"
		if basis > 0 {
			ratio = fmt.Sprintf("%.4f", float64(x.Last.P99)/float64(basis))
		}
		if x.Way == StopLeaseOnly {
			t.Add(x.Way, fmt.Sprint(x.Last.N), ms(x.Last.P50), ms(x.Last.P99), ms(x.Last.Max), "-", "-", "-", ratio,
				ms(x.Wakeup.P99)+" / "+ms(x.Wakeup.Max))
			continue
		}
		t.Add(x.Way, fmt.Sprint(x.Last.N), ms(x.Last.P50), ms(x.Last.P99), ms(x.Last.Max), ms(x.Stop.P50), ms(x.Stop.P99),
			fmt.Sprint(x.InFlight), ratio, ms(x.Wakeup.P99)+" / "+ms(x.Wakeup.Max))
	}
	for _, x := range r.Rows {
		if x.Skipped > 0 {
			t.Notes = append(t.Notes, fmt.Sprintf("%s: %d more stops not counted: the job changed hands between its read and the trigger.", x.Way, x.Skipped))
		}
	}
	t.Notes = append(t.Notes,
		"trigger: the reassignment (revoke, 409 ways) or the moment the old owner lost the coordinator (self-fence, lease-expiry).",
		"side effect: a request of the old owner's token reaching the coordinator, or an upload of it ending (done or cut off); 0 = none after the trigger.",
		"wakeup: how late a 1 ms sleep of this process woke up meanwhile (the machine's own floor under every latency above).",
		"lease-expiry: the same partitions as self-fence, measured to the moment the coordinator reclaimed the expired lease (database clock): a design with no stop path cannot stop the old owner before that.")
	t.Print(w)
	d := Table{Title: "Details", Header: []string{"way", "detail", "p50 ms", "p99 ms", "max ms"}}
	for _, x := range r.Rows {
		switch x.Way {
		case StopStaleBusy, StopStaleRenew:
			var verbs []string
			for v, n := range x.Verbs {
				verbs = append(verbs, fmt.Sprintf("%s %d", v, n))
			}
			d.Add(x.Way, "reassignment → first 409 ("+strings.Join(verbs, ", ")+")", ms(x.To409.P50), ms(x.To409.P99), ms(x.To409.Max))
			d.Add(x.Way, "first 409 → last side effect", ms(x.From409.P50), ms(x.From409.P99), ms(x.From409.Max))
		case StopSelfFence:
			d.Add(x.Way, "last side effect − reclaim (negative: before the coordinator took the job back)", ms(x.LastVsRec.P50), ms(x.LastVsRec.P99), ms(x.LastVsRec.Max))
		case StopRevoke:
			d.Add(x.Way, "reassignment → revoke published", ms(x.ToRevoke.P50), ms(x.ToRevoke.P99), ms(x.ToRevoke.Max))
			d.Add(x.Way, "revoke published → the old owner's job stopped", ms(x.RevToStop.P50), ms(x.RevToStop.P99), ms(x.RevToStop.Max))
			d.Add(x.Way, "lease left at the reassignment (what waiting for expiry would take)", ms(x.LeaseLeft.P50), ms(x.LeaseLeft.P99), ms(x.LeaseLeft.Max))
		}
	}
	d.Print(w)
	fmt.Fprintf(w, "(%v in all)\n", r.Elapsed.Round(time.Second))
}
