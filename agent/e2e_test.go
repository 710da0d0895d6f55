package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakewda"
	"github.com/edgeagent/edgeagent/testkit/testenv"
	"github.com/edgeagent/edgeagent/uploader"
)

type system struct {
	t     *testing.T
	ns    *server.Server
	nsURL string
	mio   testenv.MinIOServer
	store *pgstore.Store
	coord *coordinator.Server
	s3    *uploader.S3
	ctx   context.Context
	wg    sync.WaitGroup
}

func newSystem(t *testing.T, ttl time.Duration) *system {
	t.Helper()
	ns := testenv.NATS(t)
	dsn := testenv.Postgres(t)
	mio := testenv.MinIO(t)
	ctx, cancel := context.WithCancel(context.Background())
	st, err := pgstore.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	s3, err := uploader.NewS3(uploader.S3Options{Endpoint: mio.Endpoint, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey, Bucket: mio.Bucket})
	if err != nil {
		t.Fatalf("new s3: %v", err)
	}
	sys := &system{t: t, ns: ns, nsURL: ns.ClientURL(), mio: mio, store: st, s3: s3, ctx: ctx}
	nc := sys.conn("coord")
	sys.coord = coordinator.New(nc, st, coordinator.Options{
		LeaseTTL: ttl, ReapInterval: 100 * time.Millisecond, ScheduleInterval: 50 * time.Millisecond,
		HeartbeatEvery: 200 * time.Millisecond, Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	})
	sys.wg.Go(func() {
		if err := sys.coord.Run(ctx); err != nil {
			t.Errorf("coordinator: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		sys.wg.Wait()
		st.Close()
	})
	return sys
}

func (s *system) conn(name string) *nats.Conn {
	s.t.Helper()
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond), nats.ReconnectJitter(0, 0)}
	if name != "coord" {
		// As the agent's own dialer does: a request made while the
		// connection is down fails at once instead of going out later.
		opts = append(opts, nats.ReconnectBufSize(-1))
		opts = append(opts, nats.CustomInboxPrefix(protocol.InboxPrefix(name)))
	}
	nc, err := nats.Connect(s.nsURL, opts...)
	if err != nil {
		s.t.Fatalf("connect nats: %v", err)
	}
	s.t.Cleanup(nc.Close)
	return nc
}

// startAgent runs an agent with one simulated phone until the test ends.
func (s *system) startAgent(id string) *agent.Agent {
	s.t.Helper()
	a, _ := s.startAgentWith(id, agentSetup{})
	return a
}

// agentSetup adjusts the agent of startAgentWith; zero values take the
// defaults of startAgent.
type agentSetup struct {
	phone capture.SimOptions // serial defaults to sim-<id>
	// iphone, when set, is the agent's phone instead of phone: the fake
	// iPhone added to its inventory through WatchIOS, as the daemon adds
	// a configured iPhone, probed once (then every hour).
	iphone *fakewda.Phone
	extra  []capture.SimOptions
	spool  string
	store  uploader.Uploader
	margin time.Duration
	slots  int
	log    io.Writer // JSON log at debug level; default: the test log at warn
	tweak  func(*agent.Options)
}

// startAgentWith runs an agent until the test ends and returns it with its
// simulated phone.
func (s *system) startAgentWith(id string, st agentSetup) (*agent.Agent, *capture.Simulated) {
	s.t.Helper()
	if st.phone.Serial == "" {
		st.phone.Serial = "sim-" + id
	}
	if st.phone.Width == 0 {
		st.phone.Width, st.phone.Height = 160, 320
	}
	inv := capture.NewInventory()
	var phone *capture.Simulated
	if st.iphone != nil {
		stop, err := capture.WatchIOS(s.ctx, inv, []capture.IOSPhone{{UDID: st.iphone.UDID(), WDAURL: st.iphone.URL()}},
			capture.IOSOptions{Interval: time.Hour})
		if err != nil {
			s.t.Fatal(err)
		}
		s.t.Cleanup(stop)
		phone = st.iphone.Screen()
	} else {
		phone = capture.NewSimulated(st.phone)
		if err := inv.Add(phone); err != nil {
			s.t.Fatal(err)
		}
	}
	for _, o := range st.extra {
		if err := inv.Add(capture.NewSimulated(o)); err != nil {
			s.t.Fatal(err)
		}
	}
	store := st.store
	if store == nil {
		store = s.s3
	}
	if st.margin == 0 {
		st.margin = 200 * time.Millisecond
	}
	log := zerolog.New(zerolog.NewTestWriter(s.t)).Level(zerolog.WarnLevel)
	if st.log != nil {
		log = zerolog.New(st.log).Level(zerolog.DebugLevel)
	}
	opts := agent.Options{
		AgentID: id, Conn: s.conn(id), Phones: agent.InventoryPhones(inv, st.spool, capture.OpLogOptions{}),
		Store: store, SafetyMargin: st.margin, Slots: st.slots, RequestTimeout: time.Second, Log: log,
	}
	if st.tweak != nil {
		st.tweak(&opts)
	}
	a, err := agent.New(opts)
	if err != nil {
		s.t.Fatal(err)
	}
	s.wg.Go(func() {
		if err := a.Run(s.ctx); err != nil {
			s.t.Errorf("agent %s: %v", id, err)
		}
	})
	return a, phone
}

