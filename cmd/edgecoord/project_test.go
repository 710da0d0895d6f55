package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestServeProjectLimits: edgecoord serve keeps a project's jobs in
// progress at its projects.<name>.max_running, other projects' at
// jobs.default_max_running, and a project named with 0 unlimited, while
// phones stay free; job list --project lists one project's jobs; the
// project_jobs gauge shows them (docs/operations.md, "Priorities, projects
// and not_before").
func TestServeProjectLimits(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	// The store section is followed by the top-level keys under test.
	srv := serve(t, ns.ClientURL(), fmt.Sprintf("  driver: sqlite\n  path: %s\njobs:\n  default_max_running: 1\nprojects:\n  survey-a:\n    max_running: 2\n  open:\n    max_running: 0",
		filepath.Join(t.TempDir(), "jobs.db")))
	var phones []protocol.Device
	for i := range 7 {
		phones = append(phones, protocol.Device{Serial: fmt.Sprintf("P%d", i), State: protocol.DeviceReady, Model: "Pixel 7"})
	}
	agent := coordtest.Start(t, coordtest.Options{ID: "pc-a", URL: ns.ClientURL(), Slots: 7, Devices: phones,
		Behavior: func(fencing.Token) coordtest.Behavior { return coordtest.Hold }})
	for i := range 3 {
		srv.mustCLI(t, "job", "submit", "-id", fmt.Sprintf("a-%d", i), "-f", writeFile(t, "a.yaml", "project: survey-a\nsteps: [{op: screenshot}]\n"))
	}
	for i := range 2 {
		srv.mustCLI(t, "job", "submit", "-id", fmt.Sprintf("b-%d", i), "-f", writeFile(t, "b.yaml", "project: survey-b\nsteps: [{op: screenshot}]\n"))
		srv.mustCLI(t, "job", "submit", "-id", fmt.Sprintf("o-%d", i), "-f", writeFile(t, "o.yaml", "project: open\nsteps: [{op: screenshot}]\n"))
	}
	waitAssigned := func(id string) {
		testenv.Eventually(t, 10*time.Second, "job "+id+" assigned", func() bool {
			for _, tk := range agent.Assigns() {
				if tk.JobID == id {
					return true
				}
			}
			return false
		})
	}
	for _, id := range []string{"a-0", "a-1", "b-0", "o-0", "o-1"} {
		waitAssigned(id)
	}

	var jobs []struct{ ID, Status string }
	if err := json.Unmarshal([]byte(srv.mustCLI(t, "job", "list", "--project", "survey-a", "--json")), &jobs); err != nil {
		t.Fatal(err)
	}
	statuses := map[string]string{}
	for _, j := range jobs {
		statuses[j.ID] = j.Status
	}
	if want := map[string]string{"a-0": "IN_PROGRESS", "a-1": "IN_PROGRESS", "a-2": "QUEUED"}; fmt.Sprint(statuses) != fmt.Sprint(want) {
		t.Fatalf("job list --project survey-a: %v, want %v", statuses, want)
	}
	if out := srv.mustCLI(t, "job", "list", "--project", "survey-b", "--status", "queued"); strings.Count(out, "\n") != 2 || !strings.Contains(out, "b-1") {
		t.Fatalf("job list --project survey-b:\n%s", out)
	}
	if code, _, stderr := srv.cli(t, "job", "list", "--project", "bad name"); code != 2 || !strings.Contains(stderr, "--project") {
		t.Fatalf("job list --project with a bad name: exit %d, %q", code, stderr)
	}

	resp, err := http.Get("http://" + srv.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`project_jobs{project="survey-a",state="IN_PROGRESS"} 2`,
		`project_jobs{project="survey-a",state="QUEUED"} 1`,
		`project_jobs{project="survey-b",state="IN_PROGRESS"} 1`,
		`project_jobs{project="survey-b",state="QUEUED"} 1`,
		`project_jobs{project="open",state="IN_PROGRESS"} 2`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics of edgecoord serve lacks %q", want)
		}
	}
	if n := len(agent.Assigns()); n != 5 {
		t.Fatalf("agent got %d jobs with 7 phones, want 5 (2 of survey-a, 1 of survey-b, 2 of open)", n)
	}
}
