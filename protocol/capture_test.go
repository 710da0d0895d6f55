package protocol

import (
	"slices"
	"strings"
	"testing"
)

// TestBeforeAfterNamesSort: the screenshots around input step N sort
// after the captures of step N-1 and before those of step N+1, before
// first.
func TestBeforeAfterNamesSort(t *testing.T) {
	b3, a3 := BeforeAfterNames(3)
	names := []string{CaptureName("", "screenshot", 4, ".png"), a3, CaptureName("", "screenshot", 2, ".png"), b3}
	slices.Sort(names)
	want := []string{"screenshot-002.png", "screenshot-003-1-before.png", "screenshot-003-2-after.png", "screenshot-004.png"}
	if !slices.Equal(names, want) {
		t.Fatalf("sorted = %q, want %q", names, want)
	}
	for _, n := range []string{b3, a3} {
		if err := ValidateArtifactName(n); err != nil {
			t.Error(err)
		}
	}
}

// TestTaskCaptureValidate: capture is empty or before_after; with
// before_after, every input op (and no other) produces two names.
func TestTaskCaptureValidate(t *testing.T) {
	task := Task{Capture: "both", Steps: []Step{{Op: OpTap}}}
	if err := task.Validate(); err == nil || !strings.HasPrefix(err.Error(), `capture: "both" is not one of before_after`) {
		t.Errorf("capture both: %v", err)
	}
	for _, op := range []string{OpLaunch, OpTap, OpSwipe, OpText, OpKey, OpWake, OpUnlock, OpOpenURL, OpForceStop, OpClearData, OpRotate} {
		if !IsBeforeAfterOp(op) {
			t.Errorf("%s is not an input step", op)
		}
	}
	for _, op := range []string{OpWait, OpScreenshot, OpUIDump, OpRecordStart, OpRecordStop} {
		if IsBeforeAfterOp(op) {
			t.Errorf("%s is an input step", op)
		}
	}
	// A named ui_dump cannot collide (.xml); a wait takes no screenshots.
	ok := Task{Capture: CaptureBeforeAfter, Steps: []Step{{Op: OpWait}, {Op: OpScreenshot, Name: "screenshot-001-1-before"}, {Op: OpKey, Key: "BACK"}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid task: %v", err)
	}
	bad := Task{Capture: CaptureBeforeAfter, Steps: []Step{{Op: OpKey, Key: "BACK"}, {Op: OpScreenshot, Name: "screenshot-001-2-after.png"}}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `steps[1]: artifact name "screenshot-001-2-after.png" is already produced by steps[0]`) {
		t.Errorf("collision: %v", err)
	}
	bad.Capture = ""
	if err := bad.Validate(); err != nil {
		t.Errorf("without capture the same task is valid: %v", err)
	}
}
