package main

import (
	"fmt"
	"io"
)

// printPhoneNotes writes, under agent show's phone table, why each phone
// that rests or is quarantined is not offered jobs, and each phone's facts
// as the agent last read them (docs/capture.md, Phone facts).
func printPhoneNotes(w io.Writer, devices []deviceView) {
	for _, d := range devices {
		if d.Reason != "" {
			fmt.Fprintf(w, "  %s %s: %s\n", d.Serial, d.State, d.Reason)
		}
		if s := d.Facts.Summary(); s != "" {
			fmt.Fprintf(w, "  %s facts: %s\n", d.Serial, s)
		}
	}
}
