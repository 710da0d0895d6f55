package config

import (
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Phones configures how the agent watches its phones: their facts and when
// they rest (docs/capture.md, Phone facts and Resting phones).
type Phones struct {
	// FactsInterval is how often each phone's facts are read again after
	// they were read at connect, at least 1s. Default 5m.
	FactsInterval Duration `yaml:"facts_interval" json:"facts_interval"`
	// OpTimeout bounds each short operation on a phone, Android or
	// iPhone: tap, swipe (plus its duration), text (on an iPhone plus a
	// time per key), key, launch, force_stop, clear_data, open_url, wake,
	// unlock, rotate and the agent's other short calls on the phone; on
	// an iPhone also the recovery ladder's reconnect. An operation still
	// running after it fails with an error naming the timeout. Must be
	// positive. Default 20s.
	OpTimeout Duration `yaml:"op_timeout" json:"op_timeout"`
	// Rest says when a phone rests: it is not offered jobs until it has
	// recovered.
	Rest Rest `yaml:"rest" json:"rest"`
	// Recovery is the recovery ladder for a phone that is listed but does
	// not answer (docs/capture.md, Recovery).
	Recovery Recovery `yaml:"recovery" json:"recovery"`
	// Connect are network phones (wireless debugging), host:port, that
	// the agent connects with `adb connect` whenever the adb server does
	// not list them, with backoff (docs/capture.md, Network phones).
	// Network phones the server lists are connected again so too.
	Connect []string `yaml:"connect" json:"connect,omitempty"`
}

// Rest configures resting phones. A phone whose battery is hotter than
// MaxTempC, or whose battery level is under MinBattery, rests until it has
// cooled to ResumeTempC and charged to ResumeBattery.
type Rest struct {
	// MaxTempC is the battery temperature (°C) above which a phone rests;
	// 0 turns the temperature rule off. Default 45.
	MaxTempC float64 `yaml:"max_temp_c" json:"max_temp_c"`
	// ResumeTempC is the temperature a resting phone must cool to; at
	// most MaxTempC. Default 40.
	ResumeTempC float64 `yaml:"resume_temp_c" json:"resume_temp_c"`
	// MinBattery is the battery level (percent) under which a phone
	// rests; 0 turns the battery rule off. Default 15.
	MinBattery int `yaml:"min_battery" json:"min_battery"`
	// ResumeBattery is the level a resting phone must charge to; at least
	// MinBattery. Default 30.
	ResumeBattery int `yaml:"resume_battery" json:"resume_battery"`
	// ChargedBattery is the level at which a charging phone is reported
	// charged to the charge hook (event charged), so a smart plug can stop
	// charging; 0 never reports it. Default 90.
	ChargedBattery int `yaml:"charged_battery" json:"charged_battery"`
	// ChargeHook, when set, is a command run when a phone's charge policy
	// event happens: its words, where {serial} and {event} are replaced by
	// the phone's serial and the event (low_battery, charged, hot,
	// cooled). For smart plugs; see docs/capture.md, Resting phones.
	ChargeHook []string `yaml:"charge_hook" json:"charge_hook,omitempty"`
	// ChargeHookTimeout bounds one run of the charge hook. Default 30s.
	ChargeHookTimeout Duration `yaml:"charge_hook_timeout" json:"charge_hook_timeout"`
}

// Recovery configures the recovery ladder (docs/capture.md, Recovery).
type Recovery struct {
	// ProbeTimeout bounds the probe (`echo ok` on the phone) run before
	// each job and every ProbeInterval while idle. Default 5s.
	ProbeTimeout Duration `yaml:"probe_timeout" json:"probe_timeout"`
	// ProbeInterval is how often an idle phone (and a quarantined one) is
	// probed; 0 probes only before jobs. Default 1m.
	ProbeInterval Duration `yaml:"probe_interval" json:"probe_interval"`
	// Reboot turns on rung 2: a phone that still does not answer after a
	// reconnect is rebooted (`adb reboot`) and waited for until
	// sys.boot_completed=1, at most BootTimeout. Default false.
	Reboot bool `yaml:"reboot" json:"reboot"`
	// BootTimeout bounds the wait for a rebooted phone. Default 3m.
	BootTimeout Duration `yaml:"boot_timeout" json:"boot_timeout"`
	// QuarantineAfter is how many failed probes within Window quarantine
	// a phone. Default 3.
	QuarantineAfter int `yaml:"quarantine_after" json:"quarantine_after"`
	// Window is the time the failed probes are counted over. Default 10m.
	Window Duration `yaml:"window" json:"window"`
}

func defaultPhones() Phones {
	return Phones{
		FactsInterval: Duration(5 * time.Minute),
		OpTimeout:     Duration(20 * time.Second),
		Rest: Rest{MaxTempC: 45, ResumeTempC: 40, MinBattery: 15, ResumeBattery: 30, ChargedBattery: 90,
			ChargeHookTimeout: Duration(30 * time.Second)},
		Recovery: Recovery{
			ProbeTimeout: Duration(5 * time.Second), ProbeInterval: Duration(time.Minute),
			BootTimeout: Duration(3 * time.Minute), QuarantineAfter: 3, Window: Duration(10 * time.Minute),
		},
	}
}

func (p Phones) validate(ps *Problems, path string) {
	if p.FactsInterval < Duration(time.Second) {
		ps.add(path+".facts_interval", "must be at least 1s, got %s", p.FactsInterval)
	}
	positive(ps, path+".op_timeout", p.OpTimeout)
	r, rp := p.Rest, path+".rest"
	temp := func(key string, v float64) bool {
		if math.IsNaN(v) || v < 0 || v > 150 {
			ps.add(rp+"."+key, "must be a temperature from 0 (off) to 150 °C, got %v", v)
			return false
		}
		return true
	}
	level := func(key string, v int) bool {
		if v < 0 || v > 100 {
			ps.add(rp+"."+key, "must be a battery level from 0 to 100 percent, got %d", v)
			return false
		}
		return true
	}
	if temp("max_temp_c", r.MaxTempC) && temp("resume_temp_c", r.ResumeTempC) && r.MaxTempC > 0 && r.ResumeTempC > r.MaxTempC {
		ps.add(rp+".resume_temp_c", "must not be above max_temp_c (%v), got %v", r.MaxTempC, r.ResumeTempC)
	}
	if level("min_battery", r.MinBattery) && level("resume_battery", r.ResumeBattery) && r.ResumeBattery < r.MinBattery {
		ps.add(rp+".resume_battery", "must not be under min_battery (%d), got %d", r.MinBattery, r.ResumeBattery)
	}
	level("charged_battery", r.ChargedBattery)
	if len(r.ChargeHook) > 0 && strings.TrimSpace(r.ChargeHook[0]) == "" {
		ps.add(rp+".charge_hook[0]", "the command must not be empty")
	}
	positive(ps, rp+".charge_hook_timeout", r.ChargeHookTimeout)
	rc := p.Recovery
	cp := path + ".recovery"
	positive(ps, cp+".probe_timeout", rc.ProbeTimeout)
	nonNegative(ps, cp+".probe_interval", rc.ProbeInterval)
	positive(ps, cp+".boot_timeout", rc.BootTimeout)
	positive(ps, cp+".window", rc.Window)
	if rc.QuarantineAfter < 1 {
		ps.add(cp+".quarantine_after", "must be at least 1, got %d", rc.QuarantineAfter)
	}
	if rc.ProbeInterval > 0 && rc.ProbeTimeout >= rc.ProbeInterval {
		ps.add(cp+".probe_timeout", "%s must be shorter than probe_interval %s", rc.ProbeTimeout, rc.ProbeInterval)
	}
	seen := map[string]bool{}
	for i, addr := range p.Connect {
		key := fmt.Sprintf("%s.connect[%d]", path, i)
		host, port, err := net.SplitHostPort(addr)
		n, perr := strconv.Atoi(port)
		switch {
		case err != nil || host == "" || strings.ContainsAny(host, " /"):
			ps.add(key, "%q: want a network phone's host:port (as for adb connect), such as 192.168.1.20:5555", addr)
		case perr != nil || n < 1 || n > 65535:
			ps.add(key, "%q: the port must be from 1 to 65535", addr)
		case seen[addr]:
			ps.add(key, "%q is listed twice", addr)
		}
		seen[addr] = true
	}
}

// DefaultADBPort is the port every adb uses unless told otherwise; the
// agent's own adb server (adb.server_port) must not use it.
const DefaultADBPort = 5037

// ServerAddress is the address of the adb server the agent talks to:
// 127.0.0.1:ServerPort when the agent runs its own server, else Address.
func (a ADB) ServerAddress() string {
	if a.ServerPort != 0 {
		return "127.0.0.1:" + strconv.Itoa(a.ServerPort)
	}
	return a.Address
}

func (a ADB) validateServer(ps *Problems, path string) {
	switch {
	case a.ServerPort == 0:
	case a.ServerPort < 1 || a.ServerPort > 65535:
		ps.add(path+".server_port", "must be a port from 1 to 65535, got %d", a.ServerPort)
	case a.ServerPort == DefaultADBPort:
		ps.add(path+".server_port", "%d is the port every other adb (Android Studio, scrcpy) uses and may kill; pick another, such as 5038", DefaultADBPort)
	}
	if a.KeysDir == "" {
		return
	}
	if a.ServerPort == 0 {
		ps.add(path+".keys_dir", "only used for the agent's own adb server: set adb.server_port too (or set ADB_VENDOR_KEYS for the adb server you start)")
		return
	}
	fi, err := os.Stat(a.KeysDir)
	switch {
	case err != nil:
		ps.add(path+".keys_dir", "%s: %v", a.KeysDir, unwrapPathError(err))
	case !fi.IsDir():
		ps.add(path+".keys_dir", "%s is not a directory", a.KeysDir)
	}
}

// String renders the ladder's settings for logs.
func (r Recovery) String() string {
	return fmt.Sprintf("probe_timeout=%s probe_interval=%s reboot=%v quarantine_after=%d window=%s",
		r.ProbeTimeout, r.ProbeInterval, r.Reboot, r.QuarantineAfter, r.Window)
}
