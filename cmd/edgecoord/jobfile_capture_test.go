package main

import (
	"context"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestJobFileCaptureAndLogcat: a job file's capture and logcat keys reach
// the job's task; an unknown capture mode, or before_after screenshots
// whose names a named screenshot takes, is refused naming the field.
func TestJobFileCaptureAndLogcat(t *testing.T) {
	req, err := parseJobFile([]byte("capture: before_after\nlogcat: true\nsteps:\n  - {op: tap, x: 1, y: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	specs, _, err := req.Specs(context.Background(), nil, api.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 1 || specs[0].Task.Capture != protocol.CaptureBeforeAfter || !specs[0].Task.Logcat {
		t.Fatalf("task = %+v, want capture before_after and logcat", specs[0].Task)
	}
	for file, wantErr := range map[string]string{
		"capture: always\nsteps:\n  - {op: tap}\n":                                                            `capture: "always" is not one of before_after`,
		"capture: before_after\nsteps:\n  - {op: screenshot, name: screenshot-002-1-before}\n  - {op: tap}\n": `steps[1]: artifact name "screenshot-002-1-before.png" is already produced by steps[0]`,
	} {
		req, err := parseJobFile([]byte(file))
		if err == nil {
			err = req.Check()
		}
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: err = %v, want %q", file, err, wantErr)
		}
	}
}
