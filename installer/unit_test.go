package installer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/systemd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

func defaultUnitOptions() UnitOptions {
	return UnitOptions{
		Executable: systemd.AgentBinary,
		ConfigPath: systemd.AgentConfig,
		User:       systemd.AgentUser,
	}
}

// TestRenderUnitDefaultsIsShippedUnit checks that rendering with the
// unit's own defaults gives systemd/edgeagent.service byte for byte, so
// `edgeagent install` and the package install the same unit.
func TestRenderUnitDefaultsIsShippedUnit(t *testing.T) {
	for _, opts := range []UnitOptions{
		defaultUnitOptions(),
		{Executable: systemd.AgentBinary, ConfigPath: systemd.AgentConfig, User: systemd.AgentUser,
			StateDir: systemd.AgentStateDir + "/", StopTimeout: StopTimeout},
	} {
		got, err := RenderUnit(opts)
		if err != nil {
			t.Fatal(err)
		}
		if got != systemd.AgentUnit {
			t.Errorf("RenderUnit(%+v) differs from systemd/edgeagent.service:\n%s", opts, got)
		}
	}
}

// unitLines returns the unit's settings as "Key=value" lines of each
// section, without comments.
func unitLines(unit string) map[string][]string {
	lines := map[string][]string{}
	section := ""
	for line := range strings.Lines(unit) {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		default:
			lines[section] = append(lines[section], line)
		}
	}
	return lines
}

func has(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

func withKey(lines []string, key string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, key+"=") {
			out = append(out, l)
		}
	}
	return out
}

