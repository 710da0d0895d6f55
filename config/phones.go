package config

import (
	"math"
	"strings"
	"time"
)

// Phones configures how the agent watches its phones: their facts and when
// they rest (docs/capture.md, Phone facts and Resting phones).
type Phones struct {
	// FactsInterval is how often each phone's facts are read again after
	// they were read at connect, at least 1s. Default 5m.
	FactsInterval Duration `yaml:"facts_interval" json:"facts_interval"`
	// Rest says when a phone rests: it is not offered jobs until it has
	// recovered.
	Rest Rest `yaml:"rest" json:"rest"`
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

func defaultPhones() Phones {
	return Phones{
		FactsInterval: Duration(5 * time.Minute),
		Rest: Rest{MaxTempC: 45, ResumeTempC: 40, MinBattery: 15, ResumeBattery: 30, ChargedBattery: 90,
			ChargeHookTimeout: Duration(30 * time.Second)},
	}
}

func (p Phones) validate(ps *Problems, path string) {
	if p.FactsInterval < Duration(time.Second) {
		ps.add(path+".facts_interval", "must be at least 1s, got %s", p.FactsInterval)
	}
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
}
