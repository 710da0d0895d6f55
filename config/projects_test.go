package config

import (
	"maps"
	"testing"
)

const projectsBase = "nats:\n  url: nats://h:4222\n"

// TestProjectLimits: jobs.default_max_running and projects.<name>.max_running
// decode into the limits the scheduler gets; a merge key can share one
// project's settings with another.
func TestProjectLimits(t *testing.T) {
	c, err := ParseCoordinator("c.yaml", []byte(projectsBase+
		"jobs:\n  default_max_running: 5\nprojects:\n  survey-a: &lim {max_running: 2}\n  survey.b:\n    <<: *lim\n  open-c:\n    max_running: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Jobs.DefaultMaxRunning != 5 {
		t.Errorf("default_max_running %d", c.Jobs.DefaultMaxRunning)
	}
	want := map[string]int{"survey-a": 2, "survey.b": 2, "open-c": 0}
	if got := c.ProjectLimits(); !maps.Equal(got, want) {
		t.Errorf("limits %v, want %v", got, want)
	}
	d := DefaultCoordinator()
	if d.Jobs.DefaultMaxRunning != 0 || d.ProjectLimits() != nil {
		t.Errorf("defaults: %+v %v", d.Jobs, d.ProjectLimits())
	}
}

// TestProjectProblems: each bad value is reported with its place in the file.
func TestProjectProblems(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"negative default", "jobs:\n  default_max_running: -1\n",
			[]string{"c.yaml:4:24: jobs.default_max_running: must not be negative (0 means no limit), got -1"}},
		{"default not an integer", "jobs:\n  default_max_running: two\n",
			[]string{`c.yaml:4:24: jobs.default_max_running: expected an integer, got a string "two"`}},
		{"negative max_running", "projects:\n  survey-a:\n    max_running: -3\n",
			[]string{"c.yaml:5:18: projects.survey-a.max_running: must not be negative (0 means no limit), got -3"}},
		{"unknown key in a project", "projects:\n  survey-a:\n    max_runing: 2\n",
			[]string{`c.yaml:5:5: projects.survey-a: unknown field "max_runing" (did you mean "max_running"?)`}},
		{"bad project name", "projects:\n  -survey:\n    max_running: 1\n",
			[]string{"c.yaml:4:3: projects.-survey: project name: character 1 must be a letter, digit, or (after the first) one of _ . -"}},
		{"project not a mapping", "projects:\n  survey-a: 2\n",
			[]string{"c.yaml:4:13: projects.survey-a: expected a mapping, got an integer"}},
		{"empty phone selector", "projects:\n  survey-a:\n    phones:\n      - agent: pc-1\n      - {}\n",
			[]string{"c.yaml:7:9: projects.survey-a.phones[1]: set agent, serial or tag (an empty selector would select every phone)"}},
		{"unknown key in a phone selector", "projects:\n  survey-a:\n    phones:\n      - agnet: pc-1\n",
			[]string{`c.yaml:6:9: projects.survey-a.phones[0]: unknown field "agnet"`,
				"c.yaml:6:9: projects.survey-a.phones[0]: set agent, serial or tag (an empty selector would select every phone)"}},
		{"projects not a mapping", "projects: [survey-a]\n",
			[]string{"c.yaml:3:11: projects: expected a mapping, got a list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCoordinator("c.yaml", []byte(projectsBase+tc.src))
			checkProblems(t, err, tc.want)
		})
	}
}

// TestProjectPhones: projects.<name>.phones decode into the selectors the
// coordinator's phone rule gets; none set means no rule.
func TestProjectPhones(t *testing.T) {
	c, err := ParseCoordinator("c.yaml", []byte(projectsBase+
		"projects:\n  lab:\n    phones:\n      - agent: pc-lab\n      - {serial: R58M, tag: spare}\n  open:\n    max_running: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := c.ProjectPhones()
	want := []PhoneSelector{{Agent: "pc-lab"}, {Serial: "R58M", Tag: "spare"}}
	if len(got) != 1 || len(got["lab"]) != 2 || got["lab"][0] != want[0] || got["lab"][1] != want[1] {
		t.Errorf("phones %+v, want lab: %+v", got, want)
	}
	if DefaultCoordinator().ProjectPhones() != nil {
		t.Error("the default config has a phone rule")
	}
}
