package fakeadbd

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/edgeagent/edgeagent/capture"
)

// SetBattery sets the phone's battery level (percent) and temperature
// (°C), as `dumpsys battery` reports them. Like the simulated phone behind
// the screen (capture.Simulated.SetBattery), the battery then drains and
// warms with every input, screenshot and dump, and cools and charges while
// the phone is idle.
func (p *Phone) SetBattery(level int, tempC float64) { p.sim.SetBattery(level, tempC) }

// SetCharging plugs the phone into a charger or out of it (a new phone is
// charging, on USB).
func (p *Phone) SetCharging(on bool) { p.sim.SetCharging(on) }

// dumpsys answers `dumpsys battery`, `dumpsys power`, `dumpsys window
// [policy]`, `dumpsys package PKG` and `dumpsys package packages` in the
// format of Android 13.
func (p *Phone) dumpsys(out, errw io.Writer, args []string) int {
	switch safeArg(args, 0) {
	case "battery":
		level, temp, charging := p.sim.Battery()
		health := 2
		if temp >= 60 {
			health = 3
		}
		status := 3 // discharging
		if charging {
			status = 2
			if level >= 100 {
				status = 5 // full
			}
		}
		fmt.Fprintf(out, "Current Battery Service state:\n  AC powered: false\n  USB powered: %t\n  Wireless powered: false\n  Dock powered: false\n"+
			"  Max charging current: 500000\n  Max charging voltage: 5000000\n  Charge counter: %d\n  status: %d\n  health: %d\n"+
			"  present: true\n  level: %d\n  scale: 100\n  voltage: 4123\n  temperature: %d\n  technology: Li-ion\n",
			charging, level*40000, status, health, level, int(temp*10))
		return 0
	case "power":
		awake, _ := p.sim.ScreenState()
		wake, display := "Asleep", "OFF"
		if awake {
			wake, display = "Awake", "ON"
		}
		fmt.Fprintf(out, "POWER MANAGER (dumpsys power)\n\nPower Manager State:\n  mDirty=0x0\n  mWakefulness=%s\n  mWakefulnessChanging=false\n  mIsPowered=true\n\nDisplay Power: state=%s\n", wake, display)
		return 0
	case "window":
		_, locked := p.sim.ScreenState()
		if safeArg(args, 1) != "policy" {
			fmt.Fprintln(out, "WINDOW MANAGER LAST ANR (dumpsys window lastanr)\n  <no ANR has occurred since boot>")
		}
		fmt.Fprintf(out, "WINDOW MANAGER POLICY STATE (dumpsys window policy)\n    mSafeMode=false mSystemReady=true mSystemBooted=true\n    mShowingDream=false isKeyguardShowing=%t\n    KeyguardServiceDelegate\n      showing=%t\n      inputRestricted=%t\n", locked, locked, locked)
		return 0
	case "package":
		if safeArg(args, 1) == "packages" {
			p.dumpPackages(out)
			return 0
		}
		// The installed version first, as Android lists it.
		pkg := safeArg(args, 1)
		v, err := p.sim.AppVersion(context.Background(), pkg)
		if err != nil {
			fmt.Fprintf(out, "Unable to find package: %s\n", pkg)
			return 0
		}
		fmt.Fprintf(out, "Packages:\n  Package [%s] (5a3c1e2):\n    userId=10123\n    pkg=Package{5a3c1e2 %s}\n    versionCode=%d minSdk=26 targetSdk=33\n    versionName=%s\n    flags=[ HAS_CODE ALLOW_CLEAR_USER_DATA ]\n",
			pkg, pkg, v.VersionCode, v.VersionName)
		return 0
	}
	fmt.Fprintf(errw, "Can't find service: %s\n", safeArg(args, 0))
	return 0
}

// df answers `df [path]` as toybox does, with /data 64 GB of which 48 GB
// are free.
func (p *Phone) df(out io.Writer, args []string) int {
	fmt.Fprintln(out, "Filesystem       1K-blocks    Used Available Use% Mounted on")
	rows := map[string]string{
		"/data": "/dev/block/dm-45  62914560 12582912  50331648  21% /data",
	}
	if len(args) == 0 {
		fmt.Fprintln(out, rows["/data"])
		return 0
	}
	code := 0
	for _, a := range args {
		if r, ok := rows[strings.TrimSuffix(a, "/")]; ok {
			fmt.Fprintln(out, r)
		} else {
			code = 1
		}
	}
	return code
}

