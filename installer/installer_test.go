package installer

import (
	"runtime"
	"strings"
	"testing"
)

func TestStatusString(t *testing.T) {
	for st, want := range map[Status]string{
		StatusUnknown: "unknown", StatusNotInstalled: "not installed", StatusStopped: "stopped", StatusRunning: "running",
	} {
		if st.String() != want {
			t.Errorf("Status(%d) = %q, want %q", int(st), st, want)
		}
	}
}

// TestDescribe checks that Describe shows, on Linux, the unit install would
// write, for the given binary, config and user, and needs a config path.
func TestDescribe(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the unit is Linux's")
	}
	got, err := Describe(Options{Executable: "/usr/local/bin/edgeagent", ConfigPath: "/etc/edgeagent/agent.yaml", User: "phoneops"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := RenderUnit(UnitOptions{Executable: "/usr/local/bin/edgeagent", ConfigPath: "/etc/edgeagent/agent.yaml", User: "phoneops", StopTimeout: StopTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if got != "# /etc/systemd/system/edgeagent.service\n"+want {
		t.Errorf("Describe:\n%s", got)
	}
	if _, err := Describe(Options{Executable: "/usr/local/bin/edgeagent"}); err == nil || !strings.Contains(err.Error(), "no config path") {
		t.Errorf("Describe without a config path: %v", err)
	}
	// The default user is the unit's.
	got, err = Describe(Options{Executable: "/usr/local/bin/edgeagent", ConfigPath: "/etc/edgeagent/config.yaml"})
	if err != nil || !strings.Contains(got, "\nUser=edgeagent\nGroup=edgeagent\n") {
		t.Errorf("Describe with the default user: %v\n%s", err, got)
	}
}
