package config

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// Phones configures how the agent looks after its phones.
type Phones struct {
	// Recovery is the recovery ladder for a phone that is listed but does
	// not answer (docs/capture.md, Recovery).
	Recovery Recovery `yaml:"recovery" json:"recovery"`
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
	return Phones{Recovery: Recovery{
		ProbeTimeout: Duration(5 * time.Second), ProbeInterval: Duration(time.Minute),
		BootTimeout: Duration(3 * time.Minute), QuarantineAfter: 3, Window: Duration(10 * time.Minute),
	}}
}

func (p Phones) validate(ps *Problems, path string) {
	r := p.Recovery
	rp := path + ".recovery"
	positive(ps, rp+".probe_timeout", r.ProbeTimeout)
	nonNegative(ps, rp+".probe_interval", r.ProbeInterval)
	positive(ps, rp+".boot_timeout", r.BootTimeout)
	positive(ps, rp+".window", r.Window)
	if r.QuarantineAfter < 1 {
		ps.add(rp+".quarantine_after", "must be at least 1, got %d", r.QuarantineAfter)
	}
	if r.ProbeInterval > 0 && r.ProbeTimeout >= r.ProbeInterval {
		ps.add(rp+".probe_timeout", "%s must be shorter than probe_interval %s", r.ProbeTimeout, r.ProbeInterval)
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
