package agent_test

import (
	"sync"
	"testing"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestArtifactRegistrationRetriedAfterUnavailable: the coordinator
// answers an artifact's registration 503 (as it does once an agent has
// spent its request budget: "slow down") and then drops the next attempt
// unanswered. The agent registers the artifact again after a backoff and
// the job ends with its result, not with a failure of its own.
func TestArtifactRegistrationRetriedAfterUnavailable(t *testing.T) {
	leakCheck(t)
	var mu sync.Mutex
	tries := 0
	r := newRig(t, rigSetup{hook: func(verb string, _ fencing.Token) (any, int, bool, bool) {
		if verb != protocol.VerbArtifact {
			return nil, 0, false, false
		}
		mu.Lock()
		defer mu.Unlock()
		tries++
		switch tries {
		case 1:
			return nil, protocol.CodeUnavailable, false, true
		case 2:
			return nil, 0, true, true // no answer
		}
		return nil, 0, false, false
	}})
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, screenshotTask(1, 0)); err != nil {
		t.Fatal(err)
	}
	r.waitGone(tok.JobID)
	verbs := r.coord.verbs(tok.JobID)
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
	mu.Lock()
	defer mu.Unlock()
	if tries < 3 {
		t.Fatalf("%d registrations, want the refused one, the unanswered one and a third", tries)
	}
}

// TestLeaseConfirmedAfterUnavailable: the renewal that confirms a job's
// lease before its work starts is answered 503 ("slow down"). The agent
// asks again after a backoff instead of leaving the job to its lease's
// expiry, and the job runs to its result.
func TestLeaseConfirmedAfterUnavailable(t *testing.T) {
	leakCheck(t)
	var mu sync.Mutex
	renewals := 0
	r := newRig(t, rigSetup{hook: func(verb string, _ fencing.Token) (any, int, bool, bool) {
		if verb != protocol.VerbRenew {
			return nil, 0, false, false
		}
		mu.Lock()
		defer mu.Unlock()
		renewals++
		if renewals == 1 {
			return nil, protocol.CodeUnavailable, false, true
		}
		return nil, 0, false, false
	}})
	tok := r.token(1)
	if err := r.coord.assign("pc-a", tok, screenshotTask(1, 0)); err != nil {
		t.Fatal(err)
	}
	r.waitGone(tok.JobID)
	verbs := r.coord.verbs(tok.JobID)
	if len(verbs) < 2 || verbs[0] != protocol.VerbRenew || verbs[1] != protocol.VerbRenew || verbs[len(verbs)-1] != protocol.VerbResult {
		t.Fatalf("calls %v: want the refused renewal, another, and at the end the result; log:\n%s", verbs, r.logs.String())
	}
}
