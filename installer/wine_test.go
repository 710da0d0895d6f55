//go:build linux

package installer

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/testkit/gobuild"
	"github.com/edgeagent/edgeagent/testkit/winetest"
)

// buildWindows builds pkg for windows/amd64 once per test run and returns
// the binary's path (name, in a directory of its own).
func buildWindows(_, pkg, name string) (string, error) {
	return gobuild.Build(context.Background(), strings.TrimSuffix(name, ".exe"), gobuild.Options{
		Package: strings.TrimPrefix(pkg, "github.com/edgeagent/edgeagent/"),
		LDFlags: "-X main.version=v0.0.0-winetest",
		Env:     []string{"GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0"},
	})
}

// TestWine runs edgeagent.exe under Wine: version, config validate and
// install/status/uninstall with Wine's service control manager; then a
// stand-in service built on RunService is started and stopped through the
// service control manager, and its drain is waited for.
func TestWine(t *testing.T) {
	tools := winetest.Find(t)
	// Build while the prefix is created.
	type built struct {
		exe, standIn string
		err          error
	}
	builds := make(chan built, 1)
	go func() {
		var b built
		if b.exe, b.err = buildWindows(t.TempDir(), "github.com/edgeagent/edgeagent/cmd/edgeagent", "edgeagent.exe"); b.err == nil {
			b.standIn, b.err = buildWindows(t.TempDir(), "github.com/edgeagent/edgeagent/installer/internal/servicetest", "servicetest.exe")
		}
		builds <- b
	}()
	w := winetest.NewPrefixWith(t, tools)
	b := <-builds
	if b.err != nil {
		t.Fatal(b.err)
	}
	exe, standIn := w.Install(t, b.exe), w.Install(t, b.standIn)
	const timeout = 30 * time.Second

	t.Run("version", func(t *testing.T) {
		out, errOut, code := w.Run(t, timeout, exe, "version")
		if code != 0 || !strings.HasPrefix(out, "edgeagent v0.0.0-winetest (go") || !strings.Contains(out, "windows/amd64)") {
			t.Fatalf("edgeagent.exe version: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})

	t.Run("config validate", func(t *testing.T) {
		if err := os.WriteFile(w.Path(`edgeagent\good.yaml`), []byte("agent_id: home-pc-1\nnats:\n  url: nats://127.0.0.1:4222\nstorage:\n  mode: presigned\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(w.Path(`edgeagent\bad.yaml`), []byte("agent_id: home-pc-1\nbogus: 1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := w.Run(t, timeout, exe, "config", "validate", "-c", `C:\edgeagent\good.yaml`)
		if code != 0 || out != "ok\n" {
			t.Errorf("validate good config: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		out, errOut, code = w.Run(t, timeout, exe, "config", "validate", "-c", `C:\edgeagent\bad.yaml`)
		if code != 2 || !strings.Contains(errOut, `C:\edgeagent\bad.yaml:2:1: unknown field "bogus"`) || !strings.Contains(errOut, "nats.url: required") {
			t.Errorf("validate bad config: exit %d (want 2), stdout %q, stderr %q", code, out, errOut)
		}
	})

	t.Run("install status uninstall", func(t *testing.T) {
		status := func(want string) {
			t.Helper()
			out, errOut, code := w.Run(t, timeout, exe, "service", "status")
			if code != 0 || out != "service edgeagent: "+want+"\n" {
				t.Fatalf("service status: exit %d, stdout %q (want %q), stderr %q", code, out, want, errOut)
			}
		}
		status("not installed")
		out, errOut, code := w.Run(t, timeout, exe, "install", "--dry-run")
		for _, want := range []string{
			`command:   C:\edgeagent\edgeagent.exe run -c C:\ProgramData\edgeagent\config.yaml`,
			"account:   LocalSystem",
			"recovery:  restart after 5s, then 30s, then 1m0s",
			`log:       C:\ProgramData\edgeagent\logs\edgeagent.log`,
		} {
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("install --dry-run: exit %d, stdout lacks %q:\n%s\nstderr: %s", code, want, out, errOut)
			}
		}
		status("not installed")
		out, errOut, code = w.Run(t, timeout, exe, "install", "--config", `C:\ProgramData\edgeagent\config.yaml`)
		if code != 0 || !strings.Contains(out, "installed service edgeagent") {
			t.Fatalf("install: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		t.Logf("install warnings under Wine:\n%s", errOut)
		status("stopped")
		reg, _, _ := w.Run(t, timeout, "reg", "query", `HKLM\System\CurrentControlSet\Services\edgeagent`)
		for _, want := range []string{
			`ImagePath    REG_SZ    C:\edgeagent\edgeagent.exe run -c C:\ProgramData\edgeagent\config.yaml`,
			"Start    REG_DWORD    0x2",                 // automatic
			"PreshutdownTimeout    REG_DWORD    0xafc8", // 45s
			"ObjectName    REG_SZ    LocalSystem",
		} {
			if !strings.Contains(reg, want) {
				t.Errorf("service registry key lacks %q:\n%s", want, reg)
			}
		}
		if _, errOut, code := w.Run(t, timeout, exe, "install"); code != 1 || !strings.Contains(errOut, "already exists") {
			t.Errorf("second install: exit %d, stderr %q; want a failure saying the service exists", code, errOut)
		}
		if out, errOut, code := w.Run(t, timeout, exe, "service", "uninstall"); code != 0 || out != "removed service edgeagent\n" {
			t.Fatalf("uninstall: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		status("not installed")
		if _, errOut, code := w.Run(t, timeout, exe, "uninstall"); code != 1 || !strings.Contains(errOut, "service is not installed") {
			t.Errorf("second uninstall: exit %d, stderr %q", code, errOut)
		}
	})

	t.Run("service start drain stop", func(t *testing.T) {
		config := `C:\edgeagent\standin.yaml`
		events := w.Path(`edgeagent\standin.yaml.events`)
		do := func(args ...string) string {
			t.Helper()
			out, errOut, code := w.Run(t, timeout, standIn, args...)
			if code != 0 {
				t.Fatalf("servicetest %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errOut)
			}
			return strings.TrimSpace(out)
		}
		do("install", config)
		t.Cleanup(func() {
			// The next subtest installs a service of the same name: a
			// stand-in left behind would make its install fail.
			if out, errOut, code := w.Run(t, timeout, standIn, "uninstall"); code != 0 {
				t.Errorf("servicetest uninstall: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
		})

		start := time.Now()
		// Start returns once the service reports running; Wine gives up
		// on a start after 10s.
		do("start")
		if d := time.Since(start); d > 8*time.Second {
			t.Errorf("start took %s", d)
		}
		if st := do("status"); st != "running" {
			t.Fatalf("status after start = %q, want running", st)
		}
		if b, _ := os.ReadFile(events); string(b) != "started\n" {
			t.Fatalf("events after start = %q", b)
		}

		start = time.Now()
		do("stop") // waits until the service reports stopped
		if d := time.Since(start); d < 1400*time.Millisecond {
			t.Errorf("stop returned after %s, before the 1.5s drain ended", d)
		}
		if st := do("status"); st != "stopped" {
			t.Fatalf("status after stop = %q, want stopped", st)
		}
		if b, _ := os.ReadFile(events); string(b) != "started\ncancelled\ndrained\n" {
			t.Fatalf("events after stop = %q, want started, cancelled, drained", b)
		}
		log, err := os.ReadFile(w.Path(`ProgramData\edgeagent\logs\edgeagent.log`))
		if err != nil {
			t.Fatal(err)
		}
		var last int
		for _, want := range []string{"service started", "stand-in running", "service stop requested; draining", "stand-in drained", "service stopped"} {
			i := strings.Index(string(log[last:]), want)
			if i < 0 {
				t.Fatalf("service log lacks %q after byte %d:\n%s", want, last, log)
			}
			last += i
		}
	})

	t.Run("edgeagent service", func(t *testing.T) {
		main, err := os.ReadFile("../cmd/edgeagent/main.go")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(main), "serviceMain(") {
			t.Skip("cmd/edgeagent/main.go does not call serviceMain: edgeagent.exe cannot run as a service yet")
		}
		// Nothing listens on port 1: the agent keeps trying to reach its
		// coordinator until it is stopped. A simulated phone needs no adb.
		config := "agent_id: wine-pc\nnats:\n  url: nats://127.0.0.1:1\nstorage:\n  mode: direct\n" +
			"  endpoint: 127.0.0.1:1\n  secure: false\n  bucket: edge-artifacts\n  access_key: a\n  secret_key: s\n" +
			"devices:\n  - serial: sim-1\n    simulated: true\n"
		if err := os.MkdirAll(w.Path(`ProgramData\edgeagent`), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(w.Path(`ProgramData\edgeagent\config.yaml`), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		logFile := w.Path(`ProgramData\edgeagent\logs\edgeagent.log`)
		_ = os.Remove(logFile)
		do := func(args ...string) string {
			t.Helper()
			out, errOut, code := w.Run(t, timeout, exe, args...)
			if code != 0 {
				t.Fatalf("edgeagent.exe %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errOut)
			}
			return strings.TrimSpace(out)
		}
		do("install")
		t.Cleanup(func() { w.Run(t, timeout, exe, "uninstall") })
		do("start")
		deadline := time.Now().Add(30 * time.Second)
		for {
			log, _ := os.ReadFile(logFile)
			if strings.Contains(string(log), "starting edgeagent") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the agent did not start within 30s; log:\n%s", log)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if st := do("service", "status"); st != "service edgeagent: running" {
			t.Fatalf("status after start = %q", st)
		}
		do("stop")
		if st := do("service", "status"); st != "service edgeagent: stopped" {
			t.Fatalf("status after stop = %q", st)
		}
		log, _ := os.ReadFile(logFile)
		var last int
		for _, want := range []string{"service started", "starting edgeagent", "service stop requested; draining", "edgeagent stopped", "service stopped"} {
			i := strings.Index(string(log[last:]), want)
			if i < 0 {
				t.Fatalf("service log lacks %q after byte %d:\n%s", want, last, log)
			}
			last += i
		}
	})
}
