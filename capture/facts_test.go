package capture_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
)

// section joins outputs as FactsScript prints them.
func section(cmds map[string]string) []byte {
	var b strings.Builder
	for _, c := range []string{"getprop ro.build.version.release", "getprop ro.build.version.sdk", "getprop ro.build.fingerprint",
		"wm size", "wm density", "dumpsys battery", "dumpsys power", "dumpsys window policy", "df /data",
		"getprop persist.sys.locale", "getprop persist.sys.timezone", "dumpsys package packages"} {
		out, ok := cmds[c]
		if !ok {
			continue
		}
		b.WriteString("@@edgeagent-facts " + c + "\n" + out)
	}
	return []byte(b.String())
}

// Outputs of real phones: a Pixel on Android 13 and a Nexus on Android 6.
var (
	android13 = map[string]string{
		"getprop ro.build.version.release": "13\n",
		"getprop ro.build.version.sdk":     "33\n",
		"getprop ro.build.fingerprint":     "google/panther/panther:13/TQ3A.230901.001/10750268:user/release-keys\n",
		"wm size":                          "Physical size: 1080x2400\nOverride size: 720x1600\n",
		"wm density":                       "Physical density: 420\n",
		"dumpsys battery": "Current Battery Service state:\n  AC powered: false\n  USB powered: true\n  Wireless powered: false\n" +
			"  Max charging current: 500000\n  status: 2\n  health: 2\n  present: true\n  level: 85\n  scale: 100\n  voltage: 4301\n  temperature: 315\n  technology: Li-ion\n",
		"dumpsys power":                "POWER MANAGER (dumpsys power)\n\nPower Manager State:\n  mDirty=0x0\n  mWakefulness=Awake\n  mWakefulnessChanging=false\nDisplay Power: state=ON\n",
		"dumpsys window policy":        "WINDOW MANAGER POLICY STATE (dumpsys window policy)\n    mShowingDream=false mDreamingLockscreen=false isStatusBarKeyguard=true\n",
		"df /data":                     "Filesystem       1K-blocks    Used Available Use% Mounted on\n/dev/block/dm-45 115249236 9734880 105383284   9% /data\n",
		"getprop persist.sys.locale":   "ja-JP\n",
		"getprop persist.sys.timezone": "Asia/Tokyo\n",
		"dumpsys package packages":     packages13,
	}
	android6 = map[string]string{
		"getprop ro.build.version.release": "6.0.1\n",
		"getprop ro.build.version.sdk":     "23\n",
		"getprop ro.build.fingerprint":     "google/hammerhead/hammerhead:6.0.1/M4B30Z/3437181:user/release-keys\n",
		"wm size":                          "Physical size: 1080x1920\n",
		"wm density":                       "Physical density: 480\nOverride density: 400\n",
		"dumpsys battery":                  "Current Battery Service state:\n  AC powered: false\n  USB powered: false\n  Wireless powered: false\n  status: 3\n  health: 3\n  present: true\n  level: 120\n  scale: 200\n  temperature: 412\n",
		"dumpsys power":                    "Power Manager State:\n  mWakefulness=Asleep\n",
		"dumpsys window policy":            "WINDOW MANAGER POLICY STATE (dumpsys window policy)\n    mShowingLockscreen=true mShowingDream=false\n",
		"df /data":                         "Filesystem               Size     Used     Free   Blksize\n/data                   25.0G    10.4G    14.6G   4096\n",
		"getprop persist.sys.locale":       "\n", // never set: not known
		"getprop persist.sys.timezone":     "America/Sao_Paulo\n",
		"dumpsys package packages":         packages6,
	}
)

