package main

import (
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/protocol"
)

// TestJobFileNewOps: a job file carries the ops wake, unlock, open_url,
// force_stop, clear_data and rotate with their fields, and Japanese text;
// a bad URL or orientation is refused naming the step and the field.
func TestJobFileNewOps(t *testing.T) {
	spec, err := parseJobFile([]byte(`steps:
  - {op: wake}
  - {op: unlock}
  - {op: clear_data, package: com.example.shop}
  - {op: open_url, url: "https://example.com/search?q=%E6%9D%B1"}
  - {op: force_stop, package: com.example.shop}
  - {op: rotate, orientation: landscape}
  - {op: text, text: "東京 ラーメン"}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []protocol.Step{
		{Op: protocol.OpWake}, {Op: protocol.OpUnlock},
		{Op: protocol.OpClearData, Package: "com.example.shop"},
		{Op: protocol.OpOpenURL, URL: "https://example.com/search?q=%E6%9D%B1"},
		{Op: protocol.OpForceStop, Package: "com.example.shop"},
		{Op: protocol.OpRotate, Orientation: "landscape"},
		{Op: protocol.OpText, Text: "東京 ラーメン"},
	}
	if len(spec.Steps) != len(want) {
		t.Fatalf("steps = %+v", spec.Steps)
	}
	for i := range want {
		if spec.Steps[i].Op != want[i].Op || spec.Steps[i].URL != want[i].URL || spec.Steps[i].Orientation != want[i].Orientation ||
			spec.Steps[i].Package != want[i].Package || spec.Steps[i].Text != want[i].Text {
			t.Errorf("steps[%d] = %+v, want %+v", i, spec.Steps[i], want[i])
		}
	}
	for file, wantErr := range map[string]string{
		"steps:\n  - {op: open_url, url: /relative}\n":   "steps[0]: url: url has no scheme",
		"steps:\n  - {op: rotate, orientation: up}\n":    `steps[0]: orientation: "up" is not one of`,
		"steps:\n  - {op: clear_data}\n":                 "steps[0]: package: clear_data needs package",
		"steps:\n  - {op: open_url, url: \"a b://x\"}\n": "steps[0]: url: url has a space",
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
