package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// printRecovery prints agent show's Recovery section: for each phone the
// agent holds from jobs (recovering, quarantined) or whose recovery ladder
// did anything, its state and reason and the count of each rung
// (docs/capture.md, Recovery). Nothing when no phone has any.
func printRecovery(w io.Writer, v agentView) {
	var lines []string
	for _, d := range v.Devices {
		if d.Recovery == nil && d.Reason == "" {
			continue
		}
		line := fmt.Sprintf("  %s  %s", d.Serial, d.State)
		if d.Reason != "" {
			line += ": " + d.Reason
		}
		if r := d.Recovery; r != nil {
			line += fmt.Sprintf("\n    probe failures %d, reconnects %d, reboots %d, quarantines %d, hub drops %d",
				r.ProbeFailures, r.Reconnects, r.Reboots, r.Quarantines, r.HubDrops)
			if r.Last != "" {
				line += "\n    last: " + r.Last
				if r.LastAtUnixMilli > 0 {
					line += " (" + time.UnixMilli(r.LastAtUnixMilli).UTC().Format(timeFormat) + ")"
				}
			}
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\nRecovery:\n%s\n", strings.Join(lines, "\n"))
}
