package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/testkit/fakewda"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestDoctorIPhones: doctor checks each iPhone of the config through its
// WebDriverAgent: one that answers is ok with its model and iOS version;
// one whose screen is locked is a warning with the unlock fix; one whose
// WDA is gone fails with the fix to start WDA. A config of only iPhones
// needs no adb, so the adb check is skipped.
func TestDoctorIPhones(t *testing.T) {
	t.Parallel()
	start := func(o fakewda.Options) *fakewda.Phone {
		p, err := fakewda.Start(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	up := start(fakewda.Options{UDID: "00008110-00000000000000A1", Model: "iPhone 14", IOSVersion: "17.4"})
	locked := start(fakewda.Options{UDID: "00008110-00000000000000B2", Passcode: true})
	locked.SetLocked(true)
	gone := start(fakewda.Options{UDID: "00008110-00000000000000C3"})
	gone.Drop()
	cfg := writeConfig(t, fmt.Sprintf(`agent_id: pc-bin
state_dir: %s/state
nats:
  url: nats://%s
storage:
  endpoint: 127.0.0.1:9
  bucket: artifacts
  access_key: a
  secret_key: s
devices:
  - {platform: ios, udid: %s, wda_url: %s}
  - {platform: ios, udid: %s, wda_url: %s}
  - {platform: ios, udid: %s, wda_url: %s}
status:
  listen: %s
`, t.TempDir(), testenv.FreeAddr(t), up.UDID(), up.URL(), locked.UDID(), locked.URL(), gone.UDID(), gone.URL(), testenv.FreeAddr(t)))
	code, out, _ := runCLI(t, "doctor", "-c", cfg, "-timeout", "2s")
	t.Log(out)
	if code != 1 {
		t.Errorf("doctor with an iPhone down: exit %d, want 1", code)
	}
	lines := map[string]string{}
	var cur string
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, "] iphone "); i >= 0 {
			cur = strings.Fields(l[i+2:])[1]
			lines[cur] = l
		} else if cur != "" && strings.HasPrefix(strings.TrimSpace(l), "fix:") {
			lines[cur] += "\n" + l
			cur = ""
		}
	}
	for udid, want := range map[string][]string{
		up.UDID():     {"[ok  ]", "answers (iPhone 14, iOS 17.4), unlocked"},
		locked.UDID(): {"[warn]", "the screen is locked", "fix: it is locked with a passcode", "Auto-Lock to Never"},
		gone.UDID():   {"[FAIL]", "offline: ", "not running", "fix: WebDriverAgent on it does not answer", "ios runwda --udid " + gone.UDID()},
	} {
		for _, w := range want {
			if !strings.Contains(lines[udid], w) {
				t.Errorf("doctor's line of iPhone %s lacks %q: %q", udid, w, lines[udid])
			}
		}
	}
	if !strings.Contains(out, "[skip] adb                  no Android phone is configured") {
		t.Errorf("doctor checked adb for a config of iPhones only")
	}
	if strings.Contains(out, "] phones") {
		t.Errorf("doctor listed adb phones for a config of iPhones only")
	}
	if locked.Locked() == false {
		t.Error("doctor unlocked the phone")
	}
	if id := up.SessionID(); id != "" {
		t.Errorf("doctor opened a WDA session %s", id)
	}
}
