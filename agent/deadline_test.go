package agent_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// keptPhones keeps the phones its jobs acquired, to read their operation
// logs after the job (which a stopped job does not upload).
type keptPhones struct {
	agent.Phones
	mu   sync.Mutex
	kept []agent.Phone
}

func (k *keptPhones) Acquire(ctx context.Context, sel protocol.DeviceSelector) (agent.Phone, func(), error) {
	p, release, err := k.Phones.Acquire(ctx, sel)
	if err == nil {
		k.mu.Lock()
		k.kept = append(k.kept, p)
		k.mu.Unlock()
	}
	return p, release, err
}

// oplog returns the operation log lines of the last phone acquired.
func (k *keptPhones) oplog(t *testing.T) []capture.OpEntry {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.kept) == 0 {
		t.Fatal("no phone was acquired")
	}
	art, _ := k.kept[len(k.kept)-1].OpLog()
	var out []capture.OpEntry
	sc := bufio.NewScanner(bytes.NewReader(art.Data))
	for sc.Scan() {
		var e capture.OpEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("oplog line %q: %v", sc.Bytes(), err)
		}
		out = append(out, e)
	}
	return out
}

// TestDeadlineStopsJob: a job granted with deadline_ms 1500 records the
// phone's screen, then waits a minute. At the deadline the agent stops it
// as a revoke would — the recording's process on the phone (behind the
// real adb server) is killed, nothing is uploaded and no result is sent —
// and reports fail with class job, cause deadline, the last call for the
// job. The operation log line of the step cut short says the deadline ended it.
func TestDeadlineStopsJob(t *testing.T) {
	leakCheck(t)
	adbs, fakes := adbPhones(t, fakeadbd.Options{Width: 96, Height: 160})
	p := fakes[0]
	phones := &keptPhones{Phones: adbs}
	r := newRig(t, rigSetup{phones: phones})
	tok := r.token(1)
	task := protocol.Task{Steps: []protocol.Step{
		{Op: protocol.OpRecordStart, Name: "survey"},
		{Op: protocol.OpScreenshot, Name: "during"},
		{Op: protocol.OpWait, DurationMS: 60_000},
		{Op: protocol.OpRecordStop},
	}}
	if err := r.coord.assignWith("pc-a", tok, task, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	stop := r.waitStop(tok.JobID)
	if !errors.Is(stop.Err, agent.ErrDeadline) || stop.Cause != "deadline passed after 1.5s" {
		t.Fatalf("stop cause %q (%v), want the deadline", stop.Cause, stop.Err)
	}
	r.waitGone(tok.JobID)

	// The fail is the job's last call.
	reqs := r.coord.requests(tok.JobID)
	if last := reqs[len(reqs)-1]; last.verb != protocol.VerbFail {
		t.Fatalf("last call %s, want fail: %v", last.verb, r.coord.verbs(tok.JobID))
	}
	fs := r.coord.fails(tok)
	if len(fs) != 1 || fs[0].Class != protocol.FailClassJob || fs[0].Cause != protocol.CauseDeadline || fs[0].Requeue ||
		fs[0].Reason != "deadline passed after 1.5s" {
		t.Fatalf("fails %+v, want one with class job, cause deadline", fs)
	}
	if slices.Contains(r.coord.verbs(tok.JobID), protocol.VerbResult) {
		t.Errorf("a result was sent: %v", r.coord.verbs(tok.JobID))
	}
	r.noneAfter(stop)

	// At most the screenshot taken before the deadline was uploaded,
	// before the fail: neither the recording nor the operation log.
	failAt := reqs[len(reqs)-1].at
	for _, u := range r.store.uploads() {
		if u.key != tok.ObjectKey("during.png") || u.err != nil || u.end.After(failAt) {
			t.Errorf("upload of %s (error %v) ended %v after the fail", u.key, u.err, u.end.Sub(failAt))
		}
	}
	// The recording ran on the phone and its process is gone.
	if !slices.ContainsFunc(p.Commands(), func(c string) bool { return strings.Contains(c, "screenrecord") }) {
		t.Fatalf("the recording never started: %q", p.Commands())
	}
	testenv.Eventually(t, 10*time.Second, "the recording's process on the phone to end", func() bool { return len(p.Processes()) == 0 })
	// The step the deadline cut short (the wait, unless the PC was too
	// slow to reach it) is the log's last line, ended by the deadline.
	lines := phones.oplog(t)
	if len(lines) == 0 {
		t.Fatal("empty operation log")
	}
	if last := lines[len(lines)-1]; last.Outcome != capture.OutcomeError || !strings.HasSuffix(last.Error, "deadline passed after 1.5s") {
		t.Errorf("operation log %+v: want the last step ended by the deadline", lines)
	}

	if n := r.counter("edgeagent_job_stops_total", map[string]string{"cause": "deadline"}); n != 1 {
		t.Errorf("edgeagent_job_stops_total{cause=deadline} = %v, want 1", n)
	}
	if n := r.counter("edgeagent_job_failures_total", map[string]string{"class": "job", "cause": "deadline"}); n != 1 {
		t.Errorf("edgeagent_job_failures_total{job,deadline} = %v, want 1", n)
	}
	logged := r.logs.entries("job deadline passed: work stopped")
	if len(logged) != 1 || logged[0]["job_id"] != tok.JobID || logged[0]["cause"] != protocol.CauseDeadline {
		t.Errorf("deadline log lines %v, want one naming the job and the cause", logged)
	}
}

// TestDeadlineAfterRevokeSendsNothing: a job revoked before its deadline
// sends nothing when the deadline passes; a job whose deadline fail is
// answered 409 (the coordinator ended it first) stops as stale and sends
// nothing more.
func TestDeadlineAfterRevokeSendsNothing(t *testing.T) {
	leakCheck(t)
	r := newRig(t, rigSetup{})
	tok := r.token(1)
	deadline := 400 * time.Millisecond
	assigned := time.Now()
	if err := r.coord.assignWith("pc-a", tok, screenshotTask(1, 60_000), deadline); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the job's first upload", func() bool { return len(r.store.uploads()) > 0 })
	r.coord.revoke(tok)
	stop := r.waitStop(tok.JobID)
	if !errors.Is(stop.Err, fencing.ErrRevoked) {
		t.Fatalf("stop cause %v, want revoked", stop.Err)
	}
	testenv.Eventually(t, 10*time.Second, "the deadline to pass", func() bool { return time.Since(assigned) > 2*deadline })
	r.noneAfter(stop)
	if fs := r.coord.fails(tok); len(fs) != 0 {
		t.Errorf("fails %+v after the revoke", fs)
	}

	tok = r.token(1)
	r.coord.setHook(func(verb string, ht fencing.Token) (any, int, bool, bool) {
		if verb == protocol.VerbFail && ht == tok {
			return nil, protocol.CodeStale, false, true
		}
		return nil, 0, false, false
	})
	if err := r.coord.assignWith("pc-a", tok, screenshotTask(1, 60_000), deadline); err != nil {
		t.Fatal(err)
	}
	stop = r.waitStop(tok.JobID)
	if !errors.Is(stop.Err, fencing.ErrStale) {
		t.Fatalf("stop cause %v, want stale (409 to the deadline's fail)", stop.Err)
	}
	r.noneAfter(stop)
	if fs := r.coord.fails(tok); len(fs) != 1 || fs[0].Cause != protocol.CauseDeadline {
		t.Errorf("fails %+v, want the one refused deadline fail", fs)
	}
}

// TestAssignRefusesNegativeDeadline: deadline_ms below zero is refused
// with 400 naming the field.
func TestAssignRefusesNegativeDeadline(t *testing.T) {
	leakCheck(t)
	r := newRig(t, rigSetup{})
	err := r.coord.assignWith("pc-a", r.token(1), screenshotTask(1, 0), -time.Second)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest || !strings.Contains(pe.Description, "deadline_ms") {
		t.Fatalf("assign with a negative deadline: %v, want 400 naming deadline_ms", err)
	}
}
