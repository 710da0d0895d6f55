package capture_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestRunnerStepInfo: the step numbers the job gives (StepInfo)
// are the seq of the operation log lines and of default names; evidence
// captures share the effect step's seq, marked evidence, and take no
// number; a skipped step has its line and later steps go on from it.
func TestRunnerStepInfo(t *testing.T) {
	ctx := t.Context()
	log := capture.NewOpLog(capture.OpLogOptions{})
	r := capture.NewRunner(ctx, capture.NewSimulated(capture.SimOptions{Serial: "sim", Width: 32, Height: 32}), capture.RunnerOptions{OpLog: log})
	defer r.Close()
	run := func(info capture.StepInfo, s protocol.Step) capture.StepOutcome {
		t.Helper()
		out, err := r.RunStep(capture.WithStepInfo(ctx, info), s)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	run(capture.StepInfo{Seq: 1}, protocol.Step{Op: protocol.OpTap, X: 1, Y: 1})
	run(capture.StepInfo{Seq: 1, Evidence: true}, protocol.Step{Op: protocol.OpScreenshot, Name: "effect-001-x-after.png"})
	if err := r.SkipStep(2, protocol.Step{Op: protocol.OpTap, X: 2, Y: 2}, "effect done", nil); err != nil {
		t.Fatal(err)
	}
	if err := r.SkipStep(3, protocol.Step{Op: protocol.OpKey, Key: "K"}, "effect in doubt", errors.New("needs_decision: …")); err != nil {
		t.Fatal(err)
	}
	// Without StepInfo the runner goes on from the last number.
	out := run(capture.StepInfo{}, protocol.Step{Op: protocol.OpScreenshot})
	if out.Seq != 4 || out.Artifacts[0].Name != "screenshot-004.png" {
		t.Fatalf("next step: seq %d, %v; want 4 and screenshot-004.png", out.Seq, out.Artifacts[0].Name)
	}
	type line struct {
		Seq      int    `json:"seq"`
		Op       string `json:"op"`
		Outcome  string `json:"outcome"`
		Evidence bool   `json:"evidence"`
		Skipped  string `json:"skipped"`
	}
	want := []line{
		{1, protocol.OpTap, capture.OutcomeOK, false, ""},
		{1, protocol.OpScreenshot, capture.OutcomeOK, true, ""},
		{2, protocol.OpTap, capture.OutcomeOK, false, "effect done"},
		{3, protocol.OpKey, capture.OutcomeError, false, "effect in doubt"},
		{4, protocol.OpScreenshot, capture.OutcomeOK, false, ""},
	}
	var got []line
	sc := bufio.NewScanner(bytes.NewReader(log.Bytes()))
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		got = append(got, l)
	}
	if len(got) != len(want) {
		t.Fatalf("oplog lines %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d = %+v, want %+v", i+1, got[i], want[i])
		}
	}
}
