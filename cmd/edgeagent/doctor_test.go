package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// fakeADBServer answers host:version and host:devices-l like an adb server
// with the given device lines ("serial state key:value ...").
func fakeADBServer(t *testing.T, devices ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				n := make([]byte, 4)
				if _, err := io.ReadFull(r, n); err != nil {
					return
				}
				size, _ := strconv.ParseInt(string(n), 16, 32)
				req := make([]byte, size)
				if _, err := io.ReadFull(r, req); err != nil {
					return
				}
				var payload string
				switch string(req) {
				case "host:version":
					payload = "0029"
				case "host:devices-l":
					payload = strings.Join(devices, "\n") + "\n"
				default:
					fmt.Fprintf(c, "FAIL%04x%s", len("unknown"), "unknown")
					return
				}
				fmt.Fprintf(c, "OKAY%04x%s", len(payload), payload)
			}()
		}
	}()
	return l.Addr().String()
}

// docsOut appends a command's output to $EDGE_DOCS_OUT, for the operations
// guide.
func docsOut(t *testing.T, title, out string) {
	t.Logf("%s:\n%s", title, out)
	if path := os.Getenv("EDGE_DOCS_OUT"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fmt.Fprintf(f, "### %s\n\n```\n%s```\n\n", title, out)
	}
}

// TestStatusAndDoctor: edgeagent status renders the
// running agent's status document; edgeagent doctor passes on a working
// setup and, on a deliberately broken one, names every broken part with
// its fix and exits 1.
func TestStatusAndDoctor(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	l := newLab(t, 3*time.Second)
	state := filepath.Join(t.TempDir(), "state")
	p := l.env.StartAgent(e2e.AgentOptions{StateDir: state, ShutdownTimeout: 300 * time.Millisecond})
	cfg, statusAddr := p.Config, p.StatusAddr
	job := l.submit(t, screenshot, wait(60_000))
	l.leased(t, job)
	testenv.Eventually(t, 10*time.Second, "the job's wait step in the status document", func() bool {
		st, _, err := fetchStatus(t.Context(), statusAddr)
		return err == nil && len(st.Jobs) == 1 && strings.HasPrefix(st.Jobs[0].Current, "step 2") && !st.Connection.LastHeartbeat.IsZero()
	})

	code, out, errOut := runCLI(t, "status", "-c", cfg)
	if code != 0 {
		t.Fatalf("status: exit %d, %s", code, errOut)
	}
	docsOut(t, "edgeagent status", out)
	for _, want := range []string{"edgeagent pc-bin", "state:", "running, 0 of 1 slots free", "nats:", "connected to nats://",
		"coordinator:", "accepted hello", "Jobs (1)", job, "LEASE LEFT", "step 2 (wait)", "Phones (1)", "sim-1", "busy"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q", want)
		}
	}
	code, out, _ = runCLI(t, "status", "-json", "-addr", statusAddr)
	if code != 0 || !strings.Contains(out, `"job_id": "`+job+`"`) || !strings.Contains(out, `"lease_left_ms"`) {
		t.Errorf("status -json: exit %d\n%s", code, out)
	}

	// doctor on the working setup, with the agent running.
	code, out, _ = runCLI(t, "doctor", "-c", cfg)
	docsOut(t, "edgeagent doctor (working setup, agent running)", out)
	if code != 0 {
		t.Fatalf("doctor on a working setup: exit %d", code)
	}
	for _, want := range []string{"[ok  ] config", "[ok  ] state directory", "an agent runs on it", "[ok  ] nats", "[ok  ] coordinator",
		"[ok  ] clock", "[ok  ] storage", "conditional write", "[skip] adb", "[ok  ] phone sim-1", "[ok  ] spool disk", "[ok  ] status endpoint"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q", want)
		}
	}
	p.MustCleanShutdown(t)

	// doctor without a running agent sends a probe hello itself.
	code, out, _ = runCLI(t, "doctor", "-c", cfg)
	if code != 0 || !strings.Contains(out, "answered hello") || !strings.Contains(out, "[ok  ] clock") {
		t.Fatalf("doctor without an agent: exit %d\n%s", code, out)
	}

	// A broken setup: NATS on a closed port, a wrong storage secret, adb
	// missing, a real phone listed that the adb server reports as
	// unauthorized, another one not attached, and the status port taken.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	adb := fakeADBServer(t, "R58M123ABC unauthorized usb:1-1 transport_id:3", "emulator-5554 device product:sdk model:Pixel_7 device:emu transport_id:4")
	// The working config but for those parts.
	broken := func(adbAddr string) string {
		return l.env.NewAgent(e2e.AgentOptions{StateDir: state, ShutdownTimeout: 300 * time.Millisecond,
			Phones: []e2e.Phone{{Serial: "R58M123ABC"}, {Serial: "emulator-5554"}, {Serial: "0A1B2C3D"}},
			Extra: fmt.Sprintf("nats:\n  url: nats://%s\nstorage:\n  secret_key: wrong-secret\nstatus:\n  listen: %s\nadb:\n  address: %s\n  path: /nonexistent/adb\n",
				testenv.FreeAddr(t), busy.Addr(), adbAddr)}).Config
	}
	brokenPath := broken(adb)
	code, out, _ = runCLI(t, "doctor", "-c", brokenPath, "-timeout", "2s")
	docsOut(t, "edgeagent doctor (broken setup)", out)
	if code != 1 {
		t.Errorf("doctor on a broken setup: exit %d, want 1", code)
	}
	for _, want := range []string{
		"[FAIL] nats", "cannot connect to nats://127.0.0.1:", "connection refused", "fix: check nats.url",
		"[FAIL] storage", "credentials refused", "fix: check storage.access_key",
		"[ok  ] adb", "protocol version 41",
		"[FAIL] phone R58M123ABC", "unauthorized", "Allow USB debugging",
		"[ok  ] phone emulator-5554", "(Pixel 7)",
		"[FAIL] phone 0A1B2C3D", "not attached",
		"[FAIL] status endpoint", "choose a free loopback port",
		"check(s) failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("broken doctor output lacks %q", want)
		}
	}
	// Without an adb server, the missing binary is named.
	code, out, _ = runCLI(t, "doctor", "-c", broken(testenv.FreeAddr(t)), "-timeout", "2s")
	if code != 1 || !strings.Contains(out, "[FAIL] adb") || !strings.Contains(out, "install adb") {
		t.Errorf("doctor without adb: exit %d\n%s", code, out)
	}
	// An invalid config stops the checks at the config.
	code, out, _ = runCLI(t, "doctor", "-c", writeConfig(t, "agent_id: x\nbogus: 1\n"))
	if code != 1 || !strings.Contains(out, "[FAIL] config") || !strings.Contains(out, `unknown field "bogus"`) {
		t.Errorf("doctor with an invalid config: exit %d\n%s", code, out)
	}
}
