package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestMain keeps one throwaway PostgreSQL cluster for the whole binary.
func TestMain(m *testing.M) { testenv.Main(m) }

// served is an edgecoord serve process run in the test.
type served struct {
	config  string // config file path
	metrics string // host:port of /metrics, /healthz, /readyz
	stop    func() (code int, stderr string)
}

// serve writes a config for store (a YAML store section) and runs
// "edgecoord serve" with it until stop or the end of the test, once
// /readyz says it is ready.
func serve(t *testing.T, natsURL, store string) *served {
	t.Helper()
	return serveTTL(t, natsURL, store, "3s")
}

// serveTTL is serve with leases of ttl.
func serveTTL(t *testing.T, natsURL, store, ttl string) *served {
	t.Helper()
	s := &served{metrics: testenv.FreeAddr(t)}
	s.config = writeConfig(t, fmt.Sprintf(`coordinator_id: cli-test
log:
  level: warn
nats:
  url: %s
  request_timeout: 2s
store:
%s
lease:
  ttl: %s
  reap_interval: 200ms
scheduler:
  interval: 50ms
agents:
  heartbeat: 200ms
  offline_after: 1s
metrics:
  listen: %s
`, natsURL, store, ttl, s.metrics))
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg     sync.WaitGroup
		code   int
		stderr testenv.LockedBuffer
	)
	wg.Go(func() {
		code = exitCode(run(ctx, []string{"serve", "-c", s.config}, io.Discard, &stderr))
	})
	var once sync.Once
	s.stop = func() (int, string) {
		once.Do(func() { cancel(); wg.Wait() })
		return code, stderr.String()
	}
	t.Cleanup(func() {
		if code, errOut := s.stop(); code != 0 {
			t.Errorf("edgecoord serve exited %d: %s", code, errOut)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + s.metrics + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			_, errOut := s.stop()
			t.Fatalf("edgecoord serve not ready: %v; stderr: %s", err, errOut)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

// cli runs one edgecoord command with the config of s.
func (s *served) cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCLI(t, append(args, "-c", s.config)...)
}

// mustCLI runs a command that must succeed and returns its output.
func (s *served) mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := s.cli(t, args...)
	if code != 0 {
		t.Fatalf("edgecoord %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
	}
	if testing.Verbose() {
		t.Logf("$ edgecoord %s\n%s", strings.Join(args, " "), stdout)
	}
	return stdout
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestManagementCommands runs every management command against a running
// coordinator (edgecoord serve on SQLite) with a protocol-speaking agent.
func TestManagementCommands(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	dir := t.TempDir()
	srv := serve(t, ns.ClientURL(), fmt.Sprintf("  driver: sqlite\n  path: %s", filepath.Join(dir, "jobs.db")))

	var hold atomic.Bool
	hold.Store(true)
	agent := coordtest.Start(t, coordtest.Options{
		ID: "pc-a", URL: ns.ClientURL(), Devices: []protocol.Device{{Serial: "P1", State: "device", Model: "Pixel 7", Tags: []string{"eu"}}},
		Behavior: func(fencing.Token) coordtest.Behavior {
			if hold.Load() {
				return coordtest.Hold
			}
			return coordtest.Finish
		},
		CheckSettings: func(m map[string]string) error {
			for k := range m {
				if k == "bogus" {
					return fmt.Errorf("unknown setting %q", k)
				}
			}
			return nil
		},
	})
	hasControl := func(cmd string) func() bool {
		return func() bool {
			return slices.ContainsFunc(agent.Controls(), func(c protocol.Control) bool { return c.Command == cmd })
		}
	}

	t.Run("serve", func(t *testing.T) {
		resp, err := http.Get("http://" + srv.metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{"stale_token_rejected_total", "commits_accepted_total", `jobs{state="QUEUED"}`, "agents_online 1"} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics of edgecoord serve lacks %q", want)
			}
		}
	})

	t.Run("migrate", func(t *testing.T) {
		if out := srv.mustCLI(t, "migrate"); !regexp.MustCompile(`^sqlite store at schema version [1-9][0-9]*: already up to date\n$`).MatchString(out) {
			t.Fatalf("migrate: %q", out)
		}
	})

	t.Run("job submit", func(t *testing.T) {
		job := writeFile(t, "job.yaml", `id: job-1
device:
  tags: [eu]
steps:
  - op: launch
    package: com.example.app
  - op: screenshot
    name: home.png
`)
		if out := srv.mustCLI(t, "job", "submit", "-f", job); out != "job job-1 queued (tags=eu)\n" {
			t.Fatalf("submit: %q", out)
		}
		testenv.Eventually(t, 10*time.Second, "job-1 at pc-a", func() bool { return len(agent.Assigns()) == 1 })

		waiting := writeFile(t, "waiting.json", `{"device": {"serial": "nowhere"}, "steps": [{"op": "screenshot"}]}`)
		var v struct {
			ID, Status string
		}
		if err := json.Unmarshal([]byte(srv.mustCLI(t, "job", "submit", "-f", waiting, "--json")), &v); err != nil || v.ID == "" || v.Status != "QUEUED" {
			t.Fatalf("submit --json: %+v, %v", v, err)
		}

		bad := writeFile(t, "bad.yaml", "steps:\n  - op: screenshot\n    nmae: x.png\n")
		code, _, stderr := srv.cli(t, "job", "submit", "-f", bad)
		if code != 2 || !strings.Contains(stderr, "[3:5]") || !strings.Contains(stderr, "nmae") {
			t.Fatalf("submit of an unknown field: exit %d, %q", code, stderr)
		}
		code, _, stderr = srv.cli(t, "job", "submit", "-f", writeFile(t, "empty.yaml", "device: {}\n"))
		if code != 2 || !strings.Contains(stderr, "task has no steps") {
			t.Fatalf("submit without steps: exit %d, %q", code, stderr)
		}
		code, _, stderr = srv.cli(t, "job", "submit", "-f", job)
		if code != 1 || !strings.Contains(stderr, "id in use") {
			t.Fatalf("submit of a duplicate id: exit %d, %q", code, stderr)
		}
		// What no phone could run is refused before it is stored.
		code, _, stderr = srv.cli(t, "job", "submit", "-f", writeFile(t, "control.yaml", "steps:\n  - op: text\n    text: \"grüße\\tnext\"\n"))
		if code != 2 || !strings.Contains(stderr, "steps[0]") || !strings.Contains(stderr, "is not printable") {
			t.Fatalf("submit of text with a tab: exit %d, %q", code, stderr)
		}
		code, _, stderr = srv.cli(t, "job", "submit", "-f", writeFile(t, "interactive.yaml", "interactive: true\nsteps: [{op: screenshot}]\n"))
		if code != 2 || !strings.Contains(stderr, "interactive jobs cannot be submitted") {
			t.Fatalf("submit of an interactive job: exit %d, %q", code, stderr)
		}
		// A job id is one key element and one subject token, at most 64
		// characters (docs/protocol.md section 2), in the file or -id.
		for _, bad := range []string{"victim/g1", "..", "a b", strings.Repeat("x", 65)} {
			code, _, stderr = srv.cli(t, "job", "submit", "-f", writeFile(t, "badid.json", fmt.Sprintf(`{"id": %q, "steps": [{"op": "screenshot"}]}`, bad)))
			if code != 2 || !strings.Contains(stderr, "id: invalid job id") {
				t.Errorf("submit with id %q in the file: exit %d, %q", bad, code, stderr)
			}
			code, _, stderr = srv.cli(t, "job", "submit", "-f", waiting, "-id", bad)
			if code != 2 || !strings.Contains(stderr, "id: invalid job id") {
				t.Errorf("submit with -id %q: exit %d, %q", bad, code, stderr)
			}
		}
	})

	t.Run("job list", func(t *testing.T) {
		out := srv.mustCLI(t, "job", "list")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], "job-1") ||
			!strings.Contains(lines[1], "IN_PROGRESS") || !strings.Contains(lines[1], agent.Owner()) || !strings.Contains(lines[1], "P1") ||
			!strings.Contains(lines[2], "QUEUED") || !strings.Contains(lines[2], "waiting for phone serial=nowhere") {
			t.Fatalf("job list:\n%s", out)
		}
		var jobs []struct {
			ID, Status, Waiting, Owner, Device string
		}
		if err := json.Unmarshal([]byte(srv.mustCLI(t, "job", "list", "--json", "--status", "queued")), &jobs); err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 || jobs[0].Status != "QUEUED" || jobs[0].Waiting != "waiting for phone serial=nowhere" {
			t.Fatalf("job list --json --status queued: %+v", jobs)
		}
		if out := srv.mustCLI(t, "job", "list", "--agent", "pc-a"); strings.Count(out, "\n") != 2 {
			t.Fatalf("job list --agent pc-a:\n%s", out)
		}
		if code, _, stderr := srv.cli(t, "job", "list", "--status", "done"); code != 2 || !strings.Contains(stderr, `unknown status "done"`) {
			t.Fatalf("bad status: %d %q", code, stderr)
		}
	})

	t.Run("job show", func(t *testing.T) {
		testenv.Eventually(t, 10*time.Second, "a renewal of job-1", func() bool {
			return slices.ContainsFunc(agent.Outcomes(), func(o coordtest.Outcome) bool { return o.Verb == protocol.VerbRenew && o.Err == nil })
		})
		out := srv.mustCLI(t, "job", "show", "job-1")
		for _, want := range []string{"Job job-1", "IN_PROGRESS", "Generations:", "claim", "Write events:", "renew", agent.Owner(), "P1 (selector: tags=eu)"} {
			if !strings.Contains(out, want) {
				t.Errorf("job show lacks %q:\n%s", want, out)
			}
		}
		var d struct {
			Status      string
			Generations []struct {
				Generation int64
				Owner      string
				GrantedBy  string `json:"granted_by"`
			}
			Events []struct {
				Verb     string
				Owner    string
				Accepted bool
			} `json:"write_events"`
		}
		if err := json.Unmarshal([]byte(srv.mustCLI(t, "job", "show", "--json", "job-1")), &d); err != nil {
			t.Fatal(err)
		}
		if d.Status != "IN_PROGRESS" || len(d.Generations) != 1 || d.Generations[0].Owner != agent.Owner() ||
			d.Generations[0].GrantedBy != "claim" || len(d.Events) < 2 || d.Events[0].Verb != "claim" {
			t.Fatalf("job show --json: %+v", d)
		}
		if code, _, stderr := srv.cli(t, "job", "show", "nope"); code != 1 || !strings.Contains(stderr, "job not found") {
			t.Fatalf("show of an unknown job: %d %q", code, stderr)
		}
		if code, _, _ := srv.cli(t, "job", "show"); code != 2 {
			t.Fatalf("show without an id: exit %d", code)
		}
	})

	t.Run("job cancel", func(t *testing.T) {
		tok := agent.Assigns()[0]
		out := srv.mustCLI(t, "job", "cancel", "job-1", "--reason", "test over")
		if out != fmt.Sprintf("job job-1 cancelled; revoked %s\n", tok) {
			t.Fatalf("cancel: %q", out)
		}
		testenv.Eventually(t, 10*time.Second, "the revoke at pc-a", func() bool {
			return slices.ContainsFunc(agent.Revokes(), func(r protocol.Revoke) bool { return r.Token == tok })
		})
		var d struct {
			Status     string
			FailReason string `json:"fail_reason"`
		}
		if err := json.Unmarshal([]byte(srv.mustCLI(t, "job", "show", "job-1", "--json")), &d); err != nil || d.Status != "CANCELLED" || d.FailReason != "test over" {
			t.Fatalf("cancelled job: %+v, %v", d, err)
		}
		if code, _, stderr := srv.cli(t, "job", "cancel", "job-1"); code != 1 || !strings.Contains(stderr, "already finished") {
			t.Fatalf("second cancel: %d %q", code, stderr)
		}
	})

	t.Run("agent list", func(t *testing.T) {
		out := srv.mustCLI(t, "agent", "list")
		if !strings.Contains(out, "pc-a") || !strings.Contains(out, "online") || !strings.Contains(out, "1/1 usable") {
			t.Fatalf("agent list:\n%s", out)
		}
		var agents []struct {
			ID, State, Owner string
		}
		if err := json.Unmarshal([]byte(srv.mustCLI(t, "agent", "list", "--json")), &agents); err != nil ||
			len(agents) != 1 || agents[0].State != "online" || agents[0].Owner != agent.Owner() {
			t.Fatalf("agent list --json: %+v, %v", agents, err)
		}
	})

	t.Run("agent show", func(t *testing.T) {
		out := srv.mustCLI(t, "agent", "show", "pc-a")
		for _, want := range []string{"Agent pc-a", "online", "Phones:", "P1", "Pixel 7", "eu", "Settings:"} {
			if !strings.Contains(out, want) {
				t.Errorf("agent show lacks %q:\n%s", want, out)
			}
		}
		var v struct {
			Devices []struct{ Serial, State string }
		}
		if err := json.Unmarshal([]byte(srv.mustCLI(t, "agent", "show", "pc-a", "--json")), &v); err != nil || len(v.Devices) != 1 || v.Devices[0].Serial != "P1" {
			t.Fatalf("agent show --json: %+v, %v", v, err)
		}
		if code, _, stderr := srv.cli(t, "agent", "show", "nobody"); code != 1 || !strings.Contains(stderr, "agent not found") {
			t.Fatalf("show of an unknown agent: %d %q", code, stderr)
		}
	})

	t.Run("agent drain and resume", func(t *testing.T) {
		hold.Store(false)
		if out := srv.mustCLI(t, "agent", "drain", "pc-a"); out != "agent pc-a draining\n" {
			t.Fatalf("drain: %q", out)
		}
		testenv.Eventually(t, 10*time.Second, "drain at pc-a", hasControl(protocol.ControlDrain))
		job := writeFile(t, "job3.yaml", "id: job-3\nsteps: [{op: screenshot}]\n")
		srv.mustCLI(t, "job", "submit", "-f", job)
		time.Sleep(300 * time.Millisecond) // several scheduler rounds
		out := srv.mustCLI(t, "job", "list", "--status", "queued")
		if !strings.Contains(out, "job-3") || !strings.Contains(out, "draining") {
			t.Fatalf("job of a drained agent:\n%s", out)
		}
		if out := srv.mustCLI(t, "agent", "show", "pc-a"); !strings.Contains(out, "draining") || !strings.Contains(out, "yes") {
			t.Fatalf("agent show of a drained agent:\n%s", out)
		}
		if out := srv.mustCLI(t, "agent", "resume", "pc-a"); out != "agent pc-a resumed\n" {
			t.Fatalf("resume: %q", out)
		}
		testenv.Eventually(t, 10*time.Second, "resume at pc-a", hasControl(protocol.ControlResume))
		testenv.Eventually(t, 10*time.Second, "job-3 to finish", func() bool {
			var d struct{ Status string }
			_ = json.Unmarshal([]byte(srv.mustCLI(t, "job", "show", "job-3", "--json")), &d)
			return d.Status == "SUCCEEDED"
		})
		if code, _, stderr := srv.cli(t, "agent", "drain", "nobody"); code != 1 || !strings.Contains(stderr, "agent not found") {
			t.Fatalf("drain of an unknown agent: %d %q", code, stderr)
		}
	})

	t.Run("agent config", func(t *testing.T) {
		if out := srv.mustCLI(t, "agent", "config", "pc-a", "log_level=debug", "concurrency=2"); out != "concurrency=2\nlog_level=debug\n" {
			t.Fatalf("config: %q", out)
		}
		testenv.Eventually(t, 10*time.Second, "config at pc-a", func() bool { return agent.Settings()["log_level"] == "debug" })
		if out := srv.mustCLI(t, "agent", "config", "pc-a", "concurrency="); out != "log_level=debug\n" {
			t.Fatalf("config removing a key: %q", out)
		}
		testenv.Eventually(t, 10*time.Second, "removal at pc-a", func() bool { _, ok := agent.Settings()["concurrency"]; return !ok })
		code, _, stderr := srv.cli(t, "agent", "config", "pc-a", "bogus=1")
		if code != 1 || !strings.Contains(stderr, `refused the settings: unknown setting "bogus"`) {
			t.Fatalf("refused config: %d %q", code, stderr)
		}
		var settings map[string]string
		if err := json.Unmarshal([]byte(srv.mustCLI(t, "agent", "config", "pc-a", "--json")), &settings); err != nil ||
			len(settings) != 1 || settings["log_level"] != "debug" {
			t.Fatalf("config --json: %v, %v", settings, err)
		}
		// Kept for the next hello: a restarted agent gets them.
		if err := agent.Restart(); err != nil {
			t.Fatal(err)
		}
		if got := agent.HelloReply().Settings; len(got) != 1 || got["log_level"] != "debug" {
			t.Fatalf("hello reply settings %v", got)
		}
		// An agent that is not connected gets them at its first hello.
		code, stdout, stderr := srv.cli(t, "agent", "config", "pc-new", "log_level=info")
		if code != 0 || stdout != "log_level=info\n" || !strings.Contains(stderr, "next hello") {
			t.Fatalf("config of an absent agent: %d %q %q", code, stdout, stderr)
		}
		later := coordtest.Start(t, coordtest.Options{ID: "pc-new", URL: ns.ClientURL()})
		if got := later.HelloReply().Settings; got["log_level"] != "info" {
			t.Fatalf("first hello settings %v", got)
		}
		if code, _, _ := srv.cli(t, "agent", "config", "pc-a", "novalue"); code != 2 {
			t.Fatalf("config with a malformed pair: exit %d", code)
		}
	})

	t.Run("help", func(t *testing.T) {
		code, stdout, _ := runCLI(t, "help", "job")
		for _, want := range []string{"job submit", "job list", "job show", "job cancel"} {
			if code != 0 || !strings.Contains(stdout, want) {
				t.Errorf("help job lacks %q:\n%s", want, stdout)
			}
		}
		code, stdout, _ = runCLI(t, "help", "agent", "config")
		if code != 0 || !strings.Contains(stdout, "Usage: edgecoord agent config [flags] ID [key=value ...]") {
			t.Errorf("help agent config:\n%s", stdout)
		}
	})
}

