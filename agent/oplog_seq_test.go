package agent_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// oplogLines returns the operation log the job uploaded.
func (r *rig) oplogLines(tok fencing.Token) []capture.OpEntry {
	r.t.Helper()
	r.store.mu.Lock()
	data, ok := r.store.objects[tok.ObjectKey(capture.OpLogName)]
	r.store.mu.Unlock()
	if !ok {
		r.t.Fatalf("no operation log for %s", tok.JobID)
	}
	var out []capture.OpEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var e capture.OpEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			r.t.Fatalf("oplog line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// resultSteps returns the "steps" of the job's result.
func (r *rig) resultSteps(tok fencing.Token) int {
	r.t.Helper()
	for _, q := range r.coord.requests(tok.JobID) {
		if q.verb != protocol.VerbResult {
			continue
		}
		var res struct {
			Result struct {
				Steps int `json:"steps"`
			} `json:"result"`
		}
		if err := json.Unmarshal(q.data, &res); err != nil {
			r.t.Fatal(err)
		}
		return res.Result.Steps
	}
	r.t.Fatalf("no result for %s: %v", tok.JobID, r.coord.verbs(tok.JobID))
	return 0
}

// describe renders oplog lines as "seq:op[:evidence|:skipped][=artifact]".
func describe(lines []capture.OpEntry) string {
	var parts []string
	for _, e := range lines {
		s := fmt.Sprintf("%d:%s", e.Seq, e.Op)
		if e.Evidence {
			s += ":evidence"
		}
		if e.Skipped != "" {
			s += ":skipped"
		}
		for _, a := range e.Artifacts {
			s += "=" + a.Name
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// TestOpLogSeqIsStepNumber: seq in the operation log is the
// task's step number whether an effect step runs (its evidence captures
// share its seq, marked evidence, named after it) or is skipped (a line
// marked skipped); default capture names and the result's steps follow the
// same numbers.
func TestOpLogSeqIsStepNumber(t *testing.T) {
	r := newRig(t, rigSetup{ttl: 5 * time.Second})
	var mu sync.Mutex
	state := map[string]string{} // job id → the state effect requests get
	r.coord.setHook(func(verb string, tok fencing.Token) (any, int, bool, bool) {
		if verb != protocol.VerbEffect {
			return nil, 0, false, false
		}
		mu.Lock()
		st := state[tok.JobID]
		mu.Unlock()
		rep := protocol.EffectReply{Key: "k", State: st, JobID: tok.JobID, Owner: tok.Owner, Generation: tok.Generation}
		if st == protocol.EffectDone {
			rep.Owner, rep.Generation = "pc-old/1", 1
			rep.Receipt = &protocol.EffectReceipt{Outcome: protocol.ReceiptOK, At: time.Now().UTC()}
		}
		return rep, 0, false, true
	})
	task := protocol.Task{Steps: []protocol.Step{
		{Op: protocol.OpLaunch, Package: "com.example.shop"},
		{Op: protocol.OpTap, X: 80, Y: 200, Effect: &protocol.EffectSpec{Key: "k"}},
		{Op: protocol.OpScreenshot},
		{Op: protocol.OpKey, Key: "KEYCODE_BACK"},
	}}
	sum := "8254c329" // first 8 hex digits of SHA-256("k")
	for _, c := range []struct {
		state string
		want  string
	}{
		{protocol.EffectReserved, "1:launch 2:tap 2:screenshot:evidence=effect-002-" + sum + "-after.png 2:ui_dump:evidence=effect-002-" + sum + "-after.xml 3:screenshot=screenshot-003.png 4:key"},
		{protocol.EffectDone, "1:launch 2:tap:skipped 3:screenshot=screenshot-003.png 4:key"},
	} {
		tok := r.token(2)
		mu.Lock()
		state[tok.JobID] = c.state
		mu.Unlock()
		if err := r.coord.assign("pc-a", tok, task); err != nil {
			t.Fatal(err)
		}
		r.waitGone(tok.JobID)
		if got := describe(r.oplogLines(tok)); got != c.want {
			t.Errorf("effect %s: operation log\n  %s\nwant\n  %s", c.state, got, c.want)
		}
		if n := r.resultSteps(tok); n != len(task.Steps) {
			t.Errorf("effect %s: result steps = %d, want %d", c.state, n, len(task.Steps))
		}
	}
}
