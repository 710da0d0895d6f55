package capture_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
)

// TestADBInstallAPK: an APK is pushed to the phone and installed with pm
// install, on phones with and without shell protocol v2: the phone then
// reports its version, and the pushed file is gone. What the package
// manager refuses (a downgrade, a file that is no APK) is an ErrInstall
// quoting pm's reason, and changes nothing.
func TestADBInstallAPK(t *testing.T) {
	l := startADBLab(t,
		fakeadbd.Options{Packages: []string{"com.example.other"}},
		fakeadbd.Options{Packages: []string{"com.example.other"}, NoShellV2: true})
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name string, b []byte) (string, int64) {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path, int64(len(b))
	}
	v7, n7 := write("v7.apk", capture.SimAPK(protocol.AppVersion{Package: "com.example.shop", VersionCode: 7, VersionName: "0.7"}))
	v5, n5 := write("v5.apk", capture.SimAPK(protocol.AppVersion{Package: "com.example.shop", VersionCode: 5}))
	junk, nj := write("junk.apk", []byte("PK\x03\x04 not a zip"))
	for _, p := range l.phones {
		dev, err := capture.NewADBDevice(ctx, l.options(), p.Serial())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dev.AppVersion(ctx, "com.example.shop"); !errors.Is(err, capture.ErrAppNotInstalled) {
			t.Fatalf("before the install: %v, want not installed", err)
		}
		if err := dev.InstallAPK(ctx, v7, n7); err != nil {
			t.Fatalf("install: %v", err)
		}
		if v, err := dev.AppVersion(ctx, "com.example.shop"); err != nil || v.VersionCode != 7 || v.VersionName != "0.7" {
			t.Fatalf("after the install: %+v, %v", v, err)
		}
		for _, c := range []struct {
			path string
			size int64
			want string
		}{{v5, n5, "INSTALL_FAILED_VERSION_DOWNGRADE"}, {junk, nj, "INSTALL_PARSE_FAILED_NOT_APK"}} {
			err := dev.InstallAPK(ctx, c.path, c.size)
			if !errors.Is(err, capture.ErrInstall) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("install of %s: %v, want ErrInstall with %s", filepath.Base(c.path), err, c.want)
			}
		}
		if v, _ := dev.AppVersion(ctx, "com.example.shop"); v.VersionCode != 7 {
			t.Fatalf("a refused install changed the version: %+v", v)
		}
		pushed := 0
		for _, cmd := range p.Commands() {
			if path, ok := strings.CutPrefix(cmd, "pm install -r "); ok {
				pushed++
				if _, left := p.File(path); left {
					t.Errorf("%s is still on the phone", path)
				}
			}
		}
		if pushed != 3 {
			t.Errorf("%d pm installs of a pushed file, want 3: %q", pushed, p.Commands())
		}
	}
}
