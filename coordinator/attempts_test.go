package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// metricsText returns the coordinator's /metrics page.
func metricsText(t *testing.T, c *running) string {
	t.Helper()
	hs := httptest.NewServer(c.srv.Handler())
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d, %v", resp.StatusCode, err)
	}
	return string(b)
}

func wantMetrics(t *testing.T, c *running, lines ...string) {
	t.Helper()
	body := metricsText(t, c)
	for _, want := range lines {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestDeadlineTimedOutByReaper: a job with a 2 s deadline whose agent holds
// it (renewing, never finishing) is TIMED_OUT by the reaper within one
// sweep of its deadline, on the database clock; the assign told the agent
// the time left; the agent receives a revoke and its late writes are
// refused.
func TestDeadlineTimedOutByReaper(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	store := openPostgres(t, testenv.Postgres(t))
	opts := fastOptions(t, "c1")
	c := startCoordinator(t, ns.ClientURL(), store, opts)
	a := coordtest.Start(t, coordtest.Options{
		ID: "pc-a", URL: ns.ClientURL(), Devices: []protocol.Device{phone("A1")},
		Behavior: func(fencing.Token) coordtest.Behavior { return coordtest.Hold },
	})
	tk := task(protocol.DeviceSelector{})
	tk.TimeoutMS = 2000
	if _, err := store.Submit(t.Context(), jobstore.JobSpec{ID: "slow", Task: tk}); err != nil {
		t.Fatal(err)
	}
	waitAssign(t, a, "slow", 5*time.Second)
	msgs := a.AssignMessages()
	if len(msgs) != 1 || msgs[0].DeadlineMS < 1500 || msgs[0].DeadlineMS > 2000 {
		t.Fatalf("assign deadline_ms %+v, want about 2000", msgs)
	}
	tok := msgs[0].Token

	j := waitStatus(t, store, "slow", jobstore.StatusTimedOut, 10*time.Second)
	if j.FailReason != jobstore.DetailDeadline || j.Generation != tok.Generation || j.DeadlineAt.IsZero() {
		t.Fatalf("timed-out job %+v", j)
	}
	evs, err := store.WriteEvents(t.Context(), "slow")
	if err != nil {
		t.Fatal(err)
	}
	var timeout jobstore.WriteEvent
	for _, e := range evs {
		if e.Verb == jobstore.VerbTimeout {
			timeout = e
		}
	}
	if timeout.Owner != tok.Owner || timeout.Generation != tok.Generation || !timeout.Accepted ||
		timeout.Class != protocol.FailClassJob || timeout.Cause != protocol.CauseDeadline {
		t.Fatalf("timeout event %+v in %+v", timeout, evs)
	}
	late := timeout.At.Sub(j.DeadlineAt)
	t.Logf("deadline %s, timed out %s: %v after it (reap interval %v)", j.DeadlineAt.Format(time.RFC3339Nano),
		timeout.At.Format(time.RFC3339Nano), late, opts.ReapInterval)
	if late < 0 || late > opts.ReapInterval+sweepSlack {
		t.Fatalf("timed out %v after the deadline, want within one sweep (%v + %v)", late, opts.ReapInterval, sweepSlack)
	}

	testenv.Eventually(t, 5*time.Second, "revoke at A", func() bool {
		return slices.ContainsFunc(a.Revokes(), func(r protocol.Revoke) bool { return r.Token == tok })
	})
	err = a.Request(context.Background(), protocol.VerbResult, protocol.Result{Token: tok, Result: json.RawMessage(`{}`)}, &protocol.ResultReply{})
	if !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("late result: %v, want 409", err)
	}
	wantMetrics(t, c,
		`jobs_ended_total{state="TIMED_OUT"} 1`,
		`attempt_ends_total{cause="deadline",class="job"} 1`,
		`jobs{state="TIMED_OUT"} 1`,
	)
}

// TestFailClassesThroughService: the fail verb's class and cause decide
// what happens to the job: a job error fails it once; an infrastructure
// failure is retried at a higher generation until the attempts are used
// up, then FAILED with every cause listed; a deadline cause is TIMED_OUT.
func TestFailClassesThroughService(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	store := openSQLite(t)
	opts := fastOptions(t, "c1")
	opts.Retry = jobstore.RetryPolicy{Backoff: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond}
	c := startCoordinator(t, ns.ClientURL(), store, opts)
	failures := map[string]protocol.Fail{
		"bad":   {Reason: "package com.nope is not installed", Class: protocol.FailClassJob, Cause: protocol.CauseAppNotInstalled},
		"flaky": {Reason: "adb: device offline", Class: protocol.FailClassInfrastructure, Cause: protocol.CausePhoneUnplugged},
		"late":  {Reason: "deadline passed", Class: protocol.FailClassJob, Cause: protocol.CauseDeadline},
	}
	a := coordtest.Start(t, coordtest.Options{
		ID: "pc-a", URL: ns.ClientURL(), Devices: []protocol.Device{phone("A1")},
		Behavior: func(fencing.Token) coordtest.Behavior { return coordtest.Fail },
		Failure:  func(tok fencing.Token) protocol.Fail { return failures[tok.JobID] },
	})
	submitMax := func(id string, maxAttempts int) {
		t.Helper()
		if _, err := store.Submit(t.Context(), jobstore.JobSpec{ID: id, Task: task(protocol.DeviceSelector{}), MaxAttempts: maxAttempts}); err != nil {
			t.Fatal(err)
		}
	}

	// A job error: FAILED at once, never assigned again.
	submitMax("bad", 3)
	if j := waitStatus(t, store, "bad", jobstore.StatusFailed, 5*time.Second); j.Attempts != 1 || j.FailReason != failures["bad"].Reason {
		t.Fatalf("job error: %+v", j)
	}

	// Infrastructure: retried at a higher generation, then exhausted.
	submitMax("flaky", 2)
	j := waitStatus(t, store, "flaky", jobstore.StatusFailed, 5*time.Second)
	if want := "attempts exhausted (2 of 2): g1 phone_unplugged: adb: device offline; g3 phone_unplugged: adb: device offline"; j.FailReason != want {
		t.Fatalf("fail reason %q, want %q", j.FailReason, want)
	}

	// The agent's own deadline.
	submitMax("late", 3)
	waitStatus(t, store, "late", jobstore.StatusTimedOut, 5*time.Second)

	want := []fencing.Token{
		{JobID: "bad", Owner: a.Owner(), Generation: 1},
		{JobID: "flaky", Owner: a.Owner(), Generation: 1},
		{JobID: "flaky", Owner: a.Owner(), Generation: 3},
		{JobID: "late", Owner: a.Owner(), Generation: 1},
	}
	if got := a.Assigns(); !slices.Equal(got, want) {
		t.Fatalf("assigns %v, want %v", got, want)
	}
	wantMetrics(t, c,
		`attempt_ends_total{cause="app_not_installed",class="job"} 1`,
		`attempt_ends_total{cause="phone_unplugged",class="infrastructure"} 2`,
		`attempt_ends_total{cause="deadline",class="job"} 1`,
		`jobs_ended_total{state="FAILED"} 2`,
		`jobs_ended_total{state="TIMED_OUT"} 1`,
		`jobs_ended_total{state="NEEDS_DECISION"} 0`,
	)
}
