//go:build linux

package power

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/testkit/winetest"
)

// TestWindowsUnderWine runs this package's Windows tests
// (power_windows_test.go) under Wine: SetThreadExecutionState held on the
// inhibitor's own thread, and the callback registered with
// PowerRegisterSuspendResumeNotification handing off sleep and wake.
// Wine cannot make the PC sleep: the test calls the registered callback as
// Windows would.
func TestWindowsUnderWine(t *testing.T) {
	exe := winetest.BuildTest(t, "./agent/power")
	w := winetest.NewPrefix(t)
	out, errOut, code := w.Run(t, 2*time.Minute, w.Install(t, exe), "-test.v", "-test.run", "Windows$")
	t.Logf("under Wine:\n%s", out)
	if code != 0 || !strings.Contains(out, "--- PASS: TestExecutionStateWindows") || !strings.Contains(out, "--- PASS: TestPowerNoticesWindows") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