// TestRenderUnit renders the unit for a config path with a space, another
// user, a binary and a state directory elsewhere and a longer drain, and
// checks ExecStart, the user, the directories, the stop timeout, and that
// every other setting (the hardening) is the shipped unit's.
func TestRenderUnit(t *testing.T) {
	unit, err := RenderUnit(UnitOptions{
		Executable:  "/opt/edgeagent/bin/edgeagent",
		ConfigPath:  "/srv/edge agent/agent.yaml",
		User:        "phoneops",
		StateDir:    "/srv/edge-state",
		StopTimeout: 75 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	got := unitLines(unit)["[Service]"]
	for _, want := range []string{
		`ExecStart=/opt/edgeagent/bin/edgeagent run -c "/srv/edge agent/agent.yaml"`,
		"User=phoneops",
		"SupplementaryGroups=plugdev",
		"StateDirectory=edgeagent",
		"ConfigurationDirectory=edgeagent",
		"Environment=HOME=/var/lib/edgeagent",
		"WorkingDirectory=/var/lib/edgeagent",
		"ReadWritePaths=/srv/edge-state",
		"TimeoutStopSec=75s",
	} {
		if !has(got, want) {
			t.Errorf("rendered unit lacks %q", want)
		}
	}
	for _, key := range []string{"ExecStart", "User", "TimeoutStopSec", "ReadWritePaths"} {
		if n := len(withKey(got, key)); n != 1 {
			t.Errorf("%d %s= lines, want 1", n, key)
		}
	}
	if g := withKey(got, "Group"); len(g) != 0 {
		t.Errorf("rendered unit for user phoneops keeps %v; the user's own group must apply", g)
	}
	// Everything else is the shipped unit's.
	changed := map[string]bool{"ExecStart": true, "User": true, "Group": true, "ReadWritePaths": true, "TimeoutStopSec": true}
	shipped := unitLines(systemd.AgentUnit)
	var rest, shippedRest []string
	for _, l := range got {
		if k, _, _ := strings.Cut(l, "="); !changed[k] {
			rest = append(rest, l)
		}
	}
	for _, l := range shipped["[Service]"] {
		if k, _, _ := strings.Cut(l, "="); !changed[k] {
			shippedRest = append(shippedRest, l)
		}
	}
	if strings.Join(rest, "\n") != strings.Join(shippedRest, "\n") {
		t.Errorf("rendered [Service] settings differ from the shipped unit's:\n%s\nwant:\n%s", strings.Join(rest, "\n"), strings.Join(shippedRest, "\n"))
	}
	for _, sec := range []string{"[Unit]", "[Install]"} {
		if strings.Join(unitLines(unit)[sec], "\n") != strings.Join(shipped[sec], "\n") {
			t.Errorf("%s differs from the shipped unit's", sec)
		}
	}
	// A shorter drain keeps the unit's timeout.
	short, err := RenderUnit(UnitOptions{Executable: "/usr/bin/edgeagent", ConfigPath: "/etc/edgeagent/a.yaml", User: "edgeagent", StopTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !has(unitLines(short)["[Service]"], "TimeoutStopSec=45s") || !has(unitLines(short)["[Service]"], "Group=edgeagent") {
		t.Errorf("default-user unit with a short drain:\n%s", short)
	}
}

// TestRenderUnitEscapes checks that specifiers and variables in paths are
// escaped and that quotes and backslashes are quoted.
func TestRenderUnitEscapes(t *testing.T) {
	unit, err := RenderUnit(UnitOptions{
		Executable: "/opt/100%/edgeagent",
		ConfigPath: `/etc/edgeagent/$HOME "x"\y.yaml`,
		User:       "edgeagent",
		StateDir:   "/srv/50%",
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := unitLines(unit)["[Service]"]
	for _, want := range []string{
		`ExecStart=/opt/100%%/edgeagent run -c "/etc/edgeagent/$$HOME \"x\"\\y.yaml"`,
		`ReadWritePaths=/srv/50%%`,
	} {
		if !has(lines, want) {
			t.Errorf("rendered unit lacks %s; has %v", want, withKey(lines, strings.Split(want, "=")[0]))
		}
	}
}

// TestRenderUnitRefuses checks the paths and users the unit cannot use.
func TestRenderUnitRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*UnitOptions)
		want   string
	}{
		{"binary in a home directory", func(o *UnitOptions) { o.Executable = "/home/ann/go/bin/edgeagent" }, "executable /home/ann/go/bin/edgeagent is under /home, which the service cannot see (ProtectHome=yes)"},
		{"config in /root", func(o *UnitOptions) { o.ConfigPath = "/root/agent.yaml" }, "config /root/agent.yaml is under /root"},
		{"binary in /tmp", func(o *UnitOptions) { o.Executable = "/tmp/edgeagent" }, "(PrivateTmp=yes)"},
		{"state in /var/tmp", func(o *UnitOptions) { o.StateDir = "/var/tmp/edge" }, "state directory /var/tmp/edge is under /var/tmp"},
		{"relative config", func(o *UnitOptions) { o.ConfigPath = "agent.yaml" }, `config "agent.yaml": must be an absolute path`},
		{"line break", func(o *UnitOptions) { o.ConfigPath = "/etc/a\nExecStartPre=/bin/sh" }, "contains a line break"},
		{"template action", func(o *UnitOptions) { o.ConfigPath = "/etc/{{Name}}.yaml" }, "contains {{"},
		{"bad user", func(o *UnitOptions) { o.User = "ann smith" }, `user "ann smith": not a valid user name`},
		{"no user", func(o *UnitOptions) { o.User = "" }, `user "": not a valid user name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := defaultUnitOptions()
			tc.modify(&opts)
			_, err := RenderUnit(opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("RenderUnit error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// systemdAnalyze returns the path of systemd-analyze, or skips the test
// (fails it in CI) when it is missing.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		testenv.Missing(t, "systemd-analyze (Debian package systemd)")
	}
	return p
}

// TestRenderedUnitVerifies runs systemd-analyze verify on the unit install
// would write for another user, config, state directory and drain. Its
// ExecStart names /usr/bin/true, which exists, since verify checks that
// the binary does.
func TestRenderedUnitVerifies(t *testing.T) {
	analyze := systemdAnalyze(t)
	unit, err := RenderUnit(UnitOptions{
		Executable:  "/usr/bin/true",
		ConfigPath:  "/srv/edge agent/agent.yaml",
		User:        "phoneops",
		StateDir:    "/srv/edge-state",
		StopTimeout: 75 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "edgeagent.service")
	if err := os.WriteFile(file, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", file).CombinedOutput()
	// verify exits 0 on settings it ignores, but says so.
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s\nunit:\n%s", err, out, unit)
	}
}
