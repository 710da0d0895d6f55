package main

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestOneStepJobsNeverRefusedForASlot: 300 one-step jobs with
// max_attempts 1, queued at once for one agent (the real binary) with two
// simulated phones and one slot, all SUCCEED. The coordinator grants the
// next job as soon as it accepts a result; the agent frees a job's slot
// when the job begins its final call, so it has room for that grant, and
// an assign it refuses for want of a slot goes back to the queue without
// spending the job's only attempt.
func TestOneStepJobsNeverRefusedForASlot(t *testing.T) {
	// Not in parallel: its 300 jobs load the machine enough that another
	// test's agent could miss its request timeout.
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	env := e2e.NewEnv(t)
	c := env.StartCoordinator(e2e.CoordinatorOptions{Storage: true})
	p := env.StartAgent(e2e.AgentOptions{Phones: []e2e.Phone{
		{Serial: "sim-1", Simulated: true, Tags: []string{"lab"}},
		{Serial: "sim-2", Simulated: true, Tags: []string{"lab"}},
	}})
	store := c.Store()
	ctx := t.Context()
	const n = 300
	for range n {
		if _, err := store.Submit(ctx, jobstore.JobSpec{MaxAttempts: 1, Task: protocol.Task{
			Steps: []protocol.Step{{Op: protocol.OpTap, X: 10, Y: 20}},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	var counts map[string]int64
	testenv.Eventually(t, 5*time.Minute, "every job to end", func() bool {
		cs, err := store.JobCounts(ctx)
		if err != nil {
			return false
		}
		counts = cs
		return cs[jobstore.StatusQueued] == 0 && cs[jobstore.StatusInProgress] == 0
	})
	if counts[jobstore.StatusSucceeded] != n {
		failed, err := store.ListJobs(ctx, jobstore.JobFilter{Statuses: []string{jobstore.StatusFailed}, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range failed {
			t.Logf("job %s FAILED: %s", j.ID, j.FailReason)
			evs, err := store.WriteEvents(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				t.Logf("  event %+v", e)
			}
			for _, proc := range []*e2e.Process{p.Process, c.Process} {
				for _, line := range proc.Lines() {
					if strings.Contains(line, j.ID) {
						t.Logf("  %s", line)
					}
				}
			}
		}
		t.Fatalf("job counts %v: want all %d SUCCEEDED", counts, n)
	}
	p.MustCleanShutdown(t)
	c.MustCleanShutdown(t)
}

// TestTextBeyondASCIIWaitsForAPhoneThatCanType: the only phone (a fake
// phone behind the real adb server) has no input method for text beyond
// ASCII, as its facts tell the coordinator. A job typing Japanese text is
// not granted to it: it stays queued with no attempt spent and `edgecoord
// job show` says what it waits for, while a later job typing ASCII text
// runs on that phone.
func TestTextBeyondASCIIWaitsForAPhoneThatCanType(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	adb := testenv.StartADB(t)
	phones := startPhones(t, adb, fakeadbd.Options{}, "[lab]")
	serial := phones[0].Serial()
	l := newLab(t, 3*time.Second)
	p := l.env.StartAgent(e2e.AgentOptions{ADB: adb, Phones: devices(phones)})
	testenv.Eventually(t, 30*time.Second, "the phone ready at the coordinator with its facts", func() bool {
		a, err := l.store.GetAgent(l.ctx, "pc-bin")
		if err != nil {
			return false
		}
		for _, d := range a.Devices {
			if d.Serial == serial && d.Ready() {
				return d.Facts != nil && d.Facts.ReadAtUnixMilli != 0
			}
		}
		return false
	})
	sel := protocol.DeviceSelector{Tags: []string{"lab"}}
	japanese := l.submitSpec(t, jobstore.JobSpec{MaxAttempts: 3, Task: protocol.Task{Device: sel,
		Steps: []protocol.Step{{Op: protocol.OpText, Text: "こんにちは"}}}})
	logEvents(t, l, japanese)
	ascii := l.submitSpec(t, jobstore.JobSpec{MaxAttempts: 3, Task: protocol.Task{Device: sel,
		Steps: []protocol.Step{{Op: protocol.OpText, Text: "hello"}}}})
	if j := l.ended(t, ascii, 60*time.Second); j.Status != jobstore.StatusSucceeded || j.Device != serial {
		t.Fatalf("ASCII job %s on %q (%s), want SUCCEEDED on %s", j.Status, j.Device, j.FailReason, serial)
	}
	// The Japanese job is older: every pass that granted the ASCII one
	// looked at it first.
	j, err := l.store.Get(l.ctx, japanese)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != jobstore.StatusQueued || j.Attempts != 0 || len(j.AttemptEnds) != 0 {
		t.Fatalf("Japanese job %s after %d attempts %v (%s), want QUEUED with none", j.Status, j.Attempts, j.AttemptEnds, j.FailReason)
	}
	out := edgecoord(t, l.edgecoord(), "job", "show", japanese)
	if !strings.Contains(out, "lacks the input method com.android.adbkeyboard") {
		t.Fatalf("edgecoord job show does not say the job waits for a phone with the input method:\n%s", out)
	}
	for _, in := range phones[0].Inputs() {
		if strings.Contains(in.String(), "こんにちは") {
			t.Fatalf("the phone received %q", in)
		}
	}
	p.MustCleanShutdown(t)
}

// TestOfflinePhoneGetsNoGrant: a fake phone behind the real adb server is
// unplugged mid-job. The attempt ends phone_unplugged; the agent reports
// the phone's new state at once (its periodic heartbeat is 30 s away), so
// the coordinator grants the job to nothing while the phone is offline,
// and an assign that reached the agent before its report would be given
// back without spending an attempt. Plugged back in, the phone runs the
// job: SUCCEEDED at its second attempt, the only attempt end the unplug.
func TestOfflinePhoneGetsNoGrant(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	adb := testenv.StartADB(t)
	phones := startPhones(t, adb, fakeadbd.Options{}, "[lab]")
	phone := phones[0]
	l := newLabWith(t, 10*time.Second, func(o *coordinator.Options, _ testenv.MinIOServer) {
		o.HeartbeatEvery = 30 * time.Second
		o.Retry = jobstore.RetryPolicy{Backoff: time.Millisecond, BackoffMax: time.Millisecond}
	})
	p := l.env.StartAgent(e2e.AgentOptions{ADB: adb, Phones: devices(phones)})
	state := func() string {
		a, err := l.store.GetAgent(l.ctx, "pc-bin")
		if err != nil {
			return ""
		}
		for _, d := range a.Devices {
			if d.Serial == phone.Serial() {
				return d.State
			}
		}
		return "gone"
	}
	testenv.Eventually(t, 30*time.Second, "the phone ready at the coordinator", func() bool { return state() == protocol.DeviceReady })
	jobID := l.submitSpec(t, jobstore.JobSpec{MaxAttempts: 2, Task: protocol.Task{
		Device: protocol.DeviceSelector{Tags: []string{"lab"}},
		Steps:  []protocol.Step{screenshot, wait(3000), screenshot},
	}})
	logEvents(t, l, jobID)
	unplugRun(t, l, phones, jobID, 1)
	testenv.Eventually(t, 30*time.Second, "the unplugged phone reported not ready", func() bool {
		s := state()
		return s != "" && s != protocol.DeviceReady
	})
	testenv.Eventually(t, 30*time.Second, "the attempt to end", func() bool {
		j, err := l.store.Get(l.ctx, jobID)
		return err == nil && len(j.AttemptEnds) > 0
	})
	phone.Replug()
	adb.Connect(t, phone.Addr(), "device")
	final := l.ended(t, jobID, 60*time.Second)
	if final.Status != jobstore.StatusSucceeded || final.Attempts != 2 || len(final.AttemptEnds) != 1 ||
		final.AttemptEnds[0].Cause != protocol.CausePhoneUnplugged {
		t.Fatalf("job %s after %d attempts %v (%s), want SUCCEEDED at the second, after one phone_unplugged",
			final.Status, final.Attempts, final.AttemptEnds, final.FailReason)
	}
	p.MustCleanShutdown(t)
}
