package capture

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

// The simulated battery (docs/capture.md, Phone facts): every operation
// warms it by SimWarmPerOp °C, up to SimWorkMaxC (the phone throttles), and,
// unplugged, drains it by SimDrainPerOp percent; it cools towards
// SimAmbientC (halving its excess every SimCoolHalfLife) and, plugged in,
// charges by SimChargePerMinute. Work alone never makes it rest under the
// default limits; SetBattery sets any level and temperature.
const (
	SimDrainPerOp      = 0.02
	SimWarmPerOp       = 0.05
	SimWorkMaxC        = 41.0
	SimAmbientC        = 28.0
	SimCoolHalfLife    = 90 * time.Second
	SimChargePerMinute = 0.5
	simStartLevel      = 80
	simStartTempC      = 30
)

// simBattery is the simulated battery's state as last brought up to date.
type simBattery struct {
	set      bool
	level    float64
	tempC    float64
	charging bool
	ops      int       // operations of the history accounted for
	at       time.Time // when last brought up to date
}

// batteryLocked brings the battery up to date: the operations since the
// last update drain and warm it, the time since cools and charges it.
func (s *Simulated) batteryLocked(now time.Time) *simBattery {
	b := &s.bat
	if !b.set {
		*b = simBattery{set: true, level: simStartLevel, tempC: simStartTempC, charging: true, at: now}
	}
	if work := len(s.history) - b.ops; work > 0 {
		if !b.charging {
			b.level -= float64(work) * SimDrainPerOp
		}
		if b.tempC < SimWorkMaxC {
			b.tempC = min(SimWorkMaxC, b.tempC+float64(work)*SimWarmPerOp)
		}
		b.ops = len(s.history)
	}
	if idle := now.Sub(b.at); idle > 0 {
		b.tempC = SimAmbientC + (b.tempC-SimAmbientC)*math.Pow(0.5, idle.Seconds()/SimCoolHalfLife.Seconds())
		if b.charging {
			b.level += idle.Minutes() * SimChargePerMinute
		}
		b.at = now
	}
	b.level = min(100, max(0, b.level))
	return b
}

// SetBattery sets the simulated battery's level (percent) and temperature
// (°C), from which it drains, warms, cools and charges again.
func (s *Simulated) SetBattery(level int, tempC float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.batteryLocked(time.Now())
	b.level, b.tempC = float64(min(100, max(0, level))), tempC
}

// SetCharging plugs the simulated phone into a charger or out of it (a
// new phone is charging).
func (s *Simulated) SetCharging(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batteryLocked(time.Now()).charging = on
}

// Battery returns the simulated battery's level (percent), temperature
// (°C) and whether it charges, brought up to date.
func (s *Simulated) Battery() (level int, tempC float64, charging bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.batteryLocked(time.Now())
	return int(b.level), math.Round(b.tempC*10) / 10, b.charging
}

// Facts returns the simulated phone's facts: Android 14 (SDK 34), its
// screen size at 320 dpi, its battery (drained and warmed by the work
// done, see SimDrainPerOp), its screen and keyguard, 8 GiB free, the
// input method when it has one, and its apps (Apps). An unplugged phone
// fails.
func (s *Simulated) Facts(ctx context.Context) (protocol.PhoneFacts, error) {
	if err := ctxErr(ctx); err != nil {
		return protocol.PhoneFacts{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unplugged {
		return protocol.PhoneFacts{}, fmt.Errorf("read facts of %s: %w", s.serial, ErrUnplugged)
	}
	now := time.Now()
	b := s.batteryLocked(now)
	level := int(b.level)
	temp := math.Round(b.tempC*10) / 10
	charging := b.charging
	health := "good"
	switch {
	case temp >= 60:
		health = "overheat"
	case temp < 0:
		health = "cold"
	}
	on, locked := s.awake, s.locked
	free := int64(8192)
	f := protocol.PhoneFacts{
		AndroidVersion: "14", SDK: 34,
		Fingerprint: "edgeagent/simphone/sim:14/SIM1.0/1:user/release-keys",
		ScreenWidth: s.w, ScreenHeight: s.h, Density: 320,
		BatteryLevel: &level, BatteryTempC: &temp, Charging: &charging, BatteryHealth: health,
		ScreenOn: &on, Locked: &locked, FreeStorageMB: &free,
		Locale: "ja-JP", TimeZone: "Asia/Tokyo",
		Apps:            s.appsLocked(),
		ReadAtUnixMilli: now.UnixMilli(),
	}
	if s.ime {
		f.IME = IMEPackage
	}
	return f, nil
}

// Apps returns the apps of the simulated phone that its facts list (the
// apps installed beside the system image, as a phone's dump of its
// packages tells them): SimOptions.Packages without the launcher, or,
// when every package counts as installed, SimShop and the packages of
// SimOptions.AppVersions; and the input method when it has one. Each has
// its version (SimOptions.AppVersions, else SimAppVersion); sorted by
// package.
func (s *Simulated) Apps() []protocol.AppVersion {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appsLocked()
}

func (s *Simulated) appsLocked() []protocol.AppVersion {
	names := map[string]bool{}
	if s.packages != nil {
		for p, ok := range s.packages {
			if ok && p != SimLauncher {
				names[p] = true
			}
		}
	} else {
		names[SimShop] = true
		for p := range s.versions {
			if s.installedLocked(p) {
				names[p] = true
			}
		}
	}
	if s.ime {
		names[IMEPackage] = true
	}
	apps := make([]protocol.AppVersion, 0, len(names))
	for _, p := range slices.Sorted(maps.Keys(names)) {
		v, ok := s.versions[p]
		if !ok {
			v = SimAppVersion
		}
		v.Package = p
		apps = append(apps, v)
	}
	return apps
}
