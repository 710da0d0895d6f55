package main

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// keysCheck returns doctor's adb keys check, with its continuation lines.
func keysCheck(out string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "["):
			name := strings.TrimSpace(line[7:min(len(line), 28)])
			in = name == "adb keys"
		case !strings.HasPrefix(line, "       "):
			in = false
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// TestDoctorOtherUserKeys: two phones behind the real adb server are both
// unauthorized, the agent's user has no adb key, and another user's home
// holds one: doctor says the phones were probably authorised by that user
// and how to give the agent the key (testdata/doctor_keys.golden). With
// adb.keys_dir naming that key's directory (the agent's own server loads
// it) the check is quiet.
func TestDoctorOtherUserKeys(t *testing.T) {
	srv := testenv.StartADB(t)
	var serials []string
	for range 2 {
		p, err := fakeadbd.Start(fakeadbd.Options{Unauthorized: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		srv.Connect(t, p.Addr(), "unauthorized")
		serials = append(serials, p.Serial())
	}
	tmp := t.TempDir()
	agentHome := filepath.Join(tmp, "agent")
	alice := filepath.Join(tmp, "alice")
	if err := os.MkdirAll(filepath.Join(alice, ".android"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(alice, ".android", "adbkey"), []byte("alice's private key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(agentHome, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", agentHome)
	t.Setenv("ADB_VENDOR_KEYS", "")
	orig := otherUserHomes
	otherUserHomes = func() []string { return []string{agentHome, alice} }
	t.Cleanup(func() { otherUserHomes = orig })

	config := func(extra string) string {
		return writeConfig(t, fmt.Sprintf(`agent_id: pc-keys
state_dir: %s/state
nats:
  url: nats://127.0.0.1:1
storage:
  mode: presigned
adb:
  path: %s
  server_port: %d
%sdevices:
  - serial: %s
  - serial: %s
status:
  listen: %s
`, tmp, srv.Path, srv.Port, extra, serials[0], serials[1], testenv.FreeAddr(t)))
	}
	_, out, _ := runCLI(t, "doctor", "-c", config(""), "-timeout", "3s")
	for _, s := range serials {
		if !strings.Contains(out, "[FAIL] phone "+s) {
			t.Errorf("doctor does not fail phone %s:\n%s", s, out)
		}
	}
	got := strings.ReplaceAll(keysCheck(out), tmp, "<tmp>")
	if u, err := user.Current(); err == nil {
		got = strings.ReplaceAll(got, " as "+u.Username+" ", " as <user> ")
		got = strings.ReplaceAll(got, " owned by "+u.Username+",", " owned by <user>,")
	}
	testenv.Golden(t, "doctor_keys.golden", got)

	// The agent's own server loads alice's key: not the cause.
	_, out, _ = runCLI(t, "doctor", "-c", config("  keys_dir: "+filepath.Join(alice, ".android")+"\n"), "-timeout", "3s")
	if strings.Contains(out, "adb keys") {
		t.Errorf("doctor blames the keys although adb.keys_dir loads the other user's key:\n%s", out)
	}
	if !strings.Contains(out, "unauthorized: the phone has not accepted this PC's adb key") {
		t.Errorf("doctor does not list the unauthorized phones:\n%s", out)
	}
}