func (s *system) waitJob(id string, cond func(jobstore.Job) bool, what string) jobstore.Job {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		j, err := s.store.Get(s.ctx, id)
		if err == nil && cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("job %s: timed out waiting for %s (last: %+v, err %v)", id, what, j, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEndToEndScreenshot: one screenshot job through NATS, PostgreSQL and
// MinIO; the object carries all three stamps and the result is accepted.
func TestEndToEndScreenshot(t *testing.T) {
	leakCheck(t)
	sys := newSystem(t, 3*time.Second)
	sys.startAgent("pc-a")
	job, err := sys.store.Submit(sys.ctx, jobstore.JobSpec{Task: protocol.Task{Steps: []protocol.Step{
		{Op: protocol.OpLaunch, Package: "com.example.app"},
		{Op: protocol.OpTap, X: 10, Y: 20},
		{Op: protocol.OpScreenshot, Name: "home.png"},
		{Op: protocol.OpUIDump, Name: "home.xml"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	done := sys.waitJob(job.ID, func(j jobstore.Job) bool {
		return j.Status != jobstore.StatusQueued && j.Status != jobstore.StatusInProgress
	}, "completion")
	if done.Status != jobstore.StatusSucceeded {
		t.Fatalf("job status %s (%s), want SUCCEEDED", done.Status, done.FailReason)
	}
	tok := fencing.Token{JobID: job.ID, Owner: done.CompletedBy, Generation: done.Generation}
	if !strings.HasPrefix(tok.Owner, "pc-a/") || tok.Generation != 1 {
		t.Fatalf("accepted token %v, want pc-a at generation 1", tok)
	}
	for _, name := range []string{"home.png", "home.xml", agent.ManifestName, capture.OpLogName} {
		key := "jobs/" + job.ID + "/g1/" + name
		obj, err := sys.s3.Stat(sys.ctx, key)
		if err != nil {
			t.Fatalf("stat %s: %v", key, err)
		}
		if obj.Token != tok {
			t.Fatalf("%s stamps = %+v, want %+v", key, obj.Token, tok)
		}
		for _, k := range []string{"job-id", "owner", "generation"} {
			if obj.Metadata[k] == "" {
				t.Fatalf("%s: x-amz-meta-%s missing (metadata %v)", key, k, obj.Metadata)
			}
		}
	}
	arts, err := sys.store.Artifacts(sys.ctx, job.ID, 1)
	if err != nil || len(arts) != 4 {
		t.Fatalf("registered artifacts = %d (%v), want 4", len(arts), err)
	}
	var res struct {
		Artifacts []string `json:"artifacts"`
	}
	if err := json.Unmarshal(done.Result, &res); err != nil || len(res.Artifacts) != 4 {
		t.Fatalf("result %s: %v", done.Result, err)
	}
}

type seen struct {
	at   time.Time
	verb string
	tok  fencing.Token
}

// TestStaleAgentStops: a job is reassigned from agent A to agent B while A is
// in the middle of it, over each phone backend (a simulated Android phone;
// an iPhone behind the fake WebDriverAgent) and each way A learns it: the
// 409 to its next fenced call (no revoke sent), or the coordinator's
// revoke. A's job context is cancelled, and nothing more of that job comes
// from A: no upload, no registration, no result, and every write it tried
// after the reassignment was refused. On an iPhone nothing reaches A's
// WebDriverAgent after the stop. B finishes the job at generation 2.
func TestStaleAgentStops(t *testing.T) {
	for _, backend := range []string{"android", "iphone"} {
		for _, revoke := range []bool{false, true} {
			name := backend + "/409"
			if revoke {
				name = backend + "/revoke"
			}
			t.Run(name, func(t *testing.T) { staleAgentStops(t, backend == "iphone", revoke) })
		}
	}
}

// startIPhone starts a fake iPhone with udid until the test ends. Its
// screen is small (180 x 360 pixels), as the simulated Android phones of
// these tests are: the fake phone draws and encodes a screenshot of a
// full-size iPhone screen (1179 x 2556) in a fifth of a second under the
// race detector, of this one in a hundredth.
func startIPhone(t *testing.T, udid string) *fakewda.Phone {
	t.Helper()
	p, err := fakewda.Start(fakewda.Options{UDID: udid, WidthPt: 60, HeightPt: 120})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func staleAgentStops(t *testing.T, iphone, revoke bool) {
	leakCheck(t)
	sys := newSystem(t, 3*time.Second)
	var phoneA, phoneB *fakewda.Phone
	if iphone {
		phoneA, phoneB = startIPhone(t, "00008110-00000000000000A1"), startIPhone(t, "00008110-00000000000000B2")
	}
	a, screenA := sys.startAgentWith("pc-a", agentSetup{iphone: phoneA})

	// Watch every request agent A sends, as the NATS server sees it.
	var mu sync.Mutex
	var fromA []seen
	mon := sys.conn("monitor")
	if _, err := mon.Subscribe("edge.v1.coord.pc-a.>", func(m *nats.Msg) {
		var body struct {
			Token fencing.Token `json:"token"`
		}
		_ = json.Unmarshal(m.Data, &body)
		p := strings.Split(m.Subject, ".")
		mu.Lock()
		fromA = append(fromA, seen{at: time.Now(), verb: p[len(p)-1], tok: body.Token})
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	_ = mon.Flush()

	// The job reads an observation off the launcher first: A reads it too,
	// but only B's result may carry it into the dataset.
	steps := []protocol.Step{{Op: protocol.OpExtract, Name: "icon", Element: &protocol.Selector{Text: "Shop"}}, {Op: protocol.OpScreenshot, Name: "s1.png"}}
	for i := 2; i <= 5; i++ {
		steps = append(steps, protocol.Step{Op: protocol.OpWait, DurationMS: 200}, protocol.Step{Op: protocol.OpScreenshot, Name: "s" + string(rune('0'+i)) + ".png"})
	}
	job, err := sys.store.Submit(sys.ctx, jobstore.JobSpec{Task: protocol.Task{Steps: steps}})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until A holds the job and has stored its first screenshot.
	deadline := time.Now().Add(20 * time.Second)
	for {
		arts, _ := sys.store.Artifacts(sys.ctx, job.ID, 1)
		if slices.ContainsFunc(arts, func(a jobstore.ArtifactRecord) bool { return a.Name == "s1.png" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("agent A never registered its first screenshot")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// From now on A's phone takes half a second over each screenshot (the
	// stop cuts it short): with the waits, A is about 2.8 s from the end of
	// the job, time for the test to start B and reassign the job while A
	// is in the middle of it. B's phone answers at once, so B runs the
	// job in about a second.
	screenA.SetLatency(protocol.OpScreenshot, 500*time.Millisecond)
	sys.startAgentWith("pc-b", agentSetup{iphone: phoneB})
	var lease jobstore.Lease
	for {
		lease, err = sys.coord.Reassign(sys.ctx, job.ID, "pc-b", revoke)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reassign: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	reassignedAt := time.Now()
	if lease.Token.Generation != 2 {
		t.Fatalf("reassigned generation %d, want 2", lease.Token.Generation)
	}

	// A learns of it from the revoke, or from a 409 on its next fenced
	// call when no revoke was sent.
	var stop agent.StopRecord
	for {
		stops := a.Stops()
		if len(stops) > 0 {
			stop = stops[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("agent A never stopped its job")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cause := fencing.ErrStale
	if revoke {
		cause = fencing.ErrRevoked
	}
	if stop.Token.JobID != job.ID || stop.Token.Generation != 1 || !errors.Is(stop.Err, cause) {
		t.Fatalf("stop record %+v, want job %s g1 with cause %q", stop, job.ID, cause)
	}
	t.Logf("A stopped %v after the reassignment (cut short: %s)", stop.At.Sub(reassignedAt), stop.CutShort)

	done := sys.waitJob(job.ID, func(j jobstore.Job) bool { return j.Status == jobstore.StatusSucceeded }, "B's result")
	if done.Generation != 2 || !strings.HasPrefix(done.CompletedBy, "pc-b/") {
		t.Fatalf("accepted result from %s at g%d, want pc-b at g2", done.CompletedBy, done.Generation)
	}
	if len(a.Jobs()) != 0 {
		t.Fatalf("agent A still runs %v", a.Jobs())
	}
	// Give any straggler from A time to show up, then audit.
	time.Sleep(time.Second)

	mu.Lock()
	defer mu.Unlock()
	// NATS delivers A's messages in order: it carried no more requests of
	// the job than A had sent when it stopped.
	var ofJob int
	for _, m := range fromA {
		if m.tok == stop.Token {
			ofJob++
		}
	}
	if ofJob > stop.Calls {
		t.Errorf("NATS carried %d requests of the stopped token, agent A had sent %d when it stopped", ofJob, stop.Calls)
	}
	var sawStale bool
	for _, m := range fromA {
		if m.tok.JobID == job.ID && m.at.After(reassignedAt) && !m.at.After(stop.At) {
			sawStale = true
		}
	}
	if !sawStale && !revoke {
		t.Error("no fenced call from A between the reassignment and its stop: the 409 path was not exercised")
	}
	// Storage: nothing of generation 1 was written after the stop, and A
	// never got as far as its operation log.
	objs, err := sys.s3.List(sys.ctx, "jobs/"+job.ID+"/g1/")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.LastModified.After(stop.At.Add(time.Second)) { // S3 times have 1 s resolution
			t.Errorf("object %s written at %v, after A's stop at %v", o.Key, o.LastModified, stop.At)
		}
		if strings.HasSuffix(o.Key, capture.OpLogName) {
			t.Errorf("stale agent uploaded its operation log %s", o.Key)
		}
	}
	// Store: every write A attempted after the reassignment was refused.
	evs, err := sys.store.WriteEvents(sys.ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	var reassignID int64
	for _, e := range evs {
		if e.Verb == "reassign" && e.Generation == 2 && e.Accepted {
			reassignID = e.ID
		}
	}
	if reassignID == 0 {
		t.Fatalf("no accepted reassign event in %+v", evs)
	}
	var refused int
	for _, e := range evs {
		if e.ID < reassignID || !strings.HasPrefix(e.Owner, "pc-a/") {
			continue
		}
		if e.Accepted {
			t.Errorf("write %s by A accepted after the reassignment: %+v", e.Verb, e)
		} else {
			refused++
		}
	}
	if refused == 0 && !revoke {
		t.Error("no refused write from A recorded in write_events")
	}
	// The dataset holds B's observation alone, accepted at generation 2.
	rows, err := sys.store.ListObservations(sys.ctx, jobstore.ObservationFilter{Project: jobstore.DefaultProject, JobID: job.ID, All: true, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Generation != 2 || !strings.HasPrefix(rows[0].Owner, "pc-b/") || !rows[0].Accepted || rows[0].Raw != "Shop" {
		t.Errorf("observations of the job %+v, want B's alone, accepted at generation 2", rows)
	}
	if iphone {
		// A's iPhone ran the job through WDA until the stop, and nothing
		// reached its WDA after it; B's iPhone took the rest of the
		// screenshots.
		var before int
		for _, r := range phoneA.Received() {
			if r.At.After(stop.At) {
				t.Errorf("%s %s reached A's iPhone %v after the stop", r.Method, r.Path, r.At.Sub(stop.At))
			} else if r.Method == "GET" && strings.HasSuffix(r.Path, "/screenshot") {
				before++
			}
		}
		if before == 0 {
			t.Errorf("A's iPhone took no screenshot before the stop: %v", phoneA.Requests())
		}
		if !slices.ContainsFunc(phoneB.Received(), func(r fakewda.Request) bool { return strings.HasSuffix(r.Path, "/screenshot") }) {
			t.Errorf("B's iPhone took no screenshot: %v", phoneB.Requests())
		}
	}
}
