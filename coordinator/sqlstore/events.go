package sqlstore

import (
	"strings"

	"github.com/edgeagent/edgeagent/coordinator"
)

// JobEventOnlyVerbs is the SQL list of the write_events verbs that record
// job events rather than write attempts (submit, step): WriteEvents and
// WriteCounts leave them out.
var JobEventOnlyVerbs = sqlList([]string{coordinator.VerbSubmit, coordinator.VerbStep})

// NonEventVerbs and NonEndingVerbs are coordinator.NonEventVerbs and
// coordinator.NonEndingVerbs as SQL lists.
var (
	NonEventVerbs  = sqlList(coordinator.NonEventVerbs)
	NonEndingVerbs = sqlList(coordinator.NonEndingVerbs)
)

// sqlList renders constant verbs as a parenthesised SQL list of literals.
// The verbs are constants of this module (letters and _ only).
func sqlList(verbs []string) string {
	q := make([]string, len(verbs))
	for i, v := range verbs {
		q[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
	}
	return "(" + strings.Join(q, ", ") + ")"
}

// EventLimit is q's limit with the default applied.
func EventLimit(q coordinator.EventQuery) int {
	if q.Limit <= 0 {
		return coordinator.DefaultEventLimit
	}
	return q.Limit
}
