package config

import (
	"path/filepath"
	"testing"
	"time"
)

// TestRecoveryAndServerValidate: every bad value of phones.recovery and
// of the agent's own adb server is named with its key.
func TestRecoveryAndServerValidate(t *testing.T) {
	a := validAgent()
	if a.Phones.Recovery.ProbeTimeout.Duration() != 5*time.Second || a.Phones.Recovery.QuarantineAfter != 3 || a.Phones.Recovery.Reboot {
		t.Fatalf("defaults %+v", a.Phones.Recovery)
	}
	a.Phones.Recovery = Recovery{ProbeTimeout: Duration(time.Minute), ProbeInterval: Duration(time.Second), BootTimeout: 0, QuarantineAfter: 0, Window: -1}
	a.ADB.ServerPort = 5037
	a.ADB.KeysDir = filepath.Join(t.TempDir(), "absent")
	checkProblems(t, a.Validate(), []string{
		"adb.server_port: 5037 is the port every other adb (Android Studio, scrcpy) uses and may kill; pick another, such as 5038",
		"adb.keys_dir: " + a.ADB.KeysDir + ": no such file or directory",
		"phones.recovery.boot_timeout: must be positive, got 0s",
		"phones.recovery.window: must be positive, got -1ns",
		"phones.recovery.quarantine_after: must be at least 1, got 0",
		"phones.recovery.probe_timeout: 1m0s must be shorter than probe_interval 1s",
	})

	a = validAgent()
	a.ADB.KeysDir = t.TempDir()
	checkProblems(t, a.Validate(), []string{
		"adb.keys_dir: only used for the agent's own adb server: set adb.server_port too (or set ADB_VENDOR_KEYS for the adb server you start)",
	})
	a.ADB.ServerPort = 70000
	checkProblems(t, a.Validate(), []string{"adb.server_port: must be a port from 1 to 65535, got 70000"})
	a.ADB.ServerPort = 5038
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := a.ADB.ServerAddress(); got != "127.0.0.1:5038" {
		t.Errorf("server address %q", got)
	}
}

// TestRecoveryStrictDecoding: an unknown key under phones.recovery and a
// value of the wrong type are refused with their line.
func TestRecoveryStrictDecoding(t *testing.T) {
	path := tempFile(t, "agent.yaml", `agent_id: pc-1
nats:
  url: nats://127.0.0.1:4222
storage:
  endpoint: minio:9000
  bucket: edge-bucket
  access_key: a
  secret_key: s
phones:
  recovery:
    probe_timeout: soon
    quarantine_afterr: 2
`)
	_, err := LoadAgent(path)
	got := problemStrings(t, err)
	want := []string{
		path + ":11:20: phones.recovery.probe_timeout",
		path + ":12:5: phones.recovery: unknown field \"quarantine_afterr\" (did you mean \"quarantine_after\"?)",
	}
	if len(got) != 2 {
		t.Fatalf("problems %q, want two", got)
	}
	for i, w := range want {
		if len(got[i]) < len(w) || got[i][:len(w)] != w {
			t.Errorf("problem %q, want it to start with %q", got[i], w)
		}
	}
}
