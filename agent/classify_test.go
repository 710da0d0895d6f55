package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
	"github.com/edgeagent/edgeagent/uploader"
)

// adbPhones starts a real adb server with one fake phone per option
// connected to it, and returns the agent's phones over that server (the
// daemon's wiring: capture.NewADBInventory and agent.InventoryPhones) once
// every phone is ready.
func adbPhones(t *testing.T, opts ...fakeadbd.Options) (agent.Phones, []*fakeadbd.Phone) {
	t.Helper()
	srv := testenv.StartADB(t)
	var phones []*fakeadbd.Phone
	for _, o := range opts {
		p, err := fakeadbd.Start(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		srv.Connect(t, p.Addr(), protocol.DeviceReady)
		phones = append(phones, p)
	}
	inv, stop, err := capture.NewADBInventory(context.Background(), capture.ADBOptions{Address: srv.Addr, ADBPath: srv.Path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	testenv.Eventually(t, 20*time.Second, "every phone ready in the inventory", func() bool {
		ready := 0
		for _, d := range inv.Devices() {
			if d.State == protocol.DeviceReady {
				ready++
			}
		}
		return ready == len(phones)
	})
	return agent.InventoryPhones(inv, t.TempDir(), capture.OpLogOptions{}), phones
}

// assignWith sends an assign with a deadline (0: none) to the agent.
func (f *fakeCoord) assignWith(agentID string, tok fencing.Token, task protocol.Task, deadline time.Duration) error {
	return f.send(agentID, protocol.VerbAssign, protocol.Assign{Token: tok, LeaseTTLMS: f.ttl.Milliseconds(), Task: task,
		DeadlineMS: deadline.Milliseconds()}, &protocol.Ack{})
}

// fails returns the fail requests the coordinator got for tok, decoded.
func (f *fakeCoord) fails(tok fencing.Token) []protocol.Fail {
	var out []protocol.Fail
	for _, q := range f.requests(tok.JobID) {
		if q.verb != protocol.VerbFail || q.tok != tok {
			continue
		}
		var m protocol.Fail
		if err := json.Unmarshal(q.data, &m); err != nil {
			f.tb.Fatalf("decode fail %s: %v", q.data, err)
		}
		out = append(out, m)
	}
	return out
}

// waitFail waits for the job's one fail and returns it, failing the test
// when it carries another class or cause or when the job also sent a
// result.
func (r *rig) waitFail(tok fencing.Token, class, cause string) protocol.Fail {
	r.t.Helper()
	testenv.Eventually(r.t, 30*time.Second, "the fail of "+tok.JobID, func() bool { return len(r.coord.fails(tok)) > 0 })
	r.waitGone(tok.JobID)
	fs := r.coord.fails(tok)
	if len(fs) != 1 {
		r.t.Fatalf("%d fails for %s, want 1: %+v", len(fs), tok.JobID, fs)
	}
	f := fs[0]
	if f.Class != class || f.Cause != cause || f.Requeue {
		r.t.Errorf("fail of %s: class %q cause %q requeue %v (reason %q), want class %q cause %q without requeue",
			tok.JobID, f.Class, f.Cause, f.Requeue, f.Reason, class, cause)
	}
	for _, v := range r.coord.verbs(tok.JobID) {
		if v == protocol.VerbResult {
			r.t.Errorf("job %s sent a result besides its fail: %v", tok.JobID, r.coord.verbs(tok.JobID))
		}
	}
	return f
}

// counter returns the value of the agent's counter name with labels.
func (r *rig) counter(name string, labels map[string]string) float64 {
	r.t.Helper()
	mfs, err := r.a.Registry().Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	r.t.Fatalf("no metric %s%v", name, labels)
	return 0
}

// TestFailPhoneUnplugged: the phone is unplugged while a step runs on it
// behind the real adb server; the job's fail says infrastructure,
// phone_unplugged, so the coordinator may run it on another phone.
func TestFailPhoneUnplugged(t *testing.T) {
	leakCheck(t)
	phones, fakes := adbPhones(t, fakeadbd.Options{InputDelay: time.Hour})
	p := fakes[0]
	r := newRig(t, rigSetup{phones: phones})
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, protocol.Task{Steps: []protocol.Step{{Op: protocol.OpTap, X: 10, Y: 20}, {Op: protocol.OpScreenshot}}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the tap to reach the phone", func() bool { return len(p.Inputs()) == 1 })
	p.Unplug()
	f := r.waitFail(tok, protocol.FailClassInfrastructure, protocol.CausePhoneUnplugged)
	if !strings.Contains(f.Reason, "phone "+p.Serial()) {
		t.Errorf("reason %q does not name the phone", f.Reason)
	}
	if n := r.counter("edgeagent_job_failures_total", map[string]string{"class": "infrastructure", "cause": "phone_unplugged"}); n != 1 {
		t.Errorf("edgeagent_job_failures_total{infrastructure,phone_unplugged} = %v, want 1", n)
	}
}

// TestFailJobCauses: failures of the task itself are the job's class,
// each with its cause, behind the real adb server: a launch of a package
// the phone has not installed (app_not_installed), a key that is no key
// code (invalid_step), and a UI dump the phone keeps refusing
// (step_failed).
func TestFailJobCauses(t *testing.T) {
	leakCheck(t)
	phones, fakes := adbPhones(t, fakeadbd.Options{Packages: []string{"com.example.survey"}, UIDumpFailures: 1 << 20})
	r := newRig(t, rigSetup{phones: phones})
	for _, c := range []struct {
		step  protocol.Step
		cause string
	}{
		{protocol.Step{Op: protocol.OpLaunch, Package: "com.example.absent"}, protocol.CauseAppNotInstalled},
		{protocol.Step{Op: protocol.OpKey, Key: "NO SUCH KEY"}, protocol.CauseInvalidStep},
		{protocol.Step{Op: protocol.OpUIDump}, protocol.CauseStepFailed},
	} {
		tok := r.token(1)
		task := protocol.Task{Steps: []protocol.Step{{Op: protocol.OpLaunch, Package: "com.example.survey"}, c.step, {Op: protocol.OpScreenshot}}}
		if err := r.coord.assign("pc-a", tok, task); err != nil {
			t.Fatal(err)
		}
		f := r.waitFail(tok, protocol.FailClassJob, c.cause)
		t.Logf("%s: %s", c.cause, f.Reason)
	}
	if got := fakes[0].Sim().Foreground(); got != "com.example.survey" {
		t.Errorf("app in the foreground %q, want com.example.survey (the missing one never launched)", got)
	}
}

// unreachableStore is storage that cannot be reached: every upload fails
// as the uploader fails once its retries are spent.
type unreachableStore struct{}

func (unreachableStore) Upload(ctx context.Context, tok fencing.Token, a uploader.Artifact) (uploader.Result, error) {
	return uploader.Result{}, fmt.Errorf("put %s: %w after 5 attempts: dial tcp: connection refused", tok.ObjectKey(a.Name), uploader.ErrUnavailable)
}

// TestFailStorageUnreachable: a capture that cannot reach storage after
// the uploader's retries fails the job as infrastructure,
// storage_unreachable.
func TestFailStorageUnreachable(t *testing.T) {
	leakCheck(t)
	r := newRig(t, rigSetup{tweak: func(o *agent.Options) { o.Store = unreachableStore{} }})
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, screenshotTask(1, 0)); err != nil {
		t.Fatal(err)
	}
	r.waitFail(tok, protocol.FailClassInfrastructure, protocol.CauseStorageUnreachable)
}

// TestFailClassifiedByError: the class follows the error, not its text —
// a step error that merely says "unplugged" is the job's own.
func TestFailClassifiedByError(t *testing.T) {
	leakCheck(t)
	r := newRig(t, rigSetup{})
	r.phone.FailNext(protocol.OpTap, errors.New("phone unplugged: app not installed"))
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, protocol.Task{Steps: []protocol.Step{{Op: protocol.OpTap, X: 1, Y: 1}}}); err != nil {
		t.Fatal(err)
	}
	r.waitFail(tok, protocol.FailClassJob, protocol.CauseStepFailed)

	// A launch of an app the simulated phone has not installed.
	tok = r.token(1)
	if err := r.coord.assign("pc-a", tok, protocol.Task{Steps: []protocol.Step{{Op: protocol.OpLaunch, Package: capture.SimMissingPrefix + "app"}}}); err != nil {
		t.Fatal(err)
	}
	r.waitFail(tok, protocol.FailClassJob, protocol.CauseAppNotInstalled)
}
