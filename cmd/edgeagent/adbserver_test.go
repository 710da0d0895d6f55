package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// adbEnv is the environment of an adb command line of the test's own: its
// own HOME (keys) and TMPDIR (server log), the default port unless port
// is set.
func adbEnv(home string, port int) []string {
	env := []string{"HOME=" + home, "TMPDIR=" + home, "ANDROID_SDK_HOME=" + home, "PATH=" + os.Getenv("PATH")}
	if port != 0 {
		env = append(env, "ANDROID_ADB_SERVER_PORT="+strconv.Itoa(port))
	}
	return env
}

func runADB(t *testing.T, path string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("adb %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestOwnADBServerSurvivesKillServer: with
// adb.server_port the agent starts its own adb server (`adb -P PORT
// start-server`) and every adb call of the agent goes there. Another adb
// running `adb kill-server` against the default port 5037 kills the
// server there, not the agent's: the agent keeps its phones and a job
// succeeds. When the agent's own server dies anyway (`adb -P PORT
// kill-server`), the agent starts it again, connects its network phones
// again, and the next job succeeds too.
func TestOwnADBServerSurvivesKillServer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	adbPath, err := testenv.FindADB()
	if err != nil {
		testenv.Missing(t, "%v", err)
	}
	home := t.TempDir()
	_, portStr, _ := net.SplitHostPort(testenv.FreeAddr(t))
	port, _ := strconv.Atoi(portStr)
	own := adbEnv(home, port)
	t.Cleanup(func() {
		cmd := exec.Command(adbPath, "-P", strconv.Itoa(port), "kill-server")
		cmd.Env = own
		_ = cmd.Run()
	})
	var phones []fakePhone
	for range 2 {
		p, err := fakeadbd.Start(fakeadbd.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		phones = append(phones, fakePhone{Phone: p, tags: []string{"lab"}})
	}
	l := newLab(t, 3*time.Second)
	p := l.env.StartAgent(e2e.AgentOptions{Phones: devices(phones), Env: adbEnv(home, 0),
		Extra: "adb:\n  path: " + adbPath + "\n  server_port: " + strconv.Itoa(port) + "\n  keys_dir: " + home + "\n"})
	statusAddr := p.StatusAddr
	testenv.Eventually(t, 30*time.Second, "the agent's own adb server to answer", func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	for _, ph := range phones {
		runADB(t, adbPath, own, "connect", ph.Addr())
	}
	ready := func() bool {
		a, err := l.store.GetAgent(l.ctx, "pc-bin")
		if err != nil {
			return false
		}
		return len(protocol.ReadyDevices(a.Devices)) == len(phones)
	}
	testenv.Eventually(t, 30*time.Second, "both phones ready at the coordinator", ready)
	runJob := func(what string) {
		t.Helper()
		id := l.submitSpec(t, jobstore.JobSpec{MaxAttempts: 1, Task: protocol.Task{
			Device: protocol.DeviceSelector{Tags: []string{"lab"}}, Steps: []protocol.Step{screenshot},
		}})
		if j := l.ended(t, id, 60*time.Second); j.Status != jobstore.StatusSucceeded {
			t.Fatalf("job %s: %s (%s), want SUCCEEDED", what, j.Status, j.FailReason)
		}
	}
	runJob("before kill-server")

	// Another adb (Android Studio, scrcpy) on the default port, then its
	// `adb kill-server`.
	other := adbEnv(t.TempDir(), 0)
	runADB(t, adbPath, other, "start-server")
	runADB(t, adbPath, other, "kill-server")
	testenv.Eventually(t, 20*time.Second, "the server on the default port 5037 to be gone", func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:5037")
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	out := runADB(t, adbPath, own, "devices")
	for _, ph := range phones {
		if !strings.Contains(out, ph.Serial()+"\tdevice") {
			t.Errorf("the agent's own server lost %s after kill-server on 5037:\n%s", ph.Serial(), out)
		}
	}
	if !ready() {
		t.Error("the coordinator no longer lists both phones ready after kill-server on 5037")
	}
	runJob("after kill-server on the default port")
	if n := len(p.Entries("own adb server restarted")); n != 0 {
		t.Errorf("the agent restarted its own server %d times after a kill-server on another port", n)
	}

	// The agent's own server dies: the agent starts it again and
	// connects its network phones again.
	runADB(t, adbPath, own, "kill-server")
	testenv.Eventually(t, 30*time.Second, "the agent to restart its own adb server", func() bool {
		return len(p.Entries("own adb server restarted")) > 0
	})
	// The agent lists both phones ready again, and so does the
	// coordinator once it has heard of it (its list may lag a heartbeat).
	testenv.Eventually(t, 30*time.Second, "both phones ready again at the agent", func() bool {
		resp, err := http.Get("http://" + statusAddr + "/status")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var st protocol.AgentStatus
		if json.NewDecoder(resp.Body).Decode(&st) != nil {
			return false
		}
		n := 0
		for _, ph := range st.Phones {
			if ph.Ready() {
				n++
			}
		}
		return n == len(phones)
	})
	testenv.Eventually(t, 30*time.Second, "both phones ready again at the coordinator", ready)
	runJob("after the agent's own server was restarted")
	if e := p.Entries("own adb server running"); len(e) != 1 || e[0]["keys_dir"] != true {
		t.Errorf("own adb server running log lines %v, want one with keys_dir true", e)
	}
	// ADB_VENDOR_KEYS reached the server the agent started.
	if env, err := serverEnv(port); err != nil {
		t.Errorf("read the environment of the adb server on port %d: %v", port, err)
	} else if !strings.Contains(env, "ADB_VENDOR_KEYS="+home+"\n") {
		t.Errorf("the restarted adb server's environment lacks ADB_VENDOR_KEYS=%s", home)
	}
	// The phones dropped with the server, not with a hub: no hub event
	// once the hub window after the restart has passed.
	restarted, err := time.Parse(time.RFC3339Nano, fmt.Sprint(p.Entries("own adb server restarted")[0]["time"]))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the hub window after the restart to pass", func() bool {
		return time.Since(restarted) > 2*agent.HubWindow
	})
	if e := p.Entries("hub drop: several phones dropped at once (USB hub or its power?)"); len(e) != 0 {
		t.Errorf("the server's death was reported as a hub drop: %v", e)
	}
	if v := scrapeMetric(t, statusAddr, "edgeagent_hub_drops_total", ""); v != 0 {
		t.Errorf("edgeagent_hub_drops_total = %v, want 0", v)
	}
	p.MustCleanShutdown(t)
}

// serverEnv returns the environment of the adb server listening on port
// (Linux /proc), or an error where it cannot be read.
func serverEnv(port int) (string, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return "", err
	}
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && strings.HasSuffix(args[0], "adb") && strings.Contains(string(b), "fork-server") && strings.Contains(string(b), "tcp:"+strconv.Itoa(port)) {
			env, err := os.ReadFile(filepath.Join(filepath.Dir(f), "environ"))
			if err != nil {
				return "", err
			}
			return strings.ReplaceAll(string(env), "\x00", "\n"), nil
		}
	}
	return "", os.ErrNotExist
}
