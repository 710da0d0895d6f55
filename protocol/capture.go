package protocol

import (
	"fmt"
	"slices"
	"strings"
)

// Task.Capture values.
const (
	// CaptureBeforeAfter takes a screenshot before and after every input
	// step (BeforeAfterOps), named by BeforeAfterNames.
	CaptureBeforeAfter = "before_after"
)

// CaptureModes lists the valid non-empty values of Task.Capture.
var CaptureModes = []string{CaptureBeforeAfter}

// BeforeAfterOps are the input steps: the ops that act on the phone, around
// which capture before_after takes its screenshots. wait, the captures
// (screenshot, ui_dump) and record_start/record_stop are not inputs.
var BeforeAfterOps = []string{OpLaunch, OpTap, OpLongPress, OpSwipe, OpScrollUntil, OpText, OpKey, OpWake, OpUnlock, OpOpenURL, OpForceStop, OpClearData, OpRotate}

// IsBeforeAfterOp reports whether op is an input step (BeforeAfterOps).
func IsBeforeAfterOp(op string) bool { return slices.Contains(BeforeAfterOps, op) }

// BeforeAfterNames returns the artifact names of the screenshots capture
// before_after takes around input step seq: screenshot-NNN-1-before.png and
// screenshot-NNN-2-after.png, which sort with the step's number among the
// default names of other steps (screenshot-NNN.png).
func BeforeAfterNames(seq int) (before, after string) {
	return fmt.Sprintf("screenshot-%03d-1-before.png", seq), fmt.Sprintf("screenshot-%03d-2-after.png", seq)
}

// ValidateCapture checks Task.Capture: empty or one of CaptureModes.
func ValidateCapture(mode string) error {
	if mode == "" || slices.Contains(CaptureModes, mode) {
		return nil
	}
	return fmt.Errorf("capture: %q is not one of %s (or empty)", clipForError(mode), strings.Join(CaptureModes, ", "))
}

func clipForError(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
