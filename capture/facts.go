package capture

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

// FactsReader is implemented by phones that can read their facts
// (docs/capture.md, Phone facts): ADBDevice and Simulated.
type FactsReader interface {
	Facts(ctx context.Context) (protocol.PhoneFacts, error)
}

var (
	_ FactsReader = (*ADBDevice)(nil)
	_ FactsReader = (*Simulated)(nil)
)

// factsMark starts each command's section in the output of FactsScript.
const factsMark = "@@edgeagent-facts "

// The commands whose output FactsScript collects, in order. Each is named
// in the errors of ParseFacts.
var factsCommands = []string{
	"getprop ro.build.version.release",
	"getprop ro.build.version.sdk",
	"getprop ro.build.fingerprint",
	"wm size",
	"wm density",
	"dumpsys battery",
	"dumpsys power",
	"dumpsys window policy",
	"df /data",
	"getprop persist.sys.locale",
	"getprop persist.sys.timezone",
	packagesSection,
}

// factsCommandLines are the command lines of the commands of
// factsCommands whose name is not the command line itself.
var factsCommandLines = map[string]string{
	packagesSection: PackagesCommand,
}

// FactsScript is the one shell command line that reads a phone's facts:
// every command of factsCommands after a marker line naming it, separated
// by ';' so that one failing command leaves the others' output.
func FactsScript() string {
	parts := make([]string, 0, 2*len(factsCommands))
	for _, c := range factsCommands {
		line := c
		if l, ok := factsCommandLines[c]; ok {
			line = l
		}
		parts = append(parts, "echo '"+factsMark+c+"'", line)
	}
	return strings.Join(parts, "; ")
}

// ParseFacts reads the output of FactsScript. Every fact whose command
// printed something it understands is set; a fact it cannot read stays
// unset, and the error (errors.Join of one error per command) names each
// command whose output was not understood, quoting the start of that
// output. It never panics, whatever the output.
func ParseFacts(out []byte) (protocol.PhoneFacts, error) {
	sections := map[string]string{}
	var cur string
	var b strings.Builder
	flush := func() {
		if cur != "" {
			sections[cur] = b.String()
		}
		b.Reset()
	}
	for line := range strings.Lines(string(out)) {
		t := strings.TrimRight(line, "\r\n")
		if name, ok := strings.CutPrefix(t, factsMark); ok {
			flush()
			cur = name
			continue
		}
		b.WriteString(line)
	}
	flush()
	var f protocol.PhoneFacts
	var errs []error
	fail := func(cmd string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", cmd, fmt.Sprintf(format, args...)))
	}
	for _, cmd := range factsCommands {
		s, ok := sections[cmd]
		if !ok {
			fail(cmd, "no output (the command did not run)")
			continue
		}
		val := strings.TrimSpace(s)
		var err error
		switch cmd {
		case "getprop ro.build.version.release":
			f.AndroidVersion = val
			if val == "" || strings.ContainsAny(val, "\n ") {
				f.AndroidVersion = ""
				err = badOutput(val)
			}
		case "getprop ro.build.version.sdk":
			f.SDK, err = parsePositive(val, 1000)
		case "getprop ro.build.fingerprint":
			f.Fingerprint = val
			if val == "" || strings.Contains(val, "\n") {
				f.Fingerprint = ""
				err = badOutput(val)
			}
		case "wm size":
			f.ScreenWidth, f.ScreenHeight, err = parseWMSize(val)
		case "wm density":
			f.Density, err = parseWMDensity(val)
		case "dumpsys battery":
			err = parseBattery(val, &f)
		case "dumpsys power":
			f.ScreenOn, err = parsePower(val)
		case "dumpsys window policy":
			f.Locked, err = parseKeyguard(val)
		case "df /data":
			f.FreeStorageMB, err = parseDF(val)
		case "getprop persist.sys.locale":
			// Unset on a phone never given a language: not known.
			f.Locale, err = parseProp(val, localeRE)
		case "getprop persist.sys.timezone":
			f.TimeZone, err = parseProp(val, timeZoneRE)
		case packagesSection:
			f.Apps, err = ParsePackages([]byte(s))
		}
		if err != nil {
			fail(cmd, "%v", err)
		}
	}
	return f, errors.Join(errs...)
}

