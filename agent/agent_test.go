package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

func screenshotTask(n int, wait int64) protocol.Task {
	var steps []protocol.Step
	for i := range n {
		steps = append(steps, protocol.Step{Op: protocol.OpScreenshot, Name: "s" + strconv.Itoa(i)})
		if wait > 0 {
			steps = append(steps, protocol.Step{Op: protocol.OpWait, DurationMS: wait})
		}
	}
	return protocol.Task{Steps: steps}
}

func (r *rig) waitStop(jobID string) agent.StopRecord {
	r.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, s := range r.a.Stops() {
			if s.Token.JobID == jobID {
				return s
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("job %s never stopped; log:\n%s", jobID, r.logs.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (r *rig) waitGone(jobID string) {
	r.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		running := false
		for _, j := range r.a.Jobs() {
			running = running || j.Token.JobID == jobID
		}
		if !running {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("job %s still runs; log:\n%s", jobID, r.logs.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// noneAfter fails the test if the agent sent any fenced request for the
// stopped job beyond the ones it had published when it stopped (the stop
// record counts them; NATS delivers one connection's messages in order).
func (r *rig) noneAfter(stop agent.StopRecord) {
	r.t.Helper()
	count := func() int {
		n := 0
		for _, q := range r.coord.requests(stop.Token.JobID) {
			if q.tok == stop.Token {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(5 * time.Second)
	for count() < stop.Calls && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // anything sent later would arrive by now
	if n := count(); n != stop.Calls {
		r.t.Errorf("the coordinator got %d requests for %v, the agent had sent %d when it stopped: %v", n, stop.Token, stop.Calls, r.coord.verbs(stop.Token.JobID))
	}
}

// TestInteractiveSteps: an interactive job holds its phone after its
// steps; steps sent with the job's token run there, their captures are
// uploaded and registered before the reply lists their keys; a finish
// commits the result.
func TestInteractiveSteps(t *testing.T) {
	leakCheck(t)
	r := newRig(t, rigSetup{})
	tok := r.token(1)
	task := protocol.Task{Interactive: true, Steps: []protocol.Step{{Op: protocol.OpLaunch, Package: "com.example.shop"}}}
	if err := r.coord.assign("pc-a", tok, task); err != nil {
		t.Fatal(err)
	}
	var rep protocol.StepReply
	if err := r.coord.send("pc-a", protocol.VerbStep, protocol.StepRequest{Token: tok, Step: protocol.Step{Op: protocol.OpScreenshot, Name: "look"}}, &rep); err != nil {
		t.Fatal(err)
	}
	want := tok.ObjectKey("look.png")
	if rep.Outcome != protocol.OutcomeOK || rep.Seq != 2 || len(rep.Artifacts) != 1 || rep.Artifacts[0] != want {
		t.Fatalf("screenshot reply %+v, want ok at seq 2 with %s", rep, want)
	}
	// The capture was registered before the reply.
	var registered bool
	for _, q := range r.coord.requests(tok.JobID) {
		var a protocol.Artifact
		if q.verb == protocol.VerbArtifact && json.Unmarshal(q.data, &a) == nil && a.Key == want {
			registered = true
		}
	}
	if !registered {
		t.Fatalf("reply sent before %s was registered: %v", want, r.coord.verbs(tok.JobID))
	}
	if err := r.coord.send("pc-a", protocol.VerbStep, protocol.StepRequest{Token: tok, Step: protocol.Step{Op: protocol.OpTap, X: 10, Y: 20}}, &rep); err != nil || rep.Outcome != protocol.OutcomeOK {
		t.Fatalf("tap: %+v %v", rep, err)
	}
	// A step the phone cannot do is answered with its error; the job goes on.
	r.phone.FailNext(protocol.OpTap, errors.New("screen locked"))
	if err := r.coord.send("pc-a", protocol.VerbStep, protocol.StepRequest{Token: tok, Step: protocol.Step{Op: protocol.OpTap, X: 1, Y: 1}}, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != protocol.OutcomeError || !strings.Contains(rep.Error, "screen locked") {
		t.Fatalf("failed tap reply %+v", rep)
	}
	// Malformed requests are refused without running anything.
	for name, bad := range map[string]protocol.StepRequest{
		"no op":        {Token: tok},
		"unknown op":   {Token: tok, Step: protocol.Step{Op: "explode"}},
		"bad name":     {Token: tok, Step: protocol.Step{Op: protocol.OpScreenshot, Name: "../x"}},
		"other agent":  {Token: fencing.Token{JobID: tok.JobID, Owner: "pc-b/1", Generation: 1}, Step: protocol.Step{Op: protocol.OpTap}},
		"unknown job":  {Token: fencing.Token{JobID: "nope", Owner: tok.Owner, Generation: 1}, Step: protocol.Step{Op: protocol.OpTap}},
		"invalid tok":  {Token: fencing.Token{JobID: tok.JobID}, Step: protocol.Step{Op: protocol.OpTap}},
		"old token":    {Token: fencing.Token{JobID: tok.JobID, Owner: tok.Owner, Generation: 0}, Step: protocol.Step{Op: protocol.OpTap}},
		"newer token":  {Token: fencing.Token{JobID: tok.JobID, Owner: tok.Owner, Generation: 2}, Step: protocol.Step{Op: protocol.OpTap}},
		"finish+error": {Token: tok, Finish: true, Step: protocol.Step{Op: "explode"}},
	} {
		err := r.coord.send("pc-a", protocol.VerbStep, bad, &rep)
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			t.Errorf("%s: %v, want an error reply", name, err)
		}
	}
	if err := r.coord.send("pc-a", protocol.VerbStep, protocol.StepRequest{Token: tok, Finish: true, Step: protocol.Step{Op: protocol.OpUIDump, Name: "last"}}, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Finished || rep.Outcome != protocol.OutcomeOK || len(rep.Artifacts) != 1 {
		t.Fatalf("finish reply %+v", rep)
	}
	r.waitGone(tok.JobID)
	verbs := r.coord.verbs(tok.JobID)
	if verbs[len(verbs)-1] != protocol.VerbResult {
		t.Fatalf("calls %v: want the result last", verbs)
	}
	var taps int
	for _, c := range r.phone.History() {
		if c.Op == protocol.OpTap && c.Err == nil {
			taps++
		}
	}
	if taps != 1 {
		t.Fatalf("phone performed %d taps, want 1 (the refused requests ran nothing)", taps)
	}
}

// TestStaleStepNotRun: after the job's token was taken away, a step sent
// with it is refused with 409 and never reaches the phone.
func TestStaleStepNotRun(t *testing.T) {
	leakCheck(t)
	r := newRig(t, rigSetup{})
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, protocol.Task{Interactive: true}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the lease to be confirmed", func() bool { return len(r.coord.requests(tok.JobID)) > 0 })
	r.coord.revoke(tok)
	r.waitStop(tok.JobID)
	before := len(r.phone.History())
	err := r.coord.send("pc-a", protocol.VerbStep, protocol.StepRequest{Token: tok, Step: protocol.Step{Op: protocol.OpTap, X: 5, Y: 5}}, &protocol.StepReply{})
	if !errors.Is(err, fencing.ErrStale) && !errors.Is(err, protocol.ErrUnknownJob) {
		t.Fatalf("step with a revoked token: %v, want 409 (or 404 once the job is gone)", err)
	}
	if len(r.phone.History()) != before {
		t.Fatalf("the phone ran %v", r.phone.History()[before:])
	}
	// A step queued while the job runs but stopped before its turn gets 409.
	tok2 := r.token(1)
	r.phone.SetLatency(protocol.OpWait, 0)
	if err := r.coord.assign("pc-a", tok2, protocol.Task{Steps: []protocol.Step{{Op: protocol.OpWait, DurationMS: 60_000}}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the wait to start", func() bool {
		for _, j := range r.a.Status().Jobs {
			if j.Token == tok2 && j.Leased && strings.HasPrefix(j.Current, "step 1") {
				return true
			}
		}
		return false
	})
	errc := make(chan error, 1)
	go func() {
		errc <- r.coord.send("pc-a", protocol.VerbStep, protocol.StepRequest{Token: tok2, Step: protocol.Step{Op: protocol.OpTap}}, &protocol.StepReply{})
	}()
	time.Sleep(50 * time.Millisecond)
	r.coord.setStale(tok2.JobID)
	r.coord.revoke(tok2)
	if err := <-errc; !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("queued step after the stop: %v, want 409", err)
	}
	for _, c := range r.phone.History() {
		if c.Op == protocol.OpTap {
			t.Fatalf("the phone tapped: %+v", c)
		}
	}
}

// TestControl: drain, resume, status, config and cancel from the
// coordinator. Settings apply at once and are kept (0600) in the state
// directory for the next start.
func TestControl(t *testing.T) {
	leakCheck(t)
	dir := t.TempDir()
	sw := agent.NewLevelSwitch(io.Discard, 1) // info
	r := newRig(t, rigSetup{tweak: func(o *agent.Options) { o.StateDir = dir; o.LogLevel = sw }})
	ack := func(c protocol.Control) error { return r.coord.send("pc-a", protocol.VerbControl, c, &protocol.Ack{}) }

	if err := ack(protocol.Control{Command: protocol.ControlDrain}); err != nil {
		t.Fatal(err)
	}
	if err := r.coord.assign("pc-a", r.token(1), screenshotTask(1, 0)); !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("assign while draining: %v, want 503", err)
	}
	testenv.Eventually(t, 5*time.Second, "a hello that says draining", func() bool {
		for _, q := range r.coord.requests("") {
			var h protocol.Hello
			if q.verb == protocol.VerbHello && json.Unmarshal(q.data, &h) == nil && h.Draining {
				return true
			}
		}
		return false
	})
	var st protocol.AgentStatus
	if err := r.coord.send("pc-a", protocol.VerbControl, protocol.Control{Command: protocol.ControlStatus}, &st); err != nil {
		t.Fatal(err)
	}
	if st.State != agent.StateDraining || st.BootID != r.a.BootID() || len(st.Phones) != 1 {
		t.Fatalf("status %+v", st)
	}
	if err := ack(protocol.Control{Command: protocol.ControlResume}); err != nil {
		t.Fatal(err)
	}
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, screenshotTask(1, 60_000)); err != nil {
		t.Fatalf("assign after resume: %v", err)
	}
	if err := ack(protocol.Control{Command: protocol.ControlCancel, JobID: "nope"}); !errors.Is(err, protocol.ErrUnknownJob) {
		t.Fatalf("cancel of an unknown job: %v, want 404", err)
	}
	testenv.Eventually(t, 5*time.Second, "the job's first screenshot", func() bool { return len(r.store.uploads()) > 0 })
	if err := ack(protocol.Control{Command: protocol.ControlCancel, JobID: tok.JobID}); err != nil {
		t.Fatal(err)
	}
	stop := r.waitStop(tok.JobID)
	if !errors.Is(stop.Err, agent.ErrCancelled) {
		t.Fatalf("stop cause %v, want cancelled", stop.Err)
	}
	r.waitGone(tok.JobID)
	r.noneAfter(stop)
	for _, v := range r.coord.verbs(tok.JobID) {
		if v == protocol.VerbFail || v == protocol.VerbResult {
			t.Fatalf("a cancelled job sent %s", v)
		}
	}

	// Settings: refused as a whole when one is wrong.
	if err := ack(protocol.Control{Command: protocol.ControlConfig, Settings: map[string]string{"log_level": "debug", "bogus": "1"}}); !errors.Is(err, protocol.ErrBadRequest) {
		t.Fatalf("config with an unknown key: %v, want 400", err)
	}
	if sw.Level().String() != "info" {
		t.Fatalf("log level changed by a refused config: %v", sw.Level())
	}
	if err := ack(protocol.Control{Command: protocol.ControlConfig, Settings: map[string]string{
		agent.SettingLogLevel: "debug", agent.SettingConcurrency: "3", agent.SettingOpLogText: "true",
	}}); err != nil {
		t.Fatal(err)
	}
	if sw.Level().String() != "debug" {
		t.Fatalf("log level %v, want debug", sw.Level())
	}
	testenv.Eventually(t, 5*time.Second, "a hello with 3 slots", func() bool {
		for _, q := range r.coord.requests("") {
			var h protocol.Hello
			if q.verb == protocol.VerbHello && json.Unmarshal(q.data, &h) == nil && h.Slots == 3 {
				return true
			}
		}
		return false
	})
	path := filepath.Join(dir, agent.SettingsFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Fatalf("settings file mode %04o, want 0600", fi.Mode().Perm())
	}
	// The next agent on this state directory starts with them.
	r.stop()
	r2 := newRig(t, rigSetup{tweak: func(o *agent.Options) { o.StateDir = dir }})
	if got := r2.a.Settings(); got[agent.SettingConcurrency] != "3" || got[agent.SettingLogLevel] != "debug" {
		t.Fatalf("settings after restart %v", got)
	}
	if st := r2.a.Status(); st.Slots != 3 {
		t.Fatalf("slots after restart %d, want 3", st.Slots)
	}
}

// TestShutdownReleases: Shutdown lets jobs run until its context ends,
// then cuts their work short and gives them back with a fenced fail
// (requeue, class infrastructure, cause agent_shutdown) — the last call
// for the job — and takes no new job meanwhile.
func TestShutdownReleases(t *testing.T) {
	leakCheck(t)
	r := newRig(t, rigSetup{slots: 2})
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, screenshotTask(1, 60_000)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the job's first screenshot", func() bool { return len(r.store.uploads()) > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- r.a.Shutdown(ctx) }()
	testenv.Eventually(t, 5*time.Second, "shutting down", func() bool { return r.a.Status().State == agent.StateShuttingDown })
	if err := r.coord.assign("pc-a", r.token(1), screenshotTask(1, 0)); !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("assign during shutdown: %v, want 503", err)
	}
	if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want the deadline (jobs released)", err)
	}
	stop := r.waitStop(tok.JobID)
	if !errors.Is(stop.Err, agent.ErrReleased) {
		t.Fatalf("stop cause %v, want released", stop.Err)
	}
	reqs := r.coord.requests(tok.JobID)
	last := reqs[len(reqs)-1]
	var f protocol.Fail
	if last.verb != protocol.VerbFail || json.Unmarshal(last.data, &f) != nil || !f.Requeue || f.Reason != "agent shutting down" {
		t.Fatalf("last call %s %s, want fail with requeue", last.verb, last.data)
	}
	if f.Class != protocol.FailClassInfrastructure || f.Cause != protocol.CauseAgentShutdown {
		t.Errorf("release class %q cause %q, want infrastructure, agent_shutdown", f.Class, f.Cause)
	}
	if stop.Calls != len(reqs) {
		t.Errorf("stop record counts %d calls, the coordinator got %d", stop.Calls, len(reqs))
	}
	r.noneAfter(stop)
}

// TestShutdownLetsJobsFinish: a job that ends within the shutdown timeout
// commits its result; Shutdown returns nil.
func TestShutdownLetsJobsFinish(t *testing.T) {
	leakCheck(t)
	r := newRig(t, rigSetup{})
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, screenshotTask(2, 100)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the job to start", func() bool { return len(r.store.uploads()) > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.a.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	verbs := r.coord.verbs(tok.JobID)
	if verbs[len(verbs)-1] != protocol.VerbResult {
		t.Fatalf("calls %v, want the result last", verbs)
	}
}

// TestResultOutcomeUnknown: the first result gets no answer (it may have
// been committed), the retry gets 409. The agent does not call that a
// stale token: it records that the outcome is unknown.
func TestResultOutcomeUnknown(t *testing.T) {
	leakCheck(t)
	r := newRig(t, rigSetup{})
	var mu sync.Mutex
	results := 0
	r.coord.setHook(func(verb string, tok fencing.Token) (any, int, bool, bool) {
		if verb != protocol.VerbResult {
			return nil, 0, false, false
		}
		mu.Lock()
		defer mu.Unlock()
		results++
		if results == 1 {
			return nil, 0, true, true // committed, but the reply is lost
		}
		return nil, protocol.CodeStale, false, true
	})
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, screenshotTask(1, 0)); err != nil {
		t.Fatal(err)
	}
	stop := r.waitStop(tok.JobID)
	if !errors.Is(stop.Err, agent.ErrOutcomeUnknown) {
		t.Fatalf("stop cause %v, want outcome unknown", stop.Err)
	}
	if results != 2 {
		t.Fatalf("%d result attempts, want 2", results)
	}
}

// TestResultRetriedWhileUnavailable: 503s to the result are retried with
// backoff until one is accepted.
func TestResultRetriedWhileUnavailable(t *testing.T) {
	leakCheck(t)
	r := newRig(t, rigSetup{})
	var mu sync.Mutex
	results := 0
	r.coord.setHook(func(verb string, tok fencing.Token) (any, int, bool, bool) {
		if verb != protocol.VerbResult {
			return nil, 0, false, false
		}
		mu.Lock()
		defer mu.Unlock()
		results++
		if results < 3 {
			return nil, protocol.CodeUnavailable, false, true
		}
		return protocol.ResultReply{Accepted: true}, 0, false, true
	})
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, screenshotTask(1, 0)); err != nil {
		t.Fatal(err)
	}
	r.waitGone(tok.JobID)
	if results != 3 || len(r.a.Stops()) != 0 {
		t.Fatalf("%d result attempts, stops %v; want 3 attempts and no stop", results, r.a.Stops())
	}
}

// TestSuspendStopsIdleJob: the wall clock jumps past the lease deadline (a
// PC waking from a suspend longer than the lease) while the job waits on a
// long step: the job stops by the guard's own check, and nothing follows.
func TestSuspendStopsIdleJob(t *testing.T) {
	leakCheck(t)
	var jump sync.Mutex
	var offset time.Duration
	wall := func() time.Time {
		jump.Lock()
		defer jump.Unlock()
		return time.Now().Round(0).Add(offset)
	}
	r := newRig(t, rigSetup{ttl: time.Hour, tweak: func(o *agent.Options) {
		o.WallClock = wall
		o.GuardCheckInterval = 10 * time.Millisecond
	}})
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, screenshotTask(1, 3_600_000)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the job to start", func() bool { return len(r.store.uploads()) > 0 })
	jump.Lock()
	offset = 2 * time.Hour
	jump.Unlock()
	stop := r.waitStop(tok.JobID)
	if !errors.Is(stop.Err, fencing.ErrLeaseExpired) {
		t.Fatalf("stop cause %v, want lease expired", stop.Err)
	}
	r.waitGone(tok.JobID)
	r.noneAfter(stop)
}

// TestRunLeavesNoGoroutines: after a job, a
// reconnect and a revoke, Run returns with every goroutine it started
// ended.
func TestRunLeavesNoGoroutines(t *testing.T) {
	leakCheck(t)
	r := newRig(t, rigSetup{})
	before := goleak.IgnoreCurrent()
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, screenshotTask(2, 0)); err != nil {
		t.Fatal(err)
	}
	r.waitGone(tok.JobID)
	tok2 := r.token(1)
	if err := r.coord.assign("pc-a", tok2, screenshotTask(1, 60_000)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the second job to start", func() bool { return len(r.store.uploads()) > 3 })
	r.coord.revoke(tok2)
	r.waitStop(tok2.JobID)
	tok3 := r.token(1)
	if err := r.coord.assign("pc-a", tok3, screenshotTask(1, 60_000)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the third job to start", func() bool { return len(r.store.uploads()) > 4 })
	r.stop() // shutdown stops the third job
	if err := goleak.Find(before); err != nil {
		t.Fatalf("goroutines left after Run returned: %v", err)
	}
	s := r.waitStop(tok3.JobID)
	if !errors.Is(s.Err, agent.ErrShutdown) {
		t.Fatalf("third job stopped by %v, want shutdown", s.Err)
	}
}

// TestStatusEndpoint: /healthz, /readyz, /status and /metrics, on loopback
// only.
func TestStatusEndpoint(t *testing.T) {
	leakCheck(t)
	if _, err := agent.ListenStatus("0.0.0.0:0"); !errors.Is(err, agent.ErrNotLoopback) {
		t.Fatalf("ListenStatus on all interfaces: %v, want ErrNotLoopback", err)
	}
	r := newRig(t, rigSetup{})
	l, err := agent.ListenStatus("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- r.a.ServeStatus(ctx, l) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	base := "http://" + l.Addr().String()
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, screenshotTask(1, 60_000)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the job to start", func() bool { return len(r.store.uploads()) > 0 })
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 200 {
		t.Fatalf("/readyz %d %q", code, body)
	}
	code, body := get("/status")
	var st protocol.AgentStatus
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("/status %d %s", code, body)
	}
	if len(st.Jobs) != 1 || st.Jobs[0].Token != tok || !st.Jobs[0].Leased || st.Jobs[0].LeaseLeftMS <= 0 ||
		!st.Connection.NATSConnected || !st.Connection.HelloAccepted || len(st.Phones) != 1 || !st.Phones[0].Busy {
		t.Fatalf("/status %s", body)
	}
	r.coord.revoke(tok)
	r.waitStop(tok.JobID)
	code, body = get("/metrics")
	for _, want := range []string{"edgeagent_jobs_running 0", `edgeagent_job_stops_total{cause="revoked"} 1`,
		`edgeagent_lease_renewals_total{outcome="accepted"}`, "edgeagent_artifact_bytes_total", "edgeagent_nats_connected 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	r.stop()
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz after stop: %d, want 503", code)
	}
}

// TestLockStateDir: one agent per state directory.
func TestLockStateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	l, err := agent.LockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o700) {
		t.Fatalf("state dir %v %v, want mode 0700", fi, err)
	}
	_, err = agent.LockStateDir(dir)
	var le *agent.LockedError
	if !errors.As(err, &le) || !errors.Is(err, agent.ErrLocked) || le.PID != os.Getpid() {
		t.Fatalf("second lock: %v, want LockedError with pid %d", err, os.Getpid())
	}
	if pid, held, err := agent.HolderPID(dir); err != nil || !held || pid != os.Getpid() {
		t.Fatalf("HolderPID = %d %v %v", pid, held, err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if _, held, _ := agent.HolderPID(dir); held {
		t.Fatal("lock still held after Unlock")
	}
	l2, err := agent.LockStateDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	l2.Unlock()
}

// TestHelloSettings: settings in the hello reply are applied and kept like
// a config command.
func TestHelloSettings(t *testing.T) {
	leakCheck(t)
	dir := t.TempDir()
	settings := map[string]string{agent.SettingConcurrency: "2", agent.SettingInteractiveIdle: "90s"}
	r := newRig(t, rigSetup{tweak: func(o *agent.Options) { o.StateDir = dir }})
	r.coord.setHook(func(verb string, _ fencing.Token) (any, int, bool, bool) {
		if verb != protocol.VerbHello {
			return nil, 0, false, false
		}
		return protocol.HelloReply{LeaseTTLMS: 3000, HeartbeatMS: 100, ServerTime: time.Now(), Settings: settings}, 0, false, true
	})
	// The next hello picks them up: a drain makes the agent say hello.
	if err := r.coord.send("pc-a", protocol.VerbControl, protocol.Control{Command: protocol.ControlDrain}, &protocol.Ack{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the hello reply's settings to apply and be kept", func() bool {
		s := r.a.Settings()
		data, _ := os.ReadFile(filepath.Join(dir, agent.SettingsFile))
		return s[agent.SettingConcurrency] == "2" && s[agent.SettingInteractiveIdle] == "90s" &&
			strings.Contains(string(data), `"capture.interactive_idle": "90s"`)
	})
}

// TestRepeatedAssignNotRunTwice: an assign of a token this process already
// ran to its end (a duplicate delivery arriving late) is refused with 409
// and nothing runs again on the phone.
func TestRepeatedAssignNotRunTwice(t *testing.T) {
	leakCheck(t)
	r := newRig(t, rigSetup{})
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, screenshotTask(1, 0)); err != nil {
		t.Fatal(err)
	}
	r.waitGone(tok.JobID)
	shots := func() int {
		n := 0
		for _, c := range r.phone.History() {
			if c.Op == protocol.OpScreenshot {
				n++
			}
		}
		return n
	}
	before := shots()
	if before != 1 {
		t.Fatalf("%d screenshots after the job, want 1", before)
	}
	err := r.coord.assign("pc-a", tok, screenshotTask(1, 0))
	if !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("second assign of an ended token: %v, want 409", err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := shots(); got != before {
		t.Fatalf("phone ran %d screenshots after the repeated assign, want %d", got, before)
	}
}
