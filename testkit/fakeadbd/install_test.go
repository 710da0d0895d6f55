package fakeadbd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestRealADBInstall: the real adb's own `adb install` installs an APK on
// the fake phone, which then reports the package at the APK's versionCode
// through `pm path` and `dumpsys package`; pm refuses a downgrade without
// -d, a file that is no APK, and a file that is not there, in Android's
// words and with exit status 1.
func TestRealADBInstall(t *testing.T) {
	srv := testenv.StartADB(t)
	p := startPhone(t, fakeadbd.Options{Packages: []string{"com.example.other"}})
	srv.Connect(t, p.Addr(), "device")
	run := func(args ...string) (string, error) {
		t.Helper()
		return srv.Run(append([]string{"-s", p.Serial()}, args...)...)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if out, _ := run("shell", "pm", "path", "com.example.shop"); strings.Contains(out, "package:") {
		t.Fatalf("com.example.shop is installed before the install: %s", out)
	}
	v7 := write("shop-7.apk", capture.SimAPK(protocol.AppVersion{Package: "com.example.shop", VersionCode: 7, VersionName: "0.7"}))
	if out, err := run("install", v7); err != nil || !strings.Contains(out, "Success") {
		t.Fatalf("adb install: %v\n%s%s", err, out, srv.LogTail())
	}
	if out, err := run("shell", "pm", "path", "com.example.shop"); err != nil || !strings.Contains(out, "package:/data/app/com.example.shop/base.apk") {
		t.Fatalf("pm path after the install: %v %s", err, out)
	}
	out, err := run("shell", "dumpsys", "package", "com.example.shop")
	if v, ok := capture.ParsePackageVersion("com.example.shop", []byte(out)); err != nil || !ok || v.VersionCode != 7 || v.VersionName != "0.7" {
		t.Fatalf("dumpsys package after the install: %+v %v\n%s", v, err, out)
	}
	if out, err := run("shell", "pm", "list", "packages", "example"); err != nil || !strings.Contains(out, "package:com.example.shop\n") {
		t.Fatalf("pm list packages after the install: %v %s", err, out)
	}
	if got := p.Installs(); len(got) != 1 || got[0].VersionCode != 7 {
		t.Fatalf("installs = %+v", got)
	}

	v5 := write("shop-5.apk", capture.SimAPK(protocol.AppVersion{Package: "com.example.shop", VersionCode: 5}))
	if out, err := run("install", "-r", v5); err == nil || !strings.Contains(out, "INSTALL_FAILED_VERSION_DOWNGRADE") {
		t.Fatalf("downgrade without -d: %v\n%s", err, out)
	}
	junk := write("junk.apk", []byte("PK\x03\x04 but not a zip"))
	if out, err := run("install", "-r", junk); err == nil || !strings.Contains(out, "INSTALL_PARSE_FAILED_NOT_APK") {
		t.Fatalf("install of a file that is no APK: %v\n%s", err, out)
	}
	if out, err := run("shell", "pm", "install", "-r", "/data/local/tmp/absent.apk"); err == nil || !strings.Contains(out, "Can't open file") {
		t.Fatalf("pm install of a missing file: %v\n%s", err, out)
	}
	out, _ = run("shell", "dumpsys", "package", "com.example.shop")
	if v, _ := capture.ParsePackageVersion("com.example.shop", []byte(out)); v.VersionCode != 7 {
		t.Fatalf("a refused install changed the version: %+v", v)
	}
}
