package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestMain: the tests that start the real binaries run in parallel
// (t.Parallel; at most GOMAXPROCS at once): each has its own NATS server,
// PostgreSQL database, bucket, adb server and phones, and most of their time
// is spent waiting (the network phone's test waits over a minute for the adb
// server to drop a phone), so the package ends when its longest test does
// instead of after the sum of them. Its file sorts first so that it starts
// first. Tests that set environment variables stay sequential.
func TestMain(m *testing.M) { testenv.Main(m) }

// lab is a coordinator (PostgreSQL store) in the test process on the
// servers of env (embedded NATS, PostgreSQL, MinIO), for runs of the real
// edgeagent binary (env.StartAgent).
type lab struct {
	t     *testing.T
	env   *e2e.Env
	ns    *server.Server
	mio   testenv.MinIOServer
	store *pgstore.Store
	coord *coordinator.Server
	ctx   context.Context
	dsn   string // the store's PostgreSQL database
}

func newLab(t *testing.T, ttl time.Duration) *lab {
	t.Helper()
	return newLabWith(t, ttl, nil)
}

// newLabWith is newLab with the coordinator's options adjusted by tweak.
func newLabWith(t *testing.T, ttl time.Duration, tweak func(*coordinator.Options, testenv.MinIOServer)) *lab {
	t.Helper()
	return newLabStore(t, ttl, tweak, nil)
}

// newLabStore is newLabWith with the coordinator's store wrapped by wrap
// (nil: the PostgreSQL store itself).
func newLabStore(t *testing.T, ttl time.Duration, tweak func(*coordinator.Options, testenv.MinIOServer), wrap func(*pgstore.Store) jobstore.Store) *lab {
	t.Helper()
	env := e2e.NewEnv(t)
	ns, dsn, mio := env.NATS(), env.Postgres(), env.MinIO()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := pgstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(ns.ClientURL(), nats.Name("coord"))
	if err != nil {
		t.Fatal(err)
	}
	l := &lab{t: t, env: env, ns: ns, mio: mio, store: st, ctx: ctx, dsn: dsn}
	opts := coordinator.Options{
		LeaseTTL: ttl, ReapInterval: 100 * time.Millisecond, ScheduleInterval: 50 * time.Millisecond,
		HeartbeatEvery: 200 * time.Millisecond, Log: zerolog.Nop(),
	}
	if tweak != nil {
		tweak(&opts, mio)
	}
	var cs jobstore.Store = st
	if wrap != nil {
		cs = wrap(st)
	}
	l.coord = coordinator.New(nc, cs, opts)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := l.coord.Run(ctx); err != nil {
			t.Errorf("coordinator: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		nc.Close()
		st.Close()
	})
	return l
}

// edgecoord returns an edgecoord config on the lab's servers (store,
// storage), for its management commands.
func (l *lab) edgecoord() *e2e.Coordinator {
	l.t.Helper()
	return l.env.NewCoordinator(e2e.CoordinatorOptions{ID: "agent-test", Storage: true, Extra: "agents:\n  offline_after: 30s\n"})
}

