package agent_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestSlotFreeDuringFinalCall: with one slot, a job whose result is sent
// but not yet answered holds no slot. The coordinator grants the next job
// as soon as it has accepted a result, so the assign can arrive before
// the agent has seen the answer: it is taken, not refused with 503, and a
// heartbeat sent meanwhile reports the slot free.
func TestSlotFreeDuringFinalCall(t *testing.T) {
	r := newRig(t, rigSetup{slots: 1})
	first, second := r.token(1), r.token(1)
	inResult, answer := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r.coord.setHook(func(verb string, tok fencing.Token) (any, int, bool, bool) {
		if verb == protocol.VerbResult && tok == first {
			once.Do(func() { close(inResult) })
			<-answer
		}
		return nil, 0, false, false
	})
	if err := r.coord.assign("pc-a", first, screenshotTask(1, 0)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inResult:
	case <-time.After(30 * time.Second):
		t.Fatalf("the first job never sent its result; log:\n%s", r.logs.String())
	}
	err := r.coord.assign("pc-a", second, screenshotTask(1, 0))
	close(answer)
	if err != nil {
		t.Fatalf("assign while the first job's result is in flight: %v, want it taken", err)
	}
	testenv.Eventually(t, 30*time.Second, "the second job's result", func() bool {
		for _, q := range r.coord.requests(second.JobID) {
			if q.verb == protocol.VerbResult {
				return true
			}
		}
		return false
	})
	r.waitGone(second.JobID)
}

// TestRefusedForSlotReportsFreeSlotAtOnce: an assign refused with 503 for
// want of a slot is followed by a heartbeat at once, and by another as soon
// as the slot frees (without waiting for the heartbeat interval), which
// reports it free: the coordinator, which assigns the agent nothing after
// such a refusal until it hears of a free slot, loses no time.
func TestRefusedForSlotReportsFreeSlotAtOnce(t *testing.T) {
	// Heartbeats every minute: any heartbeat the test sees is one the
	// agent sent of its own accord.
	r := newRig(t, rigSetup{slots: 1, hook: func(verb string, _ fencing.Token) (any, int, bool, bool) {
		if verb != protocol.VerbHello {
			return nil, 0, false, false
		}
		return protocol.HelloReply{LeaseTTLMS: 3000, HeartbeatMS: 60_000, ServerTime: time.Now().UTC(), CoordinatorID: "fake"}, 0, false, true
	}})
	first := r.token(1)
	if err := r.coord.assign("pc-a", first, screenshotTask(1, 300)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the first job to renew its lease", func() bool {
		for _, q := range r.coord.requests(first.JobID) {
			if q.verb == protocol.VerbRenew {
				return true
			}
		}
		return false
	})
	refused := time.Now()
	if err := r.coord.assign("pc-a", r.token(1), screenshotTask(1, 0)); err == nil {
		t.Fatal("second assign taken with the only slot busy, want 503")
	}
	var freeAt time.Time
	testenv.Eventually(t, 20*time.Second, "a heartbeat reporting the slot free", func() bool {
		for _, q := range r.coord.requests("") {
			var hb protocol.Heartbeat
			if q.verb == protocol.VerbHeartbeat && q.at.After(refused) && json.Unmarshal(q.data, &hb) == nil && hb.Free > 0 {
				freeAt = q.at
				return true
			}
		}
		return false
	})
	// The slot frees when the job begins its final call (the result): the
	// report comes after every earlier call of the job was answered. The
	// result itself reaches the coordinator on another subscription, so
	// which of the two it handles first is not the agent's to order.
	var lastBefore time.Time
	results := 0
	for _, q := range r.coord.requests(first.JobID) {
		if q.verb == protocol.VerbResult {
			results++
			continue
		}
		if results == 0 {
			lastBefore = q.at
		}
	}
	if results == 0 || lastBefore.IsZero() || freeAt.Before(lastBefore) {
		t.Fatalf("free slot reported at %v, the first job's last call before its result at %v (%d results): want the report after the job's calls", freeAt, lastBefore, results)
	}
}
