package config

import (
	"path/filepath"
	"testing"
	"time"
)

func TestPhonesConfig(t *testing.T) {
	base := "agent_id: a\nnats:\n  url: nats://h:4222\nstorage:\n  mode: presigned\n"
	a, err := ParseAgent("agent.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if p := a.Phones; p.FactsInterval.Duration() != 5*time.Minute || p.Rest.MaxTempC != 45 || p.Rest.MinBattery != 15 ||
		p.Rest.ResumeTempC != 40 || p.Rest.ResumeBattery != 30 || p.Rest.ChargeHook != nil || p.Rest.ChargeHookTimeout.Duration() != 30*time.Second {
		t.Errorf("defaults: %+v", p)
	}
	a, err = ParseAgent("agent.yaml", []byte(base+"phones:\n  facts_interval: 30s\n  rest:\n    max_temp_c: 41.5\n    resume_temp_c: 38\n    min_battery: 20\n    resume_battery: 50\n    charge_hook: [/usr/local/bin/plug, \"{serial}\", \"{event}\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := a.Phones; p.FactsInterval.Duration() != 30*time.Second || p.Rest.MaxTempC != 41.5 || p.Rest.ResumeTempC != 38 ||
		p.Rest.MinBattery != 20 || p.Rest.ResumeBattery != 50 || len(p.Rest.ChargeHook) != 3 || p.Rest.ChargeHook[1] != "{serial}" {
		t.Errorf("set: %+v", p)
	}
	_, err = ParseAgent("agent.yaml", []byte(base+"phones:\n  facts_interval: 10ms\n  rest:\n    max_temp_c: hot\n    min_battery: 40\n    resume_battery: 20\n    resume_temp_c: 300\n    charge_hook: [\"\"]\n    bogus: 1\n"))
	checkProblems(t, err, []string{
		"agent.yaml:7:19: phones.facts_interval: must be at least 1s, got 10ms",
		`agent.yaml:9:17: phones.rest.max_temp_c: expected a number, got a string "hot"`,
		"agent.yaml:11:21: phones.rest.resume_battery: must not be under min_battery (40), got 20",
		"agent.yaml:12:20: phones.rest.resume_temp_c: must be a temperature from 0 (off) to 150 °C, got 300",
		"agent.yaml:13:19: phones.rest.charge_hook[0]: the command must not be empty",
		`agent.yaml:14:5: phones.rest: unknown field "bogus"`,
	})
	_, err = ParseAgent("agent.yaml", []byte(base+"phones:\n  facts_interval: 10ms\n  rest:\n    max_temp_c: 40\n    min_battery: 40\n    resume_battery: 20\n    resume_temp_c: 42\n    charge_hook: [\"\"]\n"))
	checkProblems(t, err, []string{
		"agent.yaml:7:19: phones.facts_interval: must be at least 1s, got 10ms",
		"agent.yaml:11:21: phones.rest.resume_battery: must not be under min_battery (40), got 20",
		"agent.yaml:12:20: phones.rest.resume_temp_c: must not be above max_temp_c (40), got 42",
		"agent.yaml:13:19: phones.rest.charge_hook[0]: the command must not be empty",
	})
}

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

// TestPhonesConnect: phones.connect takes network phones as host:port;
// anything else is named with its key.
func TestPhonesConnect(t *testing.T) {
	base := "agent_id: a\nnats:\n  url: nats://h:4222\nstorage:\n  mode: presigned\n"
	a, err := ParseAgent("agent.yaml", []byte(base+"phones:\n  connect: [192.168.1.20:5555, \"[fe80::1]:5555\", phone.lan:37123]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := a.Phones.Connect; len(c) != 3 || c[0] != "192.168.1.20:5555" || c[1] != "[fe80::1]:5555" {
		t.Errorf("phones.connect %q", c)
	}
	_, err = ParseAgent("agent.yaml", []byte(base+"phones:\n  connect: [192.168.1.20, \"192.168.1.20:0\", \":5555\", \"a:5555\", \"a:5555\", \"h:port\"]\n"))
	checkProblems(t, err, []string{
		`agent.yaml:7:13: phones.connect[0]: "192.168.1.20": want a network phone's host:port (as for adb connect), such as 192.168.1.20:5555`,
		`agent.yaml:7:27: phones.connect[1]: "192.168.1.20:0": the port must be from 1 to 65535`,
		`agent.yaml:7:45: phones.connect[2]: ":5555": want a network phone's host:port (as for adb connect), such as 192.168.1.20:5555`,
		`agent.yaml:7:64: phones.connect[4]: "a:5555" is listed twice`,
		`agent.yaml:7:74: phones.connect[5]: "h:port": the port must be from 1 to 65535`,
	})
}

// TestPhonesOpTimeout: phones.op_timeout is 20s by default, takes a
// duration, and a value that is not positive or not a duration is named
// with its key and line.
func TestPhonesOpTimeout(t *testing.T) {
	base := "agent_id: a\nnats:\n  url: nats://h:4222\nstorage:\n  mode: presigned\n"
	a, err := ParseAgent("agent.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Phones.OpTimeout.Duration(); got != 20*time.Second {
		t.Errorf("default phones.op_timeout %v, want 20s", got)
	}
	a, err = ParseAgent("agent.yaml", []byte(base+"phones:\n  op_timeout: 3s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Phones.OpTimeout.Duration(); got != 3*time.Second {
		t.Errorf("phones.op_timeout %v, want 3s", got)
	}
	for value, want := range map[string]string{
		"0s":   "agent.yaml:7:15: phones.op_timeout: must be positive, got 0s",
		"-5s":  "agent.yaml:7:15: phones.op_timeout: must be positive, got -5s",
		"soon": `agent.yaml:7:15: phones.op_timeout: invalid duration "soon"`,
		"20":   `agent.yaml:7:15: phones.op_timeout: invalid duration "20": missing unit (for example "20s")`,
	} {
		_, err := ParseAgent("agent.yaml", []byte(base+"phones:\n  op_timeout: "+value+"\n"))
		checkProblems(t, err, []string{want})
	}
}
