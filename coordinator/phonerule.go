package coordinator

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// PhoneRule decides which phones a project may use, from the coordinator's
// config (projects.<name>.phones): the one rule behind the scheduler's
// grants, fan-outs, REST and MCP sessions and the dashboard
// (docs/operations.md, "Which phones a project may use"). A project with
// selectors may use only the phones they select, and a selected phone takes
// work only from the projects selecting it; a project without selectors
// uses the phones no project selects. Without any selector (the zero or
// nil rule) every project may use every phone.
//
// A phone is also refused to every project while two online agents report
// its serial (DuplicateSerials): one of them is not the phone it claims.
type PhoneRule struct {
	sel map[string][]config.PhoneSelector
}

// NewPhoneRule returns the rule of the selectors by project
// (config.Coordinator.ProjectPhones).
func NewPhoneRule(sel map[string][]config.PhoneSelector) *PhoneRule {
	r := &PhoneRule{sel: map[string][]config.PhoneSelector{}}
	for p, s := range sel {
		if len(s) > 0 {
			r.sel[p] = slices.Clone(s)
		}
	}
	return r
}

// Restricts reports whether the rule sets any selector.
func (r *PhoneRule) Restricts() bool { return r != nil && len(r.sel) > 0 }

// selectedBy returns the projects whose selectors match the phone d of
// agent agentID, sorted.
func (r *PhoneRule) selectedBy(agentID string, d protocol.Device) []string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(r.sel)) {
		if slices.ContainsFunc(r.sel[p], func(s config.PhoneSelector) bool { return selects(s, agentID, d) }) {
			out = append(out, p)
		}
	}
	return out
}

func selects(s config.PhoneSelector, agentID string, d protocol.Device) bool {
	return (s.Agent != "" || s.Serial != "" || s.Tag != "") &&
		(s.Agent == "" || s.Agent == agentID) &&
		(s.Serial == "" || s.Serial == d.Serial) &&
		(s.Tag == "" || slices.Contains(d.Tags, s.Tag))
}

// Refusal says why project may not use phone d of agent agentID, "" when
// it may. dups are the duplicate serials (DuplicateSerials).
func (r *PhoneRule) Refusal(project, agentID string, d protocol.Device, dups map[string][]string) string {
	if agents := dups[d.Serial]; len(agents) > 1 {
		return DuplicateReason(d.Serial, agents)
	}
	if !r.Restricts() {
		return ""
	}
	by := r.selectedBy(agentID, d)
	switch {
	case len(by) > 0 && !slices.Contains(by, project):
		return fmt.Sprintf("reserved for project %s by projects.<name>.phones", strings.Join(by, ", "))
	case len(by) == 0 && len(r.sel[project]) > 0:
		return fmt.Sprintf("not selected by projects.%s.phones", project)
	}
	return ""
}

// RefusalFor says why none of projects may use phone d of agent agentID,
// "" when one may; a caller of every project ("*") may use every phone. The
// MCP tools and the dashboard say it of a token's or visitor's projects.
func (r *PhoneRule) RefusalFor(projects []string, agentID string, d protocol.Device) string {
	if !r.Restricts() || slices.Contains(projects, "*") {
		return ""
	}
	var why []string
	for _, p := range projects {
		reason := r.Refusal(p, agentID, d, nil)
		if reason == "" {
			return ""
		}
		why = append(why, reason)
	}
	return strings.Join(slices.Compact(why), "; ")
}

// Projects describes which projects may use phone d of agent agentID, for
// the claim (jobstore.ClaimRequest.DeviceProjects): exactly the projects
// selecting it, or every project but those with selectors.
func (r *PhoneRule) Projects(agentID string, d protocol.Device) jobstore.DeviceProjects {
	if !r.Restricts() {
		return jobstore.DeviceProjects{}
	}
	if by := r.selectedBy(agentID, d); len(by) > 0 {
		return jobstore.DeviceProjects{Projects: by, Only: true}
	}
	return jobstore.DeviceProjects{Projects: slices.Sorted(maps.Keys(r.sel))}
}

// DuplicateSerials returns the serials that more than one online agent
// (heard from within offlineAfter; every agent when 0) reports, each with
// the agents reporting it, sorted.
func DuplicateSerials(agents []jobstore.Agent, offlineAfter time.Duration) map[string][]string {
	by := map[string][]string{}
	for _, a := range agents {
		if offlineAfter > 0 && !a.Online(offlineAfter) {
			continue
		}
		for _, d := range a.Devices {
			if d.Serial != "" && !slices.Contains(by[d.Serial], a.ID) {
				by[d.Serial] = append(by[d.Serial], a.ID)
			}
		}
	}
	var out map[string][]string
	for serial, ids := range by {
		if len(ids) > 1 {
			if out == nil {
				out = map[string][]string{}
			}
			slices.Sort(ids)
			out[serial] = ids
		}
	}
	return out
}

// DuplicateReason is the refusal of a phone whose serial several agents
// report.
func DuplicateReason(serial string, agents []string) string {
	return fmt.Sprintf("serial %s is reported by agents %s: refused to every project until only one reports it", serial, strings.Join(agents, " and "))
}
