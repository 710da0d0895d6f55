package sqlstore

import (
	"strings"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// JobEventOnlyVerbs is the SQL list of the write_events verbs that record
// job events rather than write attempts (submit, step): WriteEvents and
// WriteCounts leave them out.
var JobEventOnlyVerbs = sqlList([]string{jobstore.VerbSubmit, jobstore.VerbStep})

// NonEventVerbs and NonEndingVerbs are jobstore.NonEventVerbs and
// jobstore.NonEndingVerbs as SQL lists.
var (
	NonEventVerbs  = sqlList(jobstore.NonEventVerbs)
	NonEndingVerbs = sqlList(jobstore.NonEndingVerbs)
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
func EventLimit(q jobstore.EventQuery) int {
	if q.Limit <= 0 {
		return jobstore.DefaultEventLimit
	}
	return q.Limit
}
