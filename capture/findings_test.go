package capture_test

import (
	"context"
	"testing"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/internal/fakeadbd"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestADBUnnamedRecordingTakesStartNumber: an unnamed record_start at step
// 6 stopped at step 8 is stored as recording-006.mp4, the number of the
// step that started it (docs/protocol.md section 5), and task validation
// counts the same name.
func TestADBUnnamedRecordingTakesStartNumber(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{RecordingSize: 4 << 10})
	inv := l.inventory(t, l.options())
	ctx := context.Background()
	dev, release, err := inv.AcquireMatching(ctx, protocol.DeviceSelector{Serial: l.phones[0].Serial()})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	r := capture.NewRunner(ctx, dev, capture.RunnerOptions{})
	defer r.Close()
	steps := []protocol.Step{
		{Op: protocol.OpTap, X: 1, Y: 1},
		{Op: protocol.OpTap, X: 2, Y: 2},
		{Op: protocol.OpTap, X: 3, Y: 3},
		{Op: protocol.OpTap, X: 4, Y: 4},
		{Op: protocol.OpTap, X: 5, Y: 5},
		{Op: protocol.OpRecordStart},
		{Op: protocol.OpWait, DurationMS: 10},
		{Op: protocol.OpRecordStop},
		// A screenshot named like the recording of the stop's number does
		// not collide.
		{Op: protocol.OpScreenshot, Name: "recording-008.mp4.png"},
	}
	task := protocol.Task{Steps: steps}
	if err := task.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	dup := protocol.Task{Steps: append(append([]protocol.Step(nil), steps...), protocol.Step{Op: protocol.OpUIDump, Name: "recording-006.mp4.xml"})}
	if err := dup.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	var names []string
	for _, s := range steps {
		out, err := r.RunStep(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range out.Artifacts {
			names = append(names, a.Name)
		}
	}
	if len(names) != 2 || names[0] != "recording-006.mp4" {
		t.Errorf("artifacts = %q, want recording-006.mp4 first (the record_start's number)", names)
	}
	// Validation names the same: a screenshot called recording-006.mp4
	// collides with it.
	clash := protocol.Task{Steps: append(append([]protocol.Step(nil), steps[:8]...), protocol.Step{Op: protocol.OpRecordStart, Name: "recording-006"}, protocol.Step{Op: protocol.OpRecordStop})}
	if err := clash.Validate(); err == nil {
		t.Error("validate: a second recording named recording-006 passed; the first unnamed one (started at step 6) produces recording-006.mp4")
	}
}
