package main

import (
	"bytes"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/edgeagent/edgeagent/capture/adb"
)

// otherUserHomes lists the home directories of the PC's users where an
// adb key may be: /home/* and /root (Linux), /Users/* (macOS),
// C:\Users\* (Windows). Tests replace it.
var otherUserHomes = func() []string {
	var pats []string
	switch runtime.GOOS {
	case "windows":
		pats = []string{filepath.Join(os.Getenv("SystemDrive")+`\`, "Users", "*")}
	case "darwin":
		pats = []string{"/Users/*"}
	default:
		pats = []string{"/home/*", "/root"}
	}
	var out []string
	for _, p := range pats {
		m, _ := filepath.Glob(p)
		out = append(out, m...)
	}
	return out
}

// checkOtherUserKeys looks at phones that are all unauthorized for the
// usual cause on a PC where the agent runs as a service: the phones
// accepted the adb key of the user who set them up (~/.android/adbkey),
// while the agent's adb server runs as another user with another key (or
// none). It reports it when another user's home holds an adb key that is
// not the one the agent's server loads, and says how to give the agent
// that key (docs/operations.md, Phones unauthorized for the service).
func (d *doctor) checkOtherUserKeys(states []string) {
	if len(states) == 0 || slices.ContainsFunc(states, func(s string) bool { return s != adb.StateUnauthorized }) {
		return
	}
	me := "this user"
	if u, err := user.Current(); err == nil {
		me = u.Username
	}
	home, _ := os.UserHomeDir()
	ownKey := filepath.Join(home, ".android", "adbkey")
	own, ownErr := os.ReadFile(ownKey)
	// The keys the agent's adb server loads besides its own.
	vendor := os.Getenv("ADB_VENDOR_KEYS")
	if d.cfg.ADB.ServerPort != 0 && d.cfg.ADB.KeysDir != "" {
		vendor = d.cfg.ADB.KeysDir
	}
	loaded := func(dir string) bool {
		for _, v := range filepath.SplitList(vendor) {
			if v != "" && (filepath.Clean(v) == filepath.Clean(dir) || filepath.Clean(v) == filepath.Join(dir, "adbkey")) {
				return true
			}
		}
		return false
	}
	var others []string
	for _, h := range otherUserHomes() {
		if filepath.Clean(h) == filepath.Clean(home) {
			continue
		}
		key := filepath.Join(h, ".android", "adbkey")
		if _, err := os.Stat(key); err != nil || loaded(filepath.Dir(key)) {
			continue
		}
		if b, err := os.ReadFile(key); err == nil && ownErr == nil && bytes.Equal(b, own) {
			continue // the same key: not the cause
		}
		others = append(others, key)
	}
	ownDesc := "its key " + ownKey
	if ownErr != nil {
		ownDesc = "no key at " + ownKey
	}
	n := len(states)
	if len(others) > 0 {
		dir := filepath.Dir(others[0])
		d.add("adb keys", checkFail,
			fmt.Sprintf("every phone (%d) is unauthorized, and another user of this PC has an adb key (%s): the phones were probably authorised by that user, while the agent runs as %s with %s",
				n, strings.Join(others, ", "), me, ownDesc),
			fmt.Sprintf("give the agent the key the phones accepted: set adb.server_port (e.g. 5038) and adb.keys_dir: %s (the agent's own adb server loads it as ADB_VENDOR_KEYS); or start the adb server with ADB_VENDOR_KEYS=%s; or copy %s and adbkey.pub to %s owned by %s, mode 0600; then restart the adb server (adb kill-server) so that it loads the key",
				dir, dir, others[0], filepath.Dir(ownKey), me))
		return
	}
	if ownErr != nil && vendor == "" {
		d.add("adb keys", checkWarn,
			fmt.Sprintf("every phone (%d) is unauthorized, and %s has no adb key at %s (ADB_VENDOR_KEYS is not set): the adb server makes a new key no phone has accepted yet", n, me, ownKey),
			"accept the prompt on each phone; or, if the phones were authorised on this PC under another account, set adb.keys_dir (with adb.server_port) or ADB_VENDOR_KEYS to that account's .android directory")
	}
}
