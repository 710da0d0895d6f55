package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestJobAttempts: job submit applies the jobs section of the config (a
// default timeout and attempt limit); job show lists the project,
// priority, attempts, deadline and why every attempt ended
// (testdata/job_show_attempts.golden); job list --status takes the end
// states.
func TestJobAttempts(t *testing.T) {
	ns := testenv.NATS(t)
	db := filepath.Join(t.TempDir(), "jobs.db")
	srv := serveTTL(t, ns.ClientURL(), fmt.Sprintf(`  driver: sqlite
  path: %s
jobs:
  default_timeout: 10m
  max_attempts: 2
  retry_backoff: 10ms
  retry_backoff_max: 20ms`, db), "5m")
	// No phone matches: the coordinator leaves the job alone.
	srv.mustCLI(t, "job", "submit", "-f", writeFile(t, "job.yaml", `id: flaky-1
device: {serial: nowhere}
steps:
  - {op: screenshot, name: home}
`))
	var v struct {
		Attempts    int `json:"attempts"`
		MaxAttempts int `json:"max_attempts"`
		Task        struct {
			TimeoutMS int64 `json:"timeout_ms"`
		} `json:"task"`
	}
	if err := json.Unmarshal([]byte(srv.mustCLI(t, "job", "show", "flaky-1", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Attempts != 0 || v.MaxAttempts != 2 || v.Task.TimeoutMS != (10*time.Minute).Milliseconds() {
		t.Fatalf("submitted job: %+v, want the defaults of the jobs section", v)
	}

	// Two attempts end with infrastructure failures, as two agents'
	// fails would.
	st, err := sqlitestore.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, owner := range []string{"pc-1/0123456789abcdef", "pc-2/0123456789abcdef"} {
		l, err := st.Claim(t.Context(), "flaky-1", owner, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		f := jobstore.Failure{Reason: "step 1 (screenshot): adb: device offline", Class: protocol.FailClassInfrastructure, Cause: protocol.CausePhoneUnplugged}
		if err := st.Fail(t.Context(), l.Token, f); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Golden(t, "job_show_attempts.golden", normalize(srv.mustCLI(t, "job", "show", "flaky-1")))

	list := srv.mustCLI(t, "job", "list", "--status", "failed,timed_out,cancelled,needs_decision")
	if !strings.Contains(list, "flaky-1") || !strings.Contains(list, "attempts exhausted (2 of 2)") {
		t.Fatalf("job list of the end states:\n%s", list)
	}
	if out := srv.mustCLI(t, "job", "list", "--status", "queued,in_progress,succeeded"); strings.Contains(out, "flaky-1") {
		t.Fatalf("job list of the live states:\n%s", out)
	}
	code, _, stderr := srv.cli(t, "job", "list", "--status", "done")
	if code != 2 || !strings.Contains(stderr, `unknown status "done"`) || !strings.Contains(stderr, "timed_out") {
		t.Fatalf("job list --status done: exit %d, %q", code, stderr)
	}
}
