package config

import (
	"fmt"
	"sort"
)

// CoordinatorJobs configures the jobs the coordinator grants.
// Project configures one project, named by its key under projects.
type Project struct {
	// MaxRunning bounds the project's jobs in progress at once, across every
	// agent and every coordinator sharing the store; 0 means no limit (the
	// project is then exempt from jobs.default_max_running).
	MaxRunning int `yaml:"max_running" json:"max_running"`
	// Phones, when set, are the only phones the project's work (jobs,
	// fan-outs, sessions, MCP) may use, and those phones take work only
	// from the projects that select them; a project without phones uses
	// the phones no project selects. With no phones under any project,
	// every project may use every phone (docs/operations.md, "Which
	// phones a project may use").
	Phones []PhoneSelector `yaml:"phones" json:"phones,omitempty"`
}

// PhoneSelector selects phones for a project: every field set must match
// (agent id, serial, a tag the phone carries); at least one is set.
// Only the agent id is proven by the agent's credentials; the serial and
// the tags are what that agent reports.
type PhoneSelector struct {
	Agent  string `yaml:"agent" json:"agent,omitempty"`
	Serial string `yaml:"serial" json:"serial,omitempty"`
	Tag    string `yaml:"tag" json:"tag,omitempty"`
}

// ProjectPhones returns the phone selectors of every project that has
// some, by project name; nil when none has.
func (c *Coordinator) ProjectPhones() map[string][]PhoneSelector {
	var out map[string][]PhoneSelector
	for name, p := range c.Projects {
		if len(p.Phones) > 0 {
			if out == nil {
				out = map[string][]PhoneSelector{}
			}
			out[name] = p.Phones
		}
	}
	return out
}

// ProjectLimits returns the max_running of every configured project by
// name, for the scheduler.
func (c *Coordinator) ProjectLimits() map[string]int {
	if len(c.Projects) == 0 {
		return nil
	}
	out := make(map[string]int, len(c.Projects))
	for name, p := range c.Projects {
		out[name] = p.MaxRunning
	}
	return out
}

// validateProjects checks jobs.default_max_running and every project
// entry.
func (c *Coordinator) validateProjects(ps *Problems) {
	if c.Jobs.DefaultMaxRunning < 0 {
		ps.add("jobs.default_max_running", "must not be negative (0 means no limit), got %d", c.Jobs.DefaultMaxRunning)
	}
	names := make([]string, 0, len(c.Projects))
	for name := range c.Projects {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		path := "projects." + name
		if msg := projectNameProblem(name); msg != "" {
			ps.add(path, "%s", msg)
		}
		if n := c.Projects[name].MaxRunning; n < 0 {
			ps.add(path+".max_running", "must not be negative (0 means no limit), got %d", n)
		}
		for i, sel := range c.Projects[name].Phones {
			if sel.Agent == "" && sel.Serial == "" && sel.Tag == "" {
				ps.add(fmt.Sprintf("%s.phones[%d]", path, i), "set agent, serial or tag (an empty selector would select every phone)")
			}
		}
	}
}

// projectNameProblem describes what is wrong with a project name, "" when
// nothing is: 1 to 64 characters from A-Z, a-z, 0-9, _, . and -, starting
// with a letter or digit (the rule of jobstore.CheckProject, which jobs
// are submitted under).
func projectNameProblem(p string) string {
	if len(p) == 0 || len(p) > 64 {
		return "project name must be 1 to 64 characters"
	}
	for i, r := range p {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !ok && (i == 0 || r != '_' && r != '.' && r != '-') {
			return fmt.Sprintf("project name: character %d must be a letter, digit, or (after the first) one of _ . -", i+1)
		}
	}
	return ""
}
