//go:build linux

package packaging

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/edgeagent/edgeagent/testkit/gobuild"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// debFiles are the files of the edgeagent package, with their modes, as
// docs/install.md lists them.
var debFiles = map[string]string{
	"/usr/bin/edgeagent":                                           "-rwxr-xr-x",
	"/lib/systemd/system/edgeagent.service":                        "-rw-r--r--",
	"/usr/lib/sysusers.d/edgeagent.conf":                           "-rw-r--r--",
	"/usr/lib/tmpfiles.d/edgeagent.conf":                           "-rw-r--r--",
	"/etc/edgeagent/config.yaml.example":                           "-rw-r--r--",
	"/usr/share/doc/edgeagent/examples/51-edgeagent-android.rules": "-rw-r--r--",
	"/usr/share/doc/edgeagent/install.md":                          "-rw-r--r--",
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// buildDeb builds edgeagent for this machine's architecture and packages
// it with dist.sh, as make dist does, and returns the .deb's path.
func buildDeb(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Dir(testenv.BinaryWith(t, "edgeagent", gobuild.Options{LDFlags: "-X main.version=v0.0.0-debtest", Env: []string{"CGO_ENABLED=0"}}))
	cmd := exec.Command("packaging/dist.sh", "deb", "edgeagent", runtime.GOARCH, bin, dir)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dist.sh deb: %v\n%s", err, out)
	}
	return filepath.Join(dir, "edgeagent_0.0.0-dev_"+runtime.GOARCH+".deb")
}