// What capture.PackagesCommand prints on real phones: `dumpsys package
// packages` filtered by grep. On Android 13: the framework and an
// unchanged system app (left out), a store app, an updated system app
// (Chrome, whose factory version follows under "Hidden system
// packages:"), an app removed for user 0 but kept for a work profile, and
// an app without a versionName.
const (
	packages13 = `  Package [android] (2c1b7f0):
    versionCode=33 minSdk=33 targetSdk=33
    versionName=13
    flags=[ SYSTEM PERSISTENT ALLOW_CLEAR_USER_DATA ]
    User 0: ceDataInode=0 installed=true hidden=false suspended=false distractionFlags=0 stopped=false notLaunched=false enabled=0 instant=false virtual=false
  Package [com.google.android.youtube] (9e51a4d):
    versionCode=1540398528 minSdk=26 targetSdk=33
    versionName=18.45.43
    flags=[ HAS_CODE ALLOW_CLEAR_USER_DATA ALLOW_BACKUP ]
    User 0: ceDataInode=57384 installed=true hidden=false suspended=false distractionFlags=0 stopped=false notLaunched=false enabled=0 instant=false virtual=false
  Package [com.android.settings] (b40e8a2):
    versionCode=33 minSdk=33 targetSdk=33
    versionName=13
    flags=[ SYSTEM HAS_CODE ALLOW_CLEAR_USER_DATA ]
    User 0: ceDataInode=3188 installed=true hidden=false suspended=false distractionFlags=0 stopped=false notLaunched=false enabled=0 instant=false virtual=false
  Package [com.android.chrome] (4d0f3b2):
    versionCode=559820033 minSdk=29 targetSdk=33
    versionName=114.0.5735.196
    flags=[ SYSTEM HAS_CODE ALLOW_CLEAR_USER_DATA UPDATED_SYSTEM_APP ALLOW_BACKUP ]
    User 0: ceDataInode=12011 installed=true hidden=false suspended=false distractionFlags=0 stopped=false notLaunched=false enabled=0 instant=false virtual=false
  Package [jp.co.example.coupon] (61fa0c3):
    versionCode=4100 minSdk=24 targetSdk=31
    versionName=4.1.0
    flags=[ HAS_CODE ALLOW_CLEAR_USER_DATA ]
    User 0: ceDataInode=0 installed=false hidden=false suspended=false distractionFlags=0 stopped=true notLaunched=true enabled=0 instant=false virtual=false
    User 10: ceDataInode=90211 installed=true hidden=false suspended=false distractionFlags=0 stopped=false notLaunched=false enabled=0 instant=false virtual=false
  Package [com.example.shop] (7c0d2f5):
    versionCode=52100 minSdk=24 targetSdk=33
    versionName=5.2.1
    flags=[ HAS_CODE ALLOW_CLEAR_USER_DATA ALLOW_BACKUP ]
    User 0: ceDataInode=88123 installed=true hidden=false suspended=false distractionFlags=0 stopped=false notLaunched=false enabled=0 instant=false virtual=false
  Package [org.example.bare] (1a2b3c4):
    versionCode=1 minSdk=21 targetSdk=30
    versionName=null
    flags=[ HAS_CODE ]
    User 0: ceDataInode=77001 installed=true hidden=false suspended=false distractionFlags=0 stopped=false notLaunched=false enabled=0 instant=false virtual=false
Hidden system packages:
  Package [com.android.chrome] (e3d2c1b):
    versionCode=447211456 minSdk=29 targetSdk=31
    versionName=96.0.4664.104
    flags=[ SYSTEM HAS_CODE ALLOW_CLEAR_USER_DATA ALLOW_BACKUP ]
`
	packages6 = `  Package [com.android.providers.telephony] (3b9a7c1):
    versionCode=23 targetSdk=23
    versionName=6.0.1
    flags=[ SYSTEM HAS_CODE PERSISTENT ALLOW_CLEAR_USER_DATA ]
    User 0: installed=true hidden=false stopped=false notLaunched=false enabled=0
  Package [com.example.shop] (2f1e0d9):
    versionCode=49000 targetSdk=23
    versionName=4.9 (legacy)
    flags=[ HAS_CODE ALLOW_CLEAR_USER_DATA ALLOW_BACKUP ]
    User 0: installed=true hidden=false stopped=false notLaunched=false enabled=0
`
)

