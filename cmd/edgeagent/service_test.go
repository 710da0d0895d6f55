package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestServiceCommands checks that the service commands exist both as a
// group and, but for status, at the top level, where status stays the
// agent's own command.
func TestServiceCommands(t *testing.T) {
	a := newApp(&bytes.Buffer{}, &bytes.Buffer{}, nil)
	for _, name := range []string{
		"install", "uninstall", "start", "stop", "restart",
		"service install", "service uninstall", "service start", "service stop", "service restart", "service status",
	} {
		cmd, rest := a.cli.Find(strings.Fields(name))
		if cmd == nil || !slices.Contains(append([]string{cmd.Name}, cmd.Aliases...), name) || len(rest) != 0 {
			t.Errorf("no command %q", name)
		}
	}
	if cmd, _ := a.cli.Find([]string{"status"}); cmd == nil || cmd.Name != "status" {
		t.Error(`top-level "status" is not the agent's status page`)
	}
	code, out, _ := runCLI(t, "help", "service")
	if code != 0 || strings.Count(out, "\n  service ") != 6 {
		t.Errorf("help service: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "help", "install")
	for _, flag := range []string{"-config file", "-user account", "-dry-run"} {
		if code != 0 || !strings.Contains(out, flag) {
			t.Errorf("help install lacks %q:\n%s", flag, out)
		}
	}
}

// TestInstallOptions checks what install takes from the config: the state
// directory and the drain's length plus a margin, and the warnings for a
// missing or invalid config, which do not stop the install.
func TestInstallOptions(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(good, []byte(validConfig+"state_dir: /srv/edge-state\njobs:\n  shutdown_timeout: 60s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("agent_id: x\nbogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, user string
		wantState        string
		wantStop         time.Duration
		wantWarn         []string
	}{
		{"valid", good, "phoneops", "/srv/edge-state", 75 * time.Second, nil},
		{"missing", filepath.Join(dir, "none.yaml"), "", "", 0, []string{"none.yaml does not exist yet"}},
		{"invalid", bad, "", "", 0, []string{"will not start until these problems", `unknown field "bogus"`, "nats.url: required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			c := &installCommand{app: &app{stdout: &bytes.Buffer{}, stderr: &stderr}, configPath: tc.path, user: tc.user}
			opts := c.options()
			if opts.ConfigPath != tc.path || opts.User != tc.user || opts.StateDir != tc.wantState || opts.StopTimeout != tc.wantStop {
				t.Errorf("options = %+v", opts)
			}
			for _, w := range tc.wantWarn {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("warnings lack %q:\n%s", w, stderr.String())
				}
			}
			if tc.wantWarn == nil && stderr.Len() > 0 {
				t.Errorf("unexpected warnings:\n%s", stderr.String())
			}
		})
	}
}

// TestInstallDryRun runs install --dry-run. This test binary lives in a
// temporary directory, which the unit's PrivateTmp= hides from a service,
// so on Linux the dry run must refuse it; elsewhere it describes the
// service.
func TestInstallDryRun(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "install", "--dry-run", "--config", "/etc/edgeagent/config.yaml")
	hidden := strings.HasPrefix(exe, "/tmp/") || strings.HasPrefix(exe, "/var/tmp/") || strings.HasPrefix(exe, "/home/") || strings.HasPrefix(exe, "/root/")
	switch {
	case runtime.GOOS == "linux" && hidden:
		if code != 1 || !strings.Contains(errOut, "which the service cannot see") || out != "" {
			t.Errorf("dry run with a binary in %s: exit %d, stdout %q, stderr %q; want a refusal", filepath.Dir(exe), code, out, errOut)
		}
	case runtime.GOOS == "linux":
		if code != 0 || !strings.Contains(out, "\nExecStart="+exe+" run -c /etc/edgeagent/config.yaml\n") {
			t.Errorf("dry run: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	default:
		if code != 0 || !strings.Contains(out, "run -c") {
			t.Errorf("dry run: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	}
}

// TestServiceCommandsNeedSystemd checks that on a Linux machine that
// systemd does not manage (such as a container) the service commands fail
// with a clear message. Where systemd runs, the test is skipped: it must
// not touch the machine's services.
func TestServiceCommandsNeedSystemd(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		t.Skip("systemd runs this machine")
	}
	for _, args := range [][]string{{"service", "status"}, {"start"}, {"stop"}, {"uninstall"}} {
		code, out, errOut := runCLI(t, args...)
		if code != 1 || out != "" || !strings.Contains(errOut, "systemd is not running on this machine") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errOut)
		}
	}
}