// TestServeOnPostgres runs migrate and serve against PostgreSQL, and the
// management commands against a coordinator that another process serves.
func TestServeOnPostgres(t *testing.T) {
	ns := testenv.NATS(t)
	dsn := testenv.Postgres(t)
	storeYAML := "  driver: postgres\n  dsn: " + dsn
	path := writeConfig(t, fmt.Sprintf("coordinator_id: pg\nnats:\n  url: %s\nstore:\n%s\nmetrics:\n  listen: \"\"\n", ns.ClientURL(), storeYAML))
	if code, out, stderr := runCLI(t, "migrate", "-c", path); code != 0 || !regexp.MustCompile(`^postgres store at schema version [1-9][0-9]*: migrated\n$`).MatchString(out) {
		t.Fatalf("migrate: %d %q %q", code, out, stderr)
	}
	srv := serve(t, ns.ClientURL(), storeYAML)
	a := coordtest.Start(t, coordtest.Options{ID: "pc-a", URL: ns.ClientURL(), Devices: []protocol.Device{{Serial: "P1", State: "device"}}})
	srv.mustCLI(t, "job", "submit", "-f", writeFile(t, "j.yaml", "id: pg-job\nsteps: [{op: screenshot}]\n"))
	st, err := pgstore.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testenv.Eventually(t, 10*time.Second, "pg-job to finish", func() bool {
		j, err := st.Get(context.Background(), "pg-job")
		return err == nil && j.Status == jobstore.StatusSucceeded && j.CompletedBy == a.Owner()
	})
	if out := srv.mustCLI(t, "job", "show", "pg-job"); !strings.Contains(out, "SUCCEEDED") || !strings.Contains(out, "result") {
		t.Fatalf("job show:\n%s", out)
	}
}
