package installer

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestInstallScriptRecovery checks that windows/install.ps1 sets the same
// recovery actions as edgeagent.exe install.
func TestInstallScriptRecovery(t *testing.T) {
	script, err := os.ReadFile("../windows/install.ps1")
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, d := range RecoveryDelays {
		actions = append(actions, fmt.Sprintf("restart/%d", d/time.Millisecond))
	}
	want := fmt.Sprintf("$RecoveryActions = '%s'", strings.Join(actions, "/"))
	if !strings.Contains(string(script), want) {
		t.Errorf("install.ps1 lacks %s", want)
	}
	m := regexp.MustCompile(`\$RecoveryReset = (\d+)`).FindSubmatch(script)
	if m == nil || string(m[1]) != fmt.Sprint(int(RecoveryResetPeriod/time.Second)) {
		t.Errorf("install.ps1 resets the failure count after %s seconds, want %d", m, int(RecoveryResetPeriod/time.Second))
	}
	for _, want := range []string{
		"sc.exe @('failure', $Name, 'reset=', \"$RecoveryReset\", 'actions=', $RecoveryActions)",
		"sc.exe @('failureflag', $Name, '1')",
		"$installArgs = @('install', '--config', $Config)",
	} {
		if !strings.Contains(string(script), want) {
			t.Errorf("install.ps1 lacks %s", want)
		}
	}
}