// edgecoord runs `edgecoord <args>` with c's config and returns its
// standard output; the command must exit 0.
func edgecoord(t *testing.T, c *e2e.Coordinator, args ...string) string {
	t.Helper()
	out, errOut, code := c.CLI(t, args...)
	if code != 0 {
		t.Fatalf("edgecoord %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// leased waits until the job runs under a lease its owner renewed, and
// returns that owner.
func (l *lab) leased(t *testing.T, jobID string) string {
	t.Helper()
	var owner string
	testenv.Eventually(t, 30*time.Second, "job "+jobID+" to be renewed by the agent", func() bool {
		evs, _ := l.store.WriteEvents(l.ctx, jobID)
		for _, e := range evs {
			if e.Verb == "renew" && e.Accepted {
				owner = e.Owner
				return true
			}
		}
		return false
	})
	return owner
}

func (l *lab) submit(t *testing.T, steps ...protocol.Step) string {
	t.Helper()
	j, err := l.store.Submit(l.ctx, jobstore.JobSpec{Task: protocol.Task{Steps: steps}})
	if err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// events returns the write events of a job made by owner.
func (l *lab) events(t *testing.T, jobID, owner string) []jobstore.WriteEvent {
	t.Helper()
	evs, err := l.store.WriteEvents(l.ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	var out []jobstore.WriteEvent
	for _, e := range evs {
		if e.Owner == owner {
			out = append(out, e)
		}
	}
	return out
}

var (
	screenshot = protocol.Step{Op: protocol.OpScreenshot}
	wait       = func(ms int64) protocol.Step { return protocol.Step{Op: protocol.OpWait, DurationMS: ms} }
)

// TestDrainOnSIGTERM runs the real binary against a
// coordinator, NATS and MinIO:
//
//   - finish: on SIGTERM the running job finishes and its result is
//     accepted, a job submitted after the signal is not taken, exit 0; a
//     second instance on the same state directory is refused meanwhile;
//   - release: the running job outlasts shutdown_timeout and is released
//     with a fenced fail (requeue) as the binary's last call, exit 0;
//   - second signal: a second SIGTERM stops at once, exit 0, the job is
//     stopped without a further call.
func TestDrainOnSIGTERM(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if runtime.GOOS == "windows" {
		t.Skip("SIGTERM: Unix")
	}
	t.Run("finish", func(t *testing.T) {
		// The job must finish in its one lease: a lease long enough that
		// renewals answered late on a busy machine do not end it.
		l := newLab(t, 6*time.Second)
		state := t.TempDir()
		a := l.env.StartAgent(e2e.AgentOptions{StateDir: state, ShutdownTimeout: 30 * time.Second})
		p := a.Process
		job := l.submit(t, screenshot, wait(1500), screenshot)
		owner := l.leased(t, job)

		second := a.Start()
		if code := second.Wait(t); code != 1 || !strings.Contains(second.Log(), "state directory is in use by another edgeagent") {
			t.Fatalf("second instance: exit %d, log:\n%s", code, second.Log())
		}

		p.Signal(t, syscall.SIGTERM)
		testenv.Eventually(t, 10*time.Second, "the drain to begin", func() bool { return len(p.Entries("shutting down: taking no new jobs")) > 0 })
		late := l.submit(t, screenshot)
		if code := p.Wait(t); code != 0 {
			t.Fatalf("exit status %d, want 0", code)
		}
		j, err := l.store.Get(l.ctx, job)
		if err != nil || j.Status != jobstore.StatusSucceeded || j.CompletedBy != owner {
			t.Fatalf("running job after the drain: %+v %v, want SUCCEEDED by %s", j, err, owner)
		}
		for _, e := range l.events(t, late, owner) {
			if e.Verb != "claim" && e.Verb != "fail" { // the coordinator's grant and its release of a refused assign
				t.Errorf("the draining agent took the late job: %+v", e)
			}
		}
		for _, e := range p.Entries("job assigned") {
			if e["job_id"] == late {
				t.Errorf("the draining agent started the late job")
			}
		}
	})

	t.Run("release", func(t *testing.T) {
		l := newLab(t, 2*time.Second)
		p := l.env.StartAgent(e2e.AgentOptions{ShutdownTimeout: 300 * time.Millisecond})
		job := l.submit(t, screenshot, wait(60_000), screenshot)
		owner := l.leased(t, job)
		p.MustCleanShutdown(t)
		// The release is the agent's last write of its generation (later
		// generations are the coordinator granting the job again and
		// releasing it when the exiting agent refuses the assign).
		var evs []jobstore.WriteEvent
		for _, e := range l.events(t, job, owner) {
			if e.Generation == 1 {
				evs = append(evs, e)
			}
		}
		last := evs[len(evs)-1]
		if last.Verb != "fail" || !last.Accepted {
			t.Fatalf("last write of the agent %+v, want its accepted fail (release) at generation 1; all: %+v", last, evs)
		}
		j, err := l.store.Get(l.ctx, job)
		if err != nil || j.Status == jobstore.StatusSucceeded || j.Status == jobstore.StatusFailed {
			t.Fatalf("released job %+v %v: want it back in the queue", j, err)
		}
		var released bool
		for _, e := range p.Entries("job stopped") {
			released = released || (e["job_id"] == job && strings.HasPrefix(fmt.Sprint(e["cause"]), "released"))
		}
		if !released {
			t.Error("no \"job stopped\" log line with cause released")
		}
	})

	t.Run("second signal", func(t *testing.T) {
		l := newLab(t, 2*time.Second)
		p := l.env.StartAgent(e2e.AgentOptions{ShutdownTimeout: 60 * time.Second})
		job := l.submit(t, screenshot, wait(60_000), screenshot)
		owner := l.leased(t, job)
		p.Signal(t, syscall.SIGTERM)
		testenv.Eventually(t, 10*time.Second, "the drain to begin", func() bool { return len(p.Entries("shutting down: taking no new jobs")) > 0 })
		p.Signal(t, syscall.SIGTERM)
		// The job has a minute to go and the drain a minute to wait: an exit
		// now is the second signal's doing.
		if code := p.WaitWithin(t, 20*time.Second); code != 0 {
			t.Fatalf("exit status %d, want 0", code)
		}
		for _, e := range l.events(t, job, owner) {
			if e.Verb == "fail" || e.Verb == "result" {
				t.Errorf("stopped at once, yet the agent sent %s: %+v", e.Verb, e)
			}
		}
		var stopped bool
		for _, e := range p.Entries("job stopped") {
			stopped = stopped || (e["job_id"] == job && e["cause"] == "agent shutting down" && e["owner"] == owner && e["generation"] == float64(1))
		}
		if !stopped {
			t.Error("no \"job stopped\" log line with cause \"agent shutting down\"")
		}
	})
}

// TestPresignedMode: with storage.mode presigned the binary holds no
// storage credentials; each artifact is authorised and presigned by the
// coordinator (the fenced upload verb) and PUT by the agent, stamped with
// the token.
func TestPresignedMode(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	l := newLabWith(t, 3*time.Second, func(o *coordinator.Options, m testenv.MinIOServer) {
		p, err := coordinator.NewS3Presigner(coordinator.S3Options{Endpoint: m.Endpoint, Region: "us-east-1", Bucket: m.Bucket, AccessKey: m.AccessKey, SecretKey: m.SecretKey})
		if err != nil {
			t.Fatal(err)
		}
		o.Presigner = p
	})
	// The agent's config has no storage credentials.
	p := l.env.StartAgent(e2e.AgentOptions{StateDir: filepath.Join(t.TempDir(), "state"), ShutdownTimeout: time.Second, Storage: e2e.StoragePresigned})
	job := l.submit(t, screenshot, protocol.Step{Op: protocol.OpUIDump, Name: "home"})
	var done jobstore.Job
	testenv.Eventually(t, 30*time.Second, "the job to succeed", func() bool {
		j, err := l.store.Get(l.ctx, job)
		done = j
		return err == nil && (j.Status == jobstore.StatusSucceeded || j.Status == jobstore.StatusFailed)
	})
	if done.Status != jobstore.StatusSucceeded {
		t.Fatalf("job %s: %s", done.Status, done.FailReason)
	}
	mc := l.mio.Client(t)
	for _, name := range []string{"screenshot-001.png", "home.xml", "manifest.json", "oplog.jsonl"} {
		key := "jobs/" + job + "/g1/" + name
		info, err := mc.StatObject(l.ctx, l.mio.Bucket, key, minio.StatObjectOptions{})
		if err != nil {
			t.Fatalf("stat %s: %v", key, err)
		}
		if info.UserMetadata["Owner"] != done.CompletedBy || info.UserMetadata["Generation"] != "1" {
			t.Errorf("%s stamps %v, want owner %s generation 1", key, info.UserMetadata, done.CompletedBy)
		}
	}
	var authorised int
	for _, e := range l.events(t, job, done.CompletedBy) {
		if e.Verb == "upload" && e.Accepted {
			authorised++
		}
	}
	if authorised != 4 {
		t.Errorf("%d accepted upload authorisations, want 4", authorised)
	}
	p.MustCleanShutdown(t)
}