func TestParseFacts(t *testing.T) {
	f, err := capture.ParseFacts(section(android13))
	if err != nil {
		t.Fatal(err)
	}
	if f.AndroidVersion != "13" || f.SDK != 33 || !strings.HasPrefix(f.Fingerprint, "google/panther") ||
		f.ScreenWidth != 720 || f.ScreenHeight != 1600 || f.Density != 420 || f.Locale != "ja-JP" || f.TimeZone != "Asia/Tokyo" {
		t.Errorf("android 13: %+v", f)
	}
	if *f.BatteryLevel != 85 || *f.BatteryTempC != 31.5 || !*f.Charging || f.BatteryHealth != "good" ||
		!*f.ScreenOn || !*f.Locked || *f.FreeStorageMB != 105383284/1024 {
		t.Errorf("android 13: %s", f.Summary())
	}
	f, err = capture.ParseFacts(section(android6))
	if err != nil {
		t.Fatal(err)
	}
	if f.AndroidVersion != "6.0.1" || f.SDK != 23 || f.ScreenWidth != 1080 || f.Density != 400 ||
		*f.BatteryLevel != 60 || *f.BatteryTempC != 41.2 || *f.Charging || f.BatteryHealth != "overheat" ||
		*f.ScreenOn || !*f.Locked || *f.FreeStorageMB != 14950 || f.Locale != "" || f.TimeZone != "America/Sao_Paulo" {
		t.Errorf("android 6: %s", f.Summary())
	}
	if want := []protocol.AppVersion{{Package: "com.example.shop", VersionName: "4.9 (legacy)", VersionCode: 49000}}; !slices.Equal(f.Apps, want) {
		t.Errorf("android 6 apps: %v, want %v", f.Apps, want)
	}
}

// TestParsePackages: the apps a job may ask for are the store apps and
// the updated system apps installed for user 0, at their installed
// version (not the factory one), sorted by package.
func TestParsePackages(t *testing.T) {
	apps, err := capture.ParsePackages([]byte(packages13))
	if err != nil {
		t.Fatal(err)
	}
	want := []protocol.AppVersion{
		{Package: "com.android.chrome", VersionName: "114.0.5735.196", VersionCode: 559820033},
		{Package: "com.example.shop", VersionName: "5.2.1", VersionCode: 52100},
		{Package: "com.google.android.youtube", VersionName: "18.45.43", VersionCode: 1540398528},
		{Package: "org.example.bare", VersionCode: 1},
	}
	if !slices.Equal(apps, want) {
		t.Errorf("apps %v, want %v", apps, want)
	}
	// The whole dump, unfiltered, reads the same.
	full := strings.ReplaceAll(packages13, "    versionCode=", "    codePath=/data/app/x\n    versionCode=")
	full = strings.ReplaceAll(full, "    flags=[", "    pkgFlags=[ SYSTEM ]\n    flags=[")
	if apps, err := capture.ParsePackages([]byte("Packages:\n" + full)); err != nil || !slices.Equal(apps, want) {
		t.Errorf("the whole dump: %v, %v", apps, err)
	}
	// A phone with no app beside its system image lists none, known.
	if apps, err := capture.ParsePackages([]byte(packages13[:strings.Index(packages13, "  Package [com.google")])); err != nil || apps == nil || len(apps) != 0 {
		t.Errorf("system image only: %v, %v", apps, err)
	}
}

// TestParsePackagesBadOutput: output that lists no package is an error
// quoting it; a package whose name or version is garbage is skipped or
// listed without that version, counted and quoted; past
// protocol.MaxPhoneApps apps the first by name are kept.
func TestParsePackagesBadOutput(t *testing.T) {
	for _, out := range []string{"", "/system/bin/sh: grep: not found\n", "Can't find service: package\n"} {
		if apps, err := capture.ParsePackages([]byte(out)); err == nil || apps != nil {
			t.Errorf("%q: %v, %v", out, apps, err)
		}
	}
	garbage := "  Package [com.example.ok] (1):\n    versionCode=12 minSdk=1\n    versionName=1.2\n" +
		"  Package [not a package!] (2):\n    versionCode=5\n" +
		"  Package [com.example.badcode] (3):\n    versionCode=-7 minSdk=1\n    versionName=2.0\n" +
		"  Package [com.example.badname] (4):\n    versionCode=9\n    versionName=3.0\x1b[31m\n" +
		"  Package [com.example.long] (5):\n    versionCode=9\n    versionName=" + strings.Repeat("9", protocol.MaxVersionName+1) + "\n"
	apps, err := capture.ParsePackages([]byte(garbage))
	want := []protocol.AppVersion{
		{Package: "com.example.badcode", VersionName: "2.0"},
		{Package: "com.example.badname", VersionCode: 9},
		{Package: "com.example.long", VersionCode: 9},
		{Package: "com.example.ok", VersionName: "1.2", VersionCode: 12},
	}
	if !slices.Equal(apps, want) {
		t.Errorf("apps %v, want %v", apps, want)
	}
	if err == nil || !strings.Contains(err.Error(), `4 of 5 packages not fully understood, the first: package line "  Package [not a package!] (2):"`) {
		t.Errorf("error %v", err)
	}
	var many strings.Builder
	for i := range protocol.MaxPhoneApps + 5 {
		fmt.Fprintf(&many, "  Package [com.example.app%04d] (%x):\n    versionCode=%d\n    versionName=1.%d\n", protocol.MaxPhoneApps+4-i, i, i+1, i)
	}
	apps, err = capture.ParsePackages([]byte(many.String()))
	if len(apps) != protocol.MaxPhoneApps || apps[0].Package != "com.example.app0000" || apps[len(apps)-1].Package != fmt.Sprintf("com.example.app%04d", protocol.MaxPhoneApps-1) {
		t.Errorf("%d apps, from %v to %v", len(apps), apps[0], apps[len(apps)-1])
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d apps listed, the first %d by package name kept", protocol.MaxPhoneApps+5, protocol.MaxPhoneApps)) {
		t.Errorf("error %v", err)
	}
}

