package main

import (
	"fmt"
	"io"
	"strings"
)

// printPhoneNotes writes, under agent show's phone table, why each phone
// that rests or is quarantined is not offered jobs, each phone's facts as
// the agent last read them, and its apps with their versions
// (docs/capture.md, Phone facts).
func printPhoneNotes(w io.Writer, devices []deviceView) {
	for _, d := range devices {
		if d.Reason != "" {
			fmt.Fprintf(w, "  %s %s: %s\n", d.Serial, d.State, d.Reason)
		}
		if s := d.Facts.Summary(); s != "" {
			fmt.Fprintf(w, "  %s facts: %s\n", d.Serial, s)
		}
		if d.Facts != nil && len(d.Facts.Apps) > 0 {
			apps := make([]string, len(d.Facts.Apps))
			for i, a := range d.Facts.Apps {
				apps[i] = a.String()
			}
			fmt.Fprintf(w, "  %s apps: %s\n", d.Serial, strings.Join(apps, ", "))
		}
	}
}