var (
	localeRE   = regexp.MustCompile(`^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$`)
	timeZoneRE = regexp.MustCompile(`^[A-Za-z0-9_+\-/]{1,64}$`)
)

// parseProp reads a one-word property: empty is not known (no error), a
// value that does not fit re is bad output.
func parseProp(val string, re *regexp.Regexp) (string, error) {
	if val == "" {
		return "", nil
	}
	if !re.MatchString(val) {
		return "", badOutput(val)
	}
	return val, nil
}

// badOutput is the error of output that is not understood, quoting its
// start.
func badOutput(s string) error {
	if s == "" {
		return errors.New("no output")
	}
	return fmt.Errorf("output not understood: %q", clipText(s, 120))
}

func parsePositive(s string, limit int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > limit {
		return 0, badOutput(s)
	}
	return n, nil
}

// overriding returns the value after "Override <what>:" when present, else
// after "Physical <what>:" — the override is what apps and taps see.
func overriding(out, what string) (string, bool) {
	var phys, over string
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "Physical "+what+":"); ok {
			phys = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "Override "+what+":"); ok {
			over = strings.TrimSpace(v)
		}
	}
	if over != "" {
		return over, true
	}
	return phys, phys != ""
}

// parseWMSize reads `wm size`: "Physical size: 1080x2400", and an
// "Override size: 720x1600" line when one is set.
func parseWMSize(out string) (w, h int, err error) {
	v, ok := overriding(out, "size")
	if !ok {
		return 0, 0, badOutput(out)
	}
	ws, hs, ok := strings.Cut(v, "x")
	if !ok {
		return 0, 0, badOutput(out)
	}
	w, err1 := parsePositive(ws, 100000)
	h, err2 := parsePositive(hs, 100000)
	if err1 != nil || err2 != nil {
		return 0, 0, badOutput(out)
	}
	return w, h, nil
}

// parseWMDensity reads `wm density`: "Physical density: 420", and an
// "Override density: 480" line when one is set.
func parseWMDensity(out string) (int, error) {
	v, ok := overriding(out, "density")
	if !ok {
		return 0, badOutput(out)
	}
	n, err := parsePositive(v, 10000)
	if err != nil {
		return 0, badOutput(out)
	}
	return n, nil
}

// batteryHealth names the BatteryManager.BATTERY_HEALTH_* values.
var batteryHealth = map[int]string{
	1: "unknown", 2: "good", 3: "overheat", 4: "dead", 5: "over_voltage", 6: "failure", 7: "cold",
}

// parseBattery reads `dumpsys battery` ("Current Battery Service state:"
// then "  key: value" lines): level and scale, temperature in tenths of a
// degree, health, and AC/USB/Wireless/Dock powered. Lines it does not know
// are skipped; the error names the facts it could not read.
func parseBattery(out string, f *protocol.PhoneFacts) error {
	kv := map[string]string{}
	for line := range strings.Lines(out) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if _, dup := kv[k]; !dup {
			kv[k] = strings.TrimSpace(v)
		}
	}
	var missing []string
	level, lerr := strconv.Atoi(kv["level"])
	scale := 100
	if s, ok := kv["scale"]; ok {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			scale = n
		}
	}
	if lerr == nil && level >= 0 && level <= scale {
		pct := level * 100 / scale
		f.BatteryLevel = &pct
	} else {
		missing = append(missing, "level")
	}
	if t, err := strconv.Atoi(kv["temperature"]); err == nil && t > -500 && t < 2000 {
		c := float64(t) / 10
		f.BatteryTempC = &c
	} else {
		missing = append(missing, "temperature")
	}
	if h, err := strconv.Atoi(kv["health"]); err == nil {
		if name, ok := batteryHealth[h]; ok {
			f.BatteryHealth = name
		} else {
			f.BatteryHealth = "unknown"
		}
	}
	seen, powered := false, false
	for _, k := range []string{"AC powered", "USB powered", "Wireless powered", "Dock powered"} {
		switch kv[k] {
		case "true":
			seen, powered = true, true
		case "false":
			seen = true
		}
	}
	if seen {
		f.Charging = &powered
	} else {
		missing = append(missing, "powered")
	}
	if len(missing) == 0 {
		return nil
	}
	if len(missing) == 3 {
		return badOutput(out)
	}
	return fmt.Errorf("no %s in the output", strings.Join(missing, ", "))
}

