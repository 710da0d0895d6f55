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
