package agentstatus

import (
	"fmt"
	"io"

	"github.com/edgeagent/edgeagent/protocol"
)

// renderPhoneNotes writes, under the phone table, why each phone that
// rests or is quarantined is not offered jobs, and each phone's facts
// (docs/capture.md, Phone facts).
func renderPhoneNotes(w io.Writer, phones []protocol.AgentPhone) {
	for _, p := range phones {
		if p.Reason != "" {
			fmt.Fprintf(w, "  %s %s: %s\n", p.Serial, p.State, p.Reason)
		}
		if s := p.Facts.Summary(); s != "" {
			fmt.Fprintf(w, "  %s facts: %s\n", p.Serial, s)
		}
	}
}