// parsePower reads whether the screen is on from `dumpsys power`:
// mWakefulness=Awake|Asleep|Dozing|Dreaming (Android 5 and later), else
// "Display Power: state=ON|OFF|DOZE", else mScreenOn=true|false (Android
// 4).
func parsePower(out string) (*bool, error) {
	for _, key := range []string{"mWakefulness=", "Display Power: state=", "mScreenOn="} {
		for line := range strings.Lines(out) {
			v, ok := strings.CutPrefix(strings.TrimSpace(line), key)
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			if i := strings.IndexAny(v, " \t"); i >= 0 {
				v = v[:i]
			}
			var on bool
			switch strings.ToLower(v) {
			case "awake", "on", "true":
				on = true
			case "asleep", "dozing", "dreaming", "off", "doze", "doze_suspend", "false":
				on = false
			default:
				return nil, fmt.Errorf("%s%q not understood", key, clipText(v, 40))
			}
			return &on, nil
		}
	}
	return nil, fmt.Errorf("no mWakefulness, Display Power or mScreenOn in the output: %w", badOutput(out))
}

// parseKeyguard reads whether the keyguard shows from `dumpsys window
// policy`: mShowingLockscreen (Android 9 and older), isStatusBarKeyguard,
// mDreamingLockscreen, or the KeyguardServiceDelegate's "showing=".
func parseKeyguard(out string) (*bool, error) {
	for _, key := range []string{"mShowingLockscreen=", "isStatusBarKeyguard=", "mDreamingLockscreen=", "showing="} {
		for line := range strings.Lines(out) {
			for field := range strings.FieldsSeq(line) {
				v, ok := strings.CutPrefix(field, key)
				if !ok {
					continue
				}
				switch v {
				case "true":
					t := true
					return &t, nil
				case "false":
					f := false
					return &f, nil
				}
				return nil, fmt.Errorf("%s%q not understood", key, clipText(v, 40))
			}
		}
	}
	return nil, fmt.Errorf("no mShowingLockscreen, isStatusBarKeyguard, mDreamingLockscreen or showing in the output: %w", badOutput(out))
}

// parseDF reads the free space of /data in MB from `df /data`: toybox's
// "Filesystem 1K-blocks Used Available Use% Mounted on" (Android 7 and
// later) or toolbox's "Filesystem Size Used Free Blksize" with sizes such
// as 14.6G (Android 6 and older). A long filesystem name may wrap its
// line: the columns are counted from the end.
func parseDF(out string) (*int64, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		return nil, badOutput(out)
	}
	header := strings.Fields(lines[0])
	var fields []string
	for _, l := range lines[1:] {
		fields = append(fields, strings.Fields(l)...)
	}
	switch {
	case len(header) >= 4 && header[3] == "Available" && len(fields) >= 4:
		kb, err := strconv.ParseInt(fields[len(fields)-3], 10, 64)
		if err != nil || kb < 0 {
			return nil, badOutput(out)
		}
		mb := kb / 1024
		return &mb, nil
	case len(header) >= 4 && header[3] == "Free" && len(fields) >= 4:
		mb, err := parseSizeMB(fields[len(fields)-2])
		if err != nil {
			return nil, badOutput(out)
		}
		return &mb, nil
	}
	return nil, badOutput(out)
}

// parseSizeMB reads toolbox df's sizes: "14.6G", "512.0M", "100K", or a
// number of bytes.
func parseSizeMB(s string) (int64, error) {
	mult := 1.0 / (1 << 20)
	switch {
	case strings.HasSuffix(s, "G"):
		mult, s = 1024, strings.TrimSuffix(s, "G")
	case strings.HasSuffix(s, "M"):
		mult, s = 1, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "K"):
		mult, s = 1.0/1024, strings.TrimSuffix(s, "K")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v > 1e15 {
		return 0, fmt.Errorf("size %q not understood", s)
	}
	return int64(v * mult), nil
}

