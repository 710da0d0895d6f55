package chaos300

import (
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/testkit/chaos"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestChaos300 runs `edgelab chaos --schedules 300` as it is run: on its
// defaults (SQLite, in-process S3, embedded NATS), built as a user builds
// it and run as a process of its own, so that the race detector of
// `go test -race` does not slow it tenfold (testkit/chaos/schedules runs
// schedules in-process under the race detector, against PostgreSQL and
// MinIO). It fails when a schedule breaks a rule, and checks the counts:
// stale writes attempted and refused, none accepted, no result lost or
// accepted twice, every fault kind injected.
func TestChaos300(t *testing.T) {
	schedules := "300"
	if testing.Short() {
		schedules = "60"
	}
	bin := testenv.Binary(t, "edgelab")
	start := time.Now()
	cmd := exec.Command(bin, "chaos", "--schedules", schedules, "--seed", "1", "--parallel", "12", "--show", "2")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	t.Logf("edgelab chaos --schedules %s took %s:\n%s", schedules, time.Since(start).Round(time.Second), tail(out.String(), 40))
	if err != nil {
		t.Errorf("edgelab chaos: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	counts := map[string]int{}
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		for i := 1; i < len(f); i++ {
			if n, err := strconv.Atoi(f[i]); err == nil {
				counts[strings.Join(f[:i], " ")] = n
				break
			}
		}
	}
	if counts["stale writes rejected"] == 0 {
		t.Error("no stale write was attempted and refused")
	}
	for _, k := range []string{"stale writes accepted", "results lost", "duplicate acceptances"} {
		if n, ok := counts[k]; !ok || n != 0 {
			t.Errorf("%s: %d (printed: %v), want 0", k, n, ok)
		}
	}
	if !testing.Short() {
		for _, k := range chaos.DefaultKinds(1) {
			if counts[string(k)] == 0 {
				t.Errorf("no %s fault injected", k)
			}
		}
	}
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}