// TestDeb builds the edgeagent .deb, checks that dpkg-deb -c lists the
// files where docs/install.md says they go, installs it, checks that it
// created the user and directories and left the service disabled and
// stopped, and purges it. It runs only as root, with dpkg, on a machine
// without edgeagent installed; it leaves the machine as it found it.
func TestDeb(t *testing.T) {
	for _, tool := range []string{"dpkg", "dpkg-deb", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	if testing.Short() {
		t.Skip("-short: builds and installs a package")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to install the package")
	}
	if exec.Command("dpkg", "-s", "edgeagent").Run() == nil {
		t.Skip("the edgeagent package is installed on this machine")
	}
	if _, err := user.Lookup("edgeagent"); err == nil {
		t.Skip("this machine has an edgeagent user: the test could not tell that the package created it")
	}
	if _, err := os.Stat("/usr/bin/edgeagent"); err == nil {
		t.Skip("/usr/bin/edgeagent exists on this machine")
	}
	_, plugdevErr := user.LookupGroup("plugdev")
	hadPlugdev := plugdevErr == nil

	deb := buildDeb(t)

	// The contents, where the docs say.
	doc, err := os.ReadFile("../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(run(t, "dpkg-deb", "-c", deb)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 6 && !strings.HasPrefix(f[0], "d") {
			listed[strings.TrimPrefix(f[5], ".")] = f[0] + " " + f[1]
		}
	}
	for path, mode := range debFiles {
		if got := listed[path]; got != mode+" root/root" {
			t.Errorf("dpkg-deb -c: %s is %q, want %q", path, got, mode+" root/root")
		}
		if !bytes.Contains(doc, []byte("`"+path+"`")) {
			t.Errorf("docs/install.md does not mention `%s`", path)
		}
	}
	if len(listed) != len(debFiles) {
		t.Errorf("dpkg-deb -c lists %d files, want %d: %v", len(listed), len(debFiles), listed)
	}

	// Install; whatever happens, purge and remove the user again.
	t.Cleanup(func() {
		if out, err := exec.Command("dpkg", "--purge", "edgeagent").CombinedOutput(); err != nil {
			t.Errorf("dpkg --purge edgeagent: %v\n%s", err, out)
		}
		if _, err := user.Lookup("edgeagent"); err == nil {
			if out, err := exec.Command("userdel", "edgeagent").CombinedOutput(); err != nil {
				t.Errorf("userdel edgeagent: %v\n%s", err, out)
			}
		}
		if _, err := user.LookupGroup("edgeagent"); err == nil {
			_ = exec.Command("groupdel", "edgeagent").Run()
		}
		if _, err := user.LookupGroup("plugdev"); err == nil && !hadPlugdev {
			_ = exec.Command("groupdel", "plugdev").Run()
		}
	})
	out := run(t, "dpkg", "-i", deb)
	if !strings.Contains(out, "write /etc/edgeagent/config.yaml") {
		t.Errorf("dpkg -i output does not tell to write the config:\n%s", out)
	}

	// The user and the directories.
	u, err := user.Lookup("edgeagent")
	if err != nil {
		t.Fatalf("the package did not create the edgeagent user: %v", err)
	}
	if u.HomeDir != "/var/lib/edgeagent" {
		t.Errorf("edgeagent's home is %s, want /var/lib/edgeagent", u.HomeDir)
	}
	if uid, _ := strconv.Atoi(u.Uid); uid == 0 || uid >= 1000 {
		t.Errorf("edgeagent has uid %d, want a system uid", uid)
	}
	if out := run(t, "id", "-nG", "edgeagent"); !strings.Contains(" "+out, " plugdev") {
		t.Errorf("edgeagent's groups are %q, want plugdev among them", strings.TrimSpace(out))
	}
	gid, _ := strconv.Atoi(u.Gid)
	uid, _ := strconv.Atoi(u.Uid)
	for _, d := range []struct {
		path     string
		mode     os.FileMode
		uid, gid int
	}{
		{"/etc/edgeagent", 0o750, 0, gid},
		{"/var/lib/edgeagent", 0o700, uid, gid},
	} {
		fi, err := os.Stat(d.path)
		if err != nil {
			t.Error(err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != d.mode || int(st.Uid) != d.uid || int(st.Gid) != d.gid {
			t.Errorf("%s: mode %04o owner %d:%d, want %04o %d:%d", d.path, fi.Mode().Perm(), st.Uid, st.Gid, d.mode, d.uid, d.gid)
		}
	}
	if _, err := os.Stat("/etc/edgeagent/config.yaml"); err == nil {
		t.Error("the package wrote a live /etc/edgeagent/config.yaml")
	}

	// Not enabled, not running.
	if _, err := os.Lstat("/etc/systemd/system/multi-user.target.wants/edgeagent.service"); err == nil {
		t.Error("the package enabled edgeagent.service")
	}
	if _, err := exec.LookPath("systemctl"); err == nil {
		state, _ := exec.Command("systemctl", "is-enabled", "edgeagent.service").Output()
		if s := strings.TrimSpace(string(state)); s != "disabled" {
			t.Errorf("systemctl is-enabled edgeagent.service = %q, want disabled", s)
		}
	}
	if pids := processesOf("/usr/bin/edgeagent"); len(pids) > 0 {
		t.Errorf("edgeagent is running (pids %v) right after installation", pids)
	}

	// The installed binary runs, and the unit in place verifies.
	if out := run(t, "/usr/bin/edgeagent", "version"); !strings.HasPrefix(out, "edgeagent v0.0.0-debtest ") {
		t.Errorf("/usr/bin/edgeagent version = %q", out)
	}
	if analyze, err := exec.LookPath("systemd-analyze"); err == nil {
		out, err := exec.Command(analyze, "verify", "--man=no", "/lib/systemd/system/edgeagent.service").CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify of the installed unit: %v\n%s", err, out)
		}
	}

	// Purge removes the files and the state.
	run(t, "dpkg", "--purge", "edgeagent")
	for _, p := range []string{"/usr/bin/edgeagent", "/lib/systemd/system/edgeagent.service", "/var/lib/edgeagent"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s remains after dpkg --purge", p)
		}
	}
}

// processesOf returns the pids of the processes running exe.
func processesOf(exe string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && target == exe {
			pids = append(pids, pid)
		}
	}
	return pids
}