// Facts reads the phone's facts (docs/capture.md, Phone facts) in one
// shell command (FactsScript) and asks `pm path` whether the input method
// IMEPackage is installed. A fact that cannot be read stays unset and the
// error names its command; the facts read are returned with it. A phone
// that is not usable fails with a *PhoneStateError and no facts.
func (d *ADBDevice) Facts(ctx context.Context) (protocol.PhoneFacts, error) {
	var f protocol.PhoneFacts
	var perr error
	err := d.op(ctx, "read facts", d.opts.CaptureTimeout, func(ctx context.Context) error {
		res, err := d.shell(ctx, FactsScript())
		if err != nil {
			return err
		}
		f, perr = ParseFacts(res.Stdout)
		ime, ierr := d.installed(ctx, IMEPackage)
		if ierr != nil {
			perr = errors.Join(perr, fmt.Errorf("pm path %s: %w", IMEPackage, ierr))
		} else {
			d.mu.Lock()
			d.ime, d.imeKnown = ime, true
			d.mu.Unlock()
			if ime {
				f.IME = IMEPackage
			}
		}
		return nil
	})
	if err != nil {
		return protocol.PhoneFacts{}, err
	}
	f.ReadAtUnixMilli = time.Now().UnixMilli()
	if perr != nil {
		return f, fmt.Errorf("read facts of %s: %w", d.serial, perr)
	}
	return f, nil
}

// phoneNote is what the agent knows of a phone besides what the phone
// says of itself: its facts as last read, and why it rests.
type phoneNote struct {
	facts *protocol.PhoneFacts
	rest  string // reason it rests, "" when it does not
}

// infoLocked is d.Info() with the agent's hold applied (hold.go: a
// recovering or quarantined phone), the phone's facts, and state
// protocol.DeviceResting with its reason while it rests and is otherwise
// ready.
func (inv *Inventory) infoLocked(d Device) protocol.Device {
	info := inv.holdLocked(d.Info())
	n, ok := inv.notes[d.Serial()]
	if !ok {
		return info
	}
	if n.facts != nil {
		f := *n.facts
		info.Facts = &f
	}
	if n.rest != "" && info.State == protocol.DeviceReady {
		info.State, info.Reason = protocol.DeviceResting, n.rest
	}
	return info
}

// SetFacts records the facts of the phone with serial (Devices and the
// selectors see them); a phone not in the inventory is ignored. They are
// forgotten when the phone is removed.
func (inv *Inventory) SetFacts(serial string, f protocol.PhoneFacts) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if _, ok := inv.devs[serial]; !ok {
		return
	}
	n := inv.notes[serial]
	n.facts = &f
	inv.notes[serial] = n
	inv.signalLocked()
}

// SetResting makes the phone with serial rest with reason (docs/capture.md,
// Resting phones): while it is otherwise ready it is listed in state
// protocol.DeviceResting and no selector matches it. An empty reason ends
// the rest. A phone not in the inventory is ignored.
func (inv *Inventory) SetResting(serial, reason string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if _, ok := inv.devs[serial]; !ok {
		return
	}
	n := inv.notes[serial]
	if n.rest == reason {
		return
	}
	n.rest = reason
	inv.notes[serial] = n
	inv.signalLocked()
}

// Changed returns a channel closed at the next change of the inventory: a
// phone added, removed, released or changing state, facts, rest or hold.
func (inv *Inventory) Changed() <-chan struct{} {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.changed
}

// deviceProblem is StateProblem for a listed phone, with the reason of a
// phone the agent keeps from jobs (resting, recovering, quarantined).
func deviceProblem(d protocol.Device) error {
	if protocol.PlatformOf(d) == protocol.PlatformIOS && d.State != protocol.DeviceReady {
		// An iPhone's reason names what WebDriverAgent answered.
		e := &PhoneStateError{Serial: d.Serial, State: d.State, Platform: protocol.PlatformIOS}
		if d.Reason != "" {
			e.Err = errors.New(d.Reason)
		}
		return e
	}
	if d.Reason != "" && (d.State == protocol.DeviceResting || d.State == protocol.DeviceRecovering || d.State == protocol.DeviceQuarantined) {
		return &PhoneStateError{Serial: d.Serial, State: d.State, Err: errors.New(d.Reason)}
	}
	return StateProblem(d.Serial, d.State)
}