// TestParseFactsBadOutput: output that is not understood leaves the fact
// unset and names its command; the other facts are read.
func TestParseFactsBadOutput(t *testing.T) {
	bad := map[string]string{}
	for k, v := range android13 {
		bad[k] = v
	}
	bad["dumpsys battery"] = "Can't find service: battery\n"
	bad["wm size"] = "Physical size: axb\n"
	bad["dumpsys power"] = "  mWakefulness=Sideways\n"
	delete(bad, "df /data")
	f, err := capture.ParseFacts(section(bad))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`dumpsys battery: output not understood: "Can't find service: battery"`, "wm size: output not understood",
		`dumpsys power: mWakefulness="Sideways" not understood`, "df /data: no output (the command did not run)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if f.BatteryLevel != nil || f.BatteryTempC != nil || f.ScreenWidth != 0 || f.ScreenOn != nil || f.FreeStorageMB != nil {
		t.Errorf("facts from bad output: %s", f.Summary())
	}
	if f.SDK != 33 || f.Locked == nil || f.Density != 420 {
		t.Errorf("good output not read: %+v", f)
	}
}

func FuzzParseFacts(f *testing.F) {
	f.Add(section(android13))
	f.Add(section(android6))
	f.Add([]byte("@@edgeagent-facts df /data\nFilesystem a b Available\n1\n"))
	f.Add([]byte("@@edgeagent-facts dumpsys battery\nlevel: 5\nscale: 0\ntemperature: -4000\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		facts, err := capture.ParseFacts(b)
		if err == nil && facts.SDK == 0 {
			t.Errorf("no error, but no SDK: %+v", facts)
		}
		if facts.BatteryLevel != nil && (*facts.BatteryLevel < 0 || *facts.BatteryLevel > 100) {
			t.Errorf("battery level %d", *facts.BatteryLevel)
		}
		if facts.FreeStorageMB != nil && *facts.FreeStorageMB < 0 {
			t.Errorf("free storage %d", *facts.FreeStorageMB)
		}
	})
}

