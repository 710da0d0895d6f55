//go:build linux

package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakelogind"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// locksOf returns the modes of the locks pid took (held only: held).
func locksOf(l *fakelogind.Logind, pid int, held bool) []string {
	var out []string
	for _, lk := range l.Locks() {
		if int(lk.PID) == pid && (!held || !lk.Released) {
			out = append(out, lk.Mode)
		}
	}
	return out
}

// agentDraining reports the coordinator's view of an agent: online, and
// draining by its own report.
func (l *lab) agentState(t *testing.T, id string) (found, draining bool) {
	t.Helper()
	as, err := l.store.Agents(l.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.ID == id {
			return true, a.AgentDraining
		}
	}
	return false, false
}

// TestSleepHandsJobBack runs the real binary with
// a fake systemd-logind on a private D-Bus bus (Debian's dbus-daemon) as
// its system bus, against a coordinator whose retry backoff is an hour:
//
//   - while a job runs the agent holds a block and a delay inhibitor lock
//     on sleep, in its own process's name, and releases both when the job
//     ends;
//   - PrepareForSleep(true) during a job: the agent reports draining,
//     hands the job back (attempt end infrastructure/agent_sleep, no
//     backoff), releases its locks so the sleep can go on, and a second
//     agent is granted the job at once and runs it to SUCCEEDED;
//   - PrepareForSleep(false): the agent says hello again, no longer
//     draining, and runs the next job; /metrics counts the suspend, the
//     resume and the hand-back.
func TestSleepHandsJobBack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	logind := fakelogind.StartT(t, fakelogind.Options{DelayMax: 5 * time.Second})
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", logind.Addr)
	// A lease long enough that renewals answered late on a busy machine
	// cost no job: a job retried for a lost lease would wait an hour.
	l := newLabWith(t, 6*time.Second, func(o *coordinator.Options, _ testenv.MinIOServer) {
		// A retried job waits an hour, unless it is a sleep hand-back.
		o.Retry = jobstore.RetryPolicy{Backoff: time.Hour, BackoffMax: time.Hour}
	})
	a := l.env.StartAgent(e2e.AgentOptions{Extra: "sleep:\n  inhibit: true\n"})
	statusA, pidA := a.StatusAddr, a.PID()

	// 1. A job holds the inhibitor while it runs.
	first := l.submit(t, wait(1500))
	testenv.Eventually(t, 30*time.Second, "agent A to hold a block and a delay lock while the first job runs", func() bool {
		return strings.Join(locksOf(logind, pidA, true), ",") == "block,delay"
	})
	for _, lk := range logind.Locks() {
		if lk.What != "sleep" || lk.Who != "edgeagent" || lk.Why == "" {
			t.Errorf("lock %+v: want what sleep, who edgeagent and a reason", lk)
		}
	}
	if j := l.ended(t, first, 30*time.Second); j.Status != jobstore.StatusSucceeded {
		t.Fatalf("first job %s (%s)", j.Status, j.FailReason)
	}
	testenv.Eventually(t, 10*time.Second, "agent A to release its locks after the job", func() bool {
		return len(locksOf(logind, pidA, true)) == 0
	})

	// 2. The PC goes to sleep in the middle of a job.
	second := l.submit(t, wait(3000), screenshot)
	testenv.Eventually(t, 30*time.Second, "the second job to run on agent A with the locks held", func() bool {
		j, err := l.store.Get(l.ctx, second)
		return err == nil && j.Status == jobstore.StatusInProgress && strings.HasPrefix(j.WorkerID, "pc-bin/") &&
			len(locksOf(logind, pidA, true)) == 2
	})
	// Agent B, without an inhibitor, waits beside it.
	b := l.env.StartAgent(e2e.AgentOptions{ID: "pc-b", Phones: []e2e.Phone{{Serial: "sim-2", Simulated: true, Tags: []string{"lab"}}},
		Extra: "sleep:\n  inhibit: false\n"})
	testenv.Eventually(t, 30*time.Second, "agent B to say hello", func() bool {
		found, _ := l.agentState(t, "pc-b")
		return found
	})
	if err := logind.PrepareForSleep(true); err != nil {
		t.Fatal(err)
	}
	var final jobstore.Job
	testenv.Eventually(t, 30*time.Second, "the second job to be handed back and run by agent B", func() bool {
		j, err := l.store.Get(l.ctx, second)
		final = j
		return err == nil && jobstore.Finished(j.Status)
	})
	if final.Status != jobstore.StatusSucceeded || !strings.HasPrefix(final.WorkerID, "pc-b/") || final.Device != "sim-2" {
		t.Fatalf("second job %s on %s/%s (%s), want SUCCEEDED on pc-b/sim-2", final.Status, final.WorkerID, final.Device, final.FailReason)
	}
	if len(final.AttemptEnds) != 1 || final.AttemptEnds[0].Class != protocol.FailClassInfrastructure ||
		final.AttemptEnds[0].Cause != protocol.CauseAgentSleep || final.Attempts != 2 {
		t.Fatalf("attempts %d, ends %+v: want one end, infrastructure agent_sleep, then a second attempt", final.Attempts, final.AttemptEnds)
	}
	// The hand-back was a fenced fail of agent A's token, and the next
	// grant went to B with no backoff (an hour otherwise).
	var handBack, regrant *jobstore.WriteEvent
	evs := l.allEvents(t, second)
	for i, e := range evs {
		switch {
		case e.Accepted && e.Verb == jobstore.VerbFail && e.Cause == protocol.CauseAgentSleep:
			handBack = &evs[i]
		case handBack != nil && regrant == nil && e.Accepted && e.Verb == jobstore.VerbClaim:
			regrant = &evs[i]
		}
	}
	if handBack == nil || regrant == nil || !strings.HasPrefix(handBack.Owner, "pc-bin/") || !strings.HasPrefix(regrant.Owner, "pc-b/") {
		t.Fatalf("no hand-back by pc-bin followed by a grant to pc-b among %+v", evs)
	}
	t.Logf("handed back at %v, granted to %s %v later", handBack.At, regrant.Owner, regrant.At.Sub(handBack.At))
	if d := regrant.At.Sub(handBack.At); d > time.Minute {
		t.Errorf("granted again %v after the hand-back: the retry backoff was waited out", d)
	}
	if held := locksOf(logind, pidA, true); len(held) != 0 {
		t.Errorf("agent A still holds %v after the sleep notice", held)
	}
	if _, draining := l.agentState(t, "pc-bin"); !draining {
		t.Error("agent A is not draining while its PC sleeps")
	}
	hellos := len(a.Entries("connected to coordinator"))

	// 3. The PC wakes up: hello again, and jobs again.
	if err := logind.PrepareForSleep(false); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "agent A to say hello again, not draining", func() bool {
		_, draining := l.agentState(t, "pc-bin")
		return len(a.Entries("connected to coordinator")) > hellos && !draining
	})
	third, err := l.store.Submit(l.ctx, jobstore.JobSpec{Task: protocol.Task{
		Device: protocol.DeviceSelector{Serial: "sim-1"}, Steps: []protocol.Step{wait(1500)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "agent A to hold its locks again for the third job", func() bool {
		return len(locksOf(logind, pidA, true)) == 2
	})
	if j := l.ended(t, third.ID, 30*time.Second); j.Status != jobstore.StatusSucceeded || !strings.HasPrefix(j.WorkerID, "pc-bin/") {
		t.Fatalf("third job %s on %s (%s), want SUCCEEDED on pc-bin", j.Status, j.WorkerID, j.FailReason)
	}
	if held := locksOf(logind, pidA, false); len(held) != 6 {
		t.Errorf("agent A took locks %v, want block and delay for each of three jobs", held)
	}
	if other := len(logind.Locks()) - len(locksOf(logind, pidA, false)); other != 0 {
		t.Errorf("%d locks taken by another process (agent B has sleep.inhibit false)", other)
	}

	resp, err := http.Get("http://" + statusA + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`edgeagent_sleep_events_total{event="suspend"} 1`,
		`edgeagent_sleep_events_total{event="resume"} 1`,
		`edgeagent_job_failures_total{cause="agent_sleep",class="infrastructure"} 1`,
		"edgeagent_sleep_inhibitor_held ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics of agent A lacks %q", want)
		}
	}
	for _, e := range a.Entries("job stopped") {
		if e["job_id"] == second && !strings.Contains(e["cause"].(string), "going to sleep") {
			t.Errorf("stop of the second job logged with cause %v", e["cause"])
		}
	}
	for _, p := range []*e2e.Agent{a, b} {
		p.MustCleanShutdown(t)
	}
}
