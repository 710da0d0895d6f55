//go:build linux

package selfupdate

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/testkit/winetest"
)

// TestWindowsUnderWine runs this package's Windows tests under Wine: the
// running .exe is swapped for a new one and rolled back.
func TestWindowsUnderWine(t *testing.T) {
	tools := winetest.Find(t)
	exe := winetest.BuildTest(t, "./agent/selfupdate")
	w := winetest.NewPrefixWith(t, tools)
	out, errOut, code := w.Run(t, 2*time.Minute, w.Install(t, exe), "-test.v", "-test.run", "Windows$")
	t.Logf("under Wine:\n%s", out)
	if code != 0 || !strings.Contains(out, "--- PASS: TestSwapRunningWindows") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
