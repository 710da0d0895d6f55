package main

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestADBOpTimeout: a fake phone behind the real adb server takes every
// input but never finishes it. A job tapping it fails once the agent's
// phones.op_timeout (2s here, not the default 20s) has passed, its reason
// naming that timeout; the tap reached the phone.
func TestADBOpTimeout(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const opTimeout = 2 * time.Second
	adb := testenv.StartADB(t)
	phones := startPhones(t, adb, fakeadbd.Options{InputDelay: time.Hour}, "[lab]")
	serial := phones[0].Serial()
	l := newLab(t, 3*time.Second)
	p := l.env.StartAgent(e2e.AgentOptions{ADB: adb, Phones: devices(phones), OpTimeout: opTimeout})
	id := l.submitSpec(t, jobstore.JobSpec{MaxAttempts: 1, Task: protocol.Task{
		Device: protocol.DeviceSelector{Serial: serial},
		Steps:  []protocol.Step{{Op: protocol.OpTap, X: 10, Y: 20}},
	}})
	logEvents(t, l, id)
	j := l.ended(t, id, e2e.WaitTimeout)
	want := "tap on " + serial + ": timed out after " + opTimeout.String()
	if j.Status != jobstore.StatusFailed || j.Device != serial || !strings.Contains(j.FailReason, want) {
		t.Fatalf("job %s on %q (%s), want FAILED on %s with %q", j.Status, j.Device, j.FailReason, serial, want)
	}
	if n := len(phones[0].Inputs()); n != 1 {
		t.Errorf("the phone received %d inputs, want the one tap", n)
	}
	p.MustCleanShutdown(t)
}
