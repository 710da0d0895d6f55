package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestSubmitPlatformCLI: job submit refuses (exit 2) a device.platform
// that is neither android nor ios, and what an iPhone cannot do on a job
// for iPhones or pinned to a phone reported as an iPhone, naming the field
// and the iPhone; such a job without a platform is queued for Android
// phones. agent show prints each phone's platform.
func TestSubmitPlatformCLI(t *testing.T) {
	db := filepath.Join(t.TempDir(), "jobs.db")
	st, err := sqlitestore.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	const udid = "00008110-000A1B2C3D4E5F60"
	devs := []protocol.Device{
		{Serial: udid, State: protocol.DeviceReady, Platform: protocol.PlatformIOS, Model: "iPhone 15", Facts: &protocol.PhoneFacts{IOSVersion: "17.5.1"}},
		{Serial: "R5CT", State: protocol.DeviceReady, Model: "SM-G991B"},
	}
	if _, _, err := st.AgentHello(t.Context(), jobstore.AgentHello{AgentID: "pc-1", BootID: "b1", Devices: devs, Slots: 2}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, validConfig+fmt.Sprintf("store:\n  driver: sqlite\n  path: %s\n", db))

	for _, c := range []struct{ job, want string }{
		{"device: {platform: windows}\nsteps: [{op: screenshot}]\n", `device: platform: "windows" is not one of android, ios`},
		{"device: {platform: ios}\nlogcat: true\nsteps: [{op: screenshot}]\n", "logcat: an iPhone has no logcat (an iPhone cannot run it: device.platform is ios)"},
		{"device: {serial: " + udid + "}\nsteps: [{op: clear_data, package: com.example.shop}]\n",
			"steps[0].op clear_data: WebDriverAgent cannot clear an iOS app's data (an iPhone cannot run it: device.serial names an iPhone: " + udid + " of agent pc-1)"},
	} {
		code, out, stderr := runCLI(t, "job", "submit", "-c", cfg, "-f", writeFile(t, "job.yaml", c.job))
		if code != 2 || out != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("submit of\n%s: exit %d, %q %q; want exit 2 and %q", c.job, code, out, stderr, c.want)
		}
	}
	code, out, stderr := runCLI(t, "job", "submit", "-c", cfg, "-f", writeFile(t, "job.yaml", "id: logs\nlogcat: true\nsteps: [{op: screenshot}]\n"))
	if code != 0 || out != "job logs queued (platform=android)\n" {
		t.Errorf("submit of a job with logcat: exit %d, %q %q", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "agent", "show", "-c", cfg, "pc-1")
	for _, want := range []string{"  SERIAL                     STATE   PLATFORM  MODEL      TAGS  JOB\n",
		"  " + udid + "  device  ios       iPhone 15  -     -\n", "  R5CT                       device  android   SM-G991B   -     -\n",
		"  " + udid + " facts: iOS 17.5.1\n"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("agent show (exit %d, %s) lacks %q:\n%s", code, stderr, want, out)
		}
	}
}
