package fakeadbd

import (
	"context"
	"fmt"
	"io"
	"strings"
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
// [policy]` and `dumpsys package PKG` in the format of Android 13.
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
