package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/labs3"
	"github.com/edgeagent/edgeagent/testkit/testenv"
	"github.com/edgeagent/edgeagent/uploader"
)

// startAgent runs the real agent core (package agent) as id, with one
// simulated phone sim-1 and an in-process S3, on the NATS server at url.
func startAgent(t *testing.T, url, id string) *agent.Agent {
	t.Helper()
	s3, err := labs3.Start(labs3.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s3.Close() })
	up, err := uploader.NewS3(s3.UploaderOptions())
	if err != nil {
		t.Fatal(err)
	}
	inv := capture.NewInventory()
	if err := inv.Add(capture.NewSimulated(capture.SimOptions{Serial: "sim-1", Model: "SimPhone", Tags: []string{"lab"}})); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, nats.Name("edgeagent "+id), nats.CustomInboxPrefix(protocol.InboxPrefix(id)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{
		AgentID: id, Version: "test", Conn: nc, Phones: agent.InventoryPhones(inv, t.TempDir(), capture.OpLogOptions{}),
		Store: up, Slots: 1, SafetyMargin: 500 * time.Millisecond, Log: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := a.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("agent %s: %v", id, err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait(); nc.Close() })
	return a
}

// TestAgentStatus asks a real agent for its status document with
// edgecoord agent status, as text and as JSON.
func TestAgentStatus(t *testing.T) {
	ns := testenv.NATS(t)
	srv := serve(t, ns.ClientURL(), fmt.Sprintf("  driver: sqlite\n  path: %s", filepath.Join(t.TempDir(), "jobs.db")))
	a := startAgent(t, ns.ClientURL(), "pc-real")
	testenv.Eventually(t, 10*time.Second, "pc-real online", func() bool {
		return strings.Contains(srv.mustCLI(t, "agent", "list"), "online")
	})

	out := srv.mustCLI(t, "agent", "status", "pc-real")
	for _, want := range []string{
		"edgeagent pc-real  boot " + a.Status().BootID + "  version test",
		"state:        running, 1 of 1 slots free",
		"coordinator:  cli-test accepted hello",
		"Phones (1)", "sim-1   device  SimPhone  lab   idle",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("agent status lacks %q:\n%s", want, out)
		}
	}

	var st protocol.AgentStatus
	if err := json.Unmarshal([]byte(srv.mustCLI(t, "agent", "status", "pc-real", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.AgentID != "pc-real" || st.BootID != a.Status().BootID || len(st.Phones) != 1 || st.Phones[0].Serial != "sim-1" || !st.Connection.HelloAccepted {
		t.Fatalf("agent status --json: %+v", st)
	}

	code, stdout, stderr := srv.cli(t, "agent", "status", "nobody")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "edgecoord: agent nobody did not answer") {
		t.Fatalf("status of an absent agent: exit %d, %q, %q", code, stdout, stderr)
	}
	if code, _, _ := srv.cli(t, "agent", "status"); code != 2 {
		t.Fatalf("status without an ID: exit %d", code)
	}
}

// TestShowGolden runs a job on a real agent and compares the text of
// job show and agent show with testdata/*.golden (go test -update
// rewrites them), times, boot ids and the platform normalised. The lease is long enough
// that the job ends before any renewal but the first, however slow the
// machine.
func TestShowGolden(t *testing.T) {
	ns := testenv.NATS(t)
	srv := serveTTL(t, ns.ClientURL(), fmt.Sprintf("  driver: sqlite\n  path: %s", filepath.Join(t.TempDir(), "jobs.db")), "5m")
	startAgent(t, ns.ClientURL(), "pc-gold")
	srv.mustCLI(t, "job", "submit", "-f", writeFile(t, "job.yaml", `id: golden-1
project: lab-survey
priority: 5
timeout: 10m
device:
  tags: [lab]
steps:
  - {op: launch, package: com.example.app}
  - {op: screenshot, name: home}
`))
	testenv.Eventually(t, 10*time.Second, "golden-1 to succeed", func() bool {
		var d struct{ Status string }
		_ = json.Unmarshal([]byte(srv.mustCLI(t, "job", "show", "golden-1", "--json")), &d)
		return d.Status == "SUCCEEDED"
	})
	testenv.Golden(t, "job_show.golden", normalize(srv.mustCLI(t, "job", "show", "golden-1")))
	testenv.Golden(t, "agent_show.golden", normalize(srv.mustCLI(t, "agent", "show", "pc-gold")))
}

var (
	timestamps = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`)
	bootIDs    = regexp.MustCompile(`\b[0-9a-f]{16}\b`)
	agos       = regexp.MustCompile(`\([0-9.]+[µm]?s ago\)`)
)

// normalize replaces what changes from run to run by text of the same
// width: times, boot ids, how long ago.
func normalize(s string) string {
	s = timestamps.ReplaceAllString(s, "2006-01-02T15:04:05.000Z")
	s = bootIDs.ReplaceAllString(s, "0123456789abcdef")
	// The platform the test binary was built for, the same on every machine.
	s = strings.ReplaceAll(s, "platform:"+runtime.GOOS+"/"+runtime.GOARCH, "platform:GOOS/GOARCH")
	return agos.ReplaceAllString(s, "(1ms ago)")
}
