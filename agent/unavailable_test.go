package agent_test

import (
	"sync"
	"testing"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// refuseFirst returns a fake coordinator hook that answers the first
// requests of verb with codes, one each in turn (0: no answer at all),
// and the rest as usual; and a count of the requests of verb so far.
func refuseFirst(verb string, codes ...int) (func(string, fencing.Token) (any, int, bool, bool), func() int) {
	var mu sync.Mutex
	n := 0
	hook := func(v string, _ fencing.Token) (any, int, bool, bool) {
		if v != verb {
			return nil, 0, false, false
		}
		mu.Lock()
		defer mu.Unlock()
		n++
		if n > len(codes) {
			return nil, 0, false, false
		}
		code := codes[n-1]
		return nil, code, code == 0, true
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
	return hook, count
}

// oneScreenshotJob runs one screenshot job on an agent whose fake
// coordinator answers through hook, and returns the rig and the job's
// calls to the coordinator once the job has ended.
func oneScreenshotJob(t *testing.T, hook func(string, fencing.Token) (any, int, bool, bool)) (*rig, []string) {
	t.Helper()
	r := newRig(t, rigSetup{hook: hook})
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, screenshotTask(1, 0)); err != nil {
		t.Fatal(err)
	}
	r.waitGone(tok.JobID)
	return r, r.coord.verbs(tok.JobID)
}

// TestArtifactRegistrationRetriedAfterUnavailable: the coordinator
// answers an artifact's registration 503 (as it does once an agent has
// spent its request budget: "slow down") and then drops the next attempt
// unanswered. The agent registers the artifact again after a backoff and
// the job ends with its result, not with a failure of its own.
func TestArtifactRegistrationRetriedAfterUnavailable(t *testing.T) {
	leakCheck(t)
	hook, tries := refuseFirst(protocol.VerbArtifact, protocol.CodeUnavailable, 0)
	r, verbs := oneScreenshotJob(t, hook)
	var results, fails int
	for _, v := range verbs {
		switch v {
		case protocol.VerbResult:
			results++
		case protocol.VerbFail:
			fails++
		}
	}
	if results != 1 || fails != 0 {
		t.Fatalf("calls %v: want the result and no failure report; log:\n%s", verbs, r.logs.String())
	}
	if n := tries(); n < 3 {
		t.Fatalf("%d registrations, want the refused one, the unanswered one and a third", n)
	}
}

// TestLeaseConfirmedAfterUnavailable: the renewal that confirms a job's
// lease before its work starts is answered 503 ("slow down"). The agent
// asks again after a backoff instead of leaving the job to its lease's
// expiry, and the job runs to its result.
func TestLeaseConfirmedAfterUnavailable(t *testing.T) {
	leakCheck(t)
	hook, _ := refuseFirst(protocol.VerbRenew, protocol.CodeUnavailable)
	r, verbs := oneScreenshotJob(t, hook)
	if len(verbs) < 2 || verbs[0] != protocol.VerbRenew || verbs[1] != protocol.VerbRenew || verbs[len(verbs)-1] != protocol.VerbResult {
		t.Fatalf("calls %v: want the refused renewal, another, and at the end the result; log:\n%s", verbs, r.logs.String())
	}
}