// dumpPackages writes `dumpsys package packages` as Android 13 does: every
// package of the phone with its settings, the system image's (the
// framework, the launcher, settings) flagged SYSTEM, and the phone's apps
// (capture.Simulated.Apps: Options.Packages or, when nil, the shop app and
// the packages of Options.AppVersions, and the input method) installed
// from the store, each with its versionCode and versionName (null when it
// has none).
func (p *Phone) dumpPackages(out io.Writer) {
	fmt.Fprintln(out, "Packages:")
	sys := []struct {
		pkg, path, name string
		code            int64
		uid             int
	}{
		{"android", "/system/framework/framework-res.apk", "13", 33, 1000},
		{capture.SimLauncher, "/system_ext/priv-app/Launcher3QuickStep", "13", 33, 10098},
		{"com.android.settings", "/system_ext/priv-app/Settings", "13", 33, 1000},
	}
	for _, a := range sys {
		writePackage(out, a.pkg, a.uid, a.path, a.code, a.name, "SYSTEM HAS_CODE ALLOW_CLEAR_USER_DATA", "2008-12-31 16:00:00", "")
	}
	for i, v := range p.sim.Apps() {
		path := fmt.Sprintf("/data/app/~~Zq3v1Zf%02dy2pX9rWcVbL7g==/%s-5oZ2Yx1qQy6Vv3d9pQm0Zw==", i, v.Package)
		writePackage(out, v.Package, 10150+i, path, v.VersionCode, v.VersionName, "HAS_CODE ALLOW_CLEAR_USER_DATA ALLOW_BACKUP", "2023-11-02 10:15:42", "com.android.vending")
	}
}

// writePackage writes one package of `dumpsys package packages`.
func writePackage(out io.Writer, pkg string, uid int, path string, code int64, name, flags, installed, installer string) {
	if name == "" {
		name = "null"
	}
	id := fmt.Sprintf("%07x", uint32(uid)*2654435761%0xfffffff)
	fmt.Fprintf(out, "  Package [%s] (%s):\n    userId=%d\n    pkg=Package{%s %s}\n    codePath=%s\n    resourcePath=%s\n"+
		"    legacyNativeLibraryDir=%s/lib\n    extractNativeLibs=false\n    primaryCpuAbi=arm64-v8a\n    secondaryCpuAbi=null\n    cpuAbiOverride=null\n"+
		"    versionCode=%d minSdk=26 targetSdk=33\n    minExtensionVersions=[]\n    versionName=%s\n    usesNonSdkApi=false\n    splits=[base]\n"+
		"    apkSigningVersion=3\n    flags=[ %s ]\n    privateFlags=[ PRIVATE_FLAG_ACTIVITIES_RESIZE_MODE_RESIZEABLE_VIA_SDK_VERSION ALLOW_AUDIO_PLAYBACK_CAPTURE ]\n"+
		"    forceQueryable=false\n    queriesPackages=[]\n    dataDir=/data/user/0/%s\n    supportsScreens=[small, medium, large, xlarge, resizeable, anyDensity]\n"+
		"    timeStamp=%s\n    lastUpdateTime=%s\n",
		pkg, id, uid, id, pkg, path, path, path, code, name, flags, pkg, installed, installed)
	if installer != "" {
		fmt.Fprintf(out, "    installerPackageName=%s\n", installer)
	}
	fmt.Fprintf(out, "    signatures=PackageSignatures{%s version:3, signatures:[8e6b7c1d], past signatures:[]}\n    installPermissionsFixed=true\n"+
		"    pkgFlags=[ %s ]\n    requested permissions:\n      android.permission.INTERNET\n    install permissions:\n      android.permission.INTERNET: granted=true\n"+
		"    User 0: ceDataInode=%d installed=true hidden=false suspended=false distractionFlags=0 stopped=false notLaunched=false enabled=0 instant=false virtual=false\n"+
		"      gids=[3003]\n      runtime permissions:\n",
		id, flags, 100000+uid)
}