// TestADBFacts reads a fake phone's facts through the real adb server:
// every fact is read, its apps with their versions included, the battery
// drains and warms with the work done, and SetBattery is what the next
// read reports.
func TestADBFacts(t *testing.T) {
	l := startADBLab(t, fakeadbd.Options{Width: 1080, Height: 2340, IME: true, Locked: true,
		Packages:    []string{capture.SimShop, "org.example.maps"},
		AppVersions: map[string]protocol.AppVersion{capture.SimShop: {VersionName: "5.2.1", VersionCode: 521}}},
		fakeadbd.Options{NoShellV2: true, Model: "Nexus 5", Props: map[string]string{"ro.build.version.sdk": "23", "ro.build.version.release": "6.0.1"}})
	ctx := context.Background()
	p := l.phones[0]
	dev, err := capture.NewADBDevice(ctx, l.options(), p.Serial())
	if err != nil {
		t.Fatal(err)
	}
	p.SetBattery(70, 30)
	f, err := dev.Facts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f.AndroidVersion != "13" || f.SDK != 33 || f.Fingerprint == "" || f.ScreenWidth != 1080 || f.ScreenHeight != 2340 || f.Density != 420 ||
		f.BatteryLevel == nil || *f.BatteryLevel != 70 || f.BatteryTempC == nil || *f.BatteryTempC > 30 || *f.BatteryTempC < 29 ||
		f.Charging == nil || !*f.Charging || f.BatteryHealth != "good" || f.ScreenOn == nil || *f.ScreenOn || f.Locked == nil || !*f.Locked ||
		f.FreeStorageMB == nil || *f.FreeStorageMB != 49152 || f.IME != capture.IMEPackage || f.ReadAtUnixMilli == 0 {
		t.Errorf("facts: %s (%+v)", f.Summary(), f)
	}
	wantApps := []protocol.AppVersion{
		{Package: capture.IMEPackage, VersionName: capture.SimAppVersion.VersionName, VersionCode: capture.SimAppVersion.VersionCode},
		{Package: capture.SimShop, VersionName: "5.2.1", VersionCode: 521},
		{Package: "org.example.maps", VersionName: capture.SimAppVersion.VersionName, VersionCode: capture.SimAppVersion.VersionCode},
	}
	if !slices.Equal(f.Apps, wantApps) {
		t.Errorf("apps %v, want %v", f.Apps, wantApps)
	}
	// Work warms the phone and drains its battery.
	p.SetCharging(false)
	for range 100 {
		if err := dev.Tap(ctx, 10, 10); err != nil {
			t.Fatal(err)
		}
	}
	g, err := dev.Facts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if *g.BatteryTempC < *f.BatteryTempC+4 || *g.BatteryLevel >= *f.BatteryLevel || *g.Charging {
		t.Errorf("after 100 taps: %s; before: %s", g.Summary(), f.Summary())
	}
	p.SetBattery(12, 47.5)
	if g, err = dev.Facts(ctx); err != nil || *g.BatteryLevel != 12 || *g.BatteryTempC > 47.5 || *g.BatteryTempC < 47 {
		t.Errorf("after SetBattery(12, 47.5): %s, %v", g.Summary(), err)
	}

	old, err := capture.NewADBDevice(ctx, l.options(), l.phones[1].Serial())
	if err != nil {
		t.Fatal(err)
	}
	f, err = old.Facts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f.AndroidVersion != "6.0.1" || f.SDK != 23 || f.IME != "" || f.ScreenOn == nil || !*f.ScreenOn || f.Locked == nil || *f.Locked ||
		len(f.Apps) != 1 || f.Apps[0].Package != capture.SimShop {
		t.Errorf("old phone: %s, apps %v", f.Summary(), f.Apps)
	}
}

// TestSimulatedFacts: the simulated phone reports believable facts; work
// drains and warms its battery.
func TestSimulatedFacts(t *testing.T) {
	ctx := context.Background()
	s := capture.NewSimulated(capture.SimOptions{Width: 1080, Height: 1920, IME: true})
	f, err := s.Facts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f.SDK == 0 || f.ScreenWidth != 1080 || f.ScreenHeight != 1920 || f.BatteryLevel == nil || f.BatteryTempC == nil ||
		f.IME != capture.IMEPackage || f.ScreenOn == nil || !*f.ScreenOn ||
		len(f.Apps) != 2 || f.Apps[0].Package != capture.IMEPackage || f.Apps[1] != (protocol.AppVersion{Package: capture.SimShop, VersionName: "1.0.0", VersionCode: 1}) {
		t.Fatalf("facts: %+v", f)
	}
	s.SetCharging(false)
	for range 200 {
		if err := s.Tap(ctx, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	g, _ := s.Facts(ctx)
	if *g.BatteryLevel > *f.BatteryLevel-3 || *g.BatteryTempC < *f.BatteryTempC+9 {
		t.Errorf("after 200 taps: %s; before: %s", g.Summary(), f.Summary())
	}
	// Work alone stops warming it at capture.SimWorkMaxC; charging, it
	// does not drain.
	s.SetCharging(true)
	before, _ := s.Facts(ctx)
	for range 1000 {
		if err := s.Tap(ctx, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	g, _ = s.Facts(ctx)
	if *g.BatteryTempC > capture.SimWorkMaxC || *g.BatteryTempC < capture.SimWorkMaxC-1 || *g.BatteryLevel < *before.BatteryLevel {
		t.Errorf("after 1000 taps, charging: %s; before: %s", g.Summary(), before.Summary())
	}
	s.Unplug()
	if _, err := s.Facts(ctx); err == nil {
		t.Error("unplugged phone read its facts")
	}
}
