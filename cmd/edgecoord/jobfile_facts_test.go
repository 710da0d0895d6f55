package main

import (
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/protocol"
)

// TestJobFileFactSelectors: a job file's device takes the fact limits, a
// temperature with a fraction included; an unknown key is refused.
func TestJobFileFactSelectors(t *testing.T) {
	req, err := parseJobFile([]byte(`device:
  tags: [lab]
  min_battery: 40
  max_temp_c: 38.5
  min_sdk: 30
  max_sdk: 34
  min_screen_width: 1080
  min_screen_height: 2000
steps:
  - {op: screenshot}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.DeviceSelector{Tags: []string{"lab"}, MinBattery: 40, MaxTempC: 38.5, MinSDK: 30, MaxSDK: 34, MinScreenWidth: 1080, MinScreenHeight: 2000}
	if d := req.Device; d.Describe() != want.Describe() {
		t.Errorf("device %s, want %s", d.Describe(), want.Describe())
	}
	if _, err := parseJobFile([]byte("device:\n  min_batery: 40\nsteps:\n  - {op: screenshot}\n")); err == nil || !strings.Contains(err.Error(), "min_batery") {
		t.Errorf("misspelt key: %v", err)
	}
}
