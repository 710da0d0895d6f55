package agent

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/capture"
)

// Runtime settings the coordinator can change without a restart (control
// config, or the hello reply's settings). Values are strings.
const (
	// SettingLogLevel: trace, debug, info, warn or error.
	SettingLogLevel = "log_level"
	// SettingConcurrency: jobs run at once, 1 or more.
	SettingConcurrency = "concurrency"
	// SettingOpLogText: "true" keeps typed text in the operation log.
	SettingOpLogText = "capture.oplog_text"
	// SettingInteractiveIdle: how long an interactive job waits for its
	// next step when its task does not say (a Go duration).
	SettingInteractiveIdle = "capture.interactive_idle"
)

var settingKeys = []string{SettingConcurrency, SettingInteractiveIdle, SettingOpLogText, SettingLogLevel}

// applySettings checks every setting in m, then applies them all and, with
// persist, keeps the merged settings in the state directory. An empty value
// removes a setting (back to the configured value on the next start).
func (a *Agent) applySettings(m map[string]string, persist bool) error {
	if len(m) == 0 {
		return fmt.Errorf("apply settings: no settings given")
	}
	type change func()
	var changes []change
	var problems []string
	rehello := false
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		if v == "" {
			continue
		}
		switch k {
		case SettingLogLevel:
			lvl, err := zerolog.ParseLevel(v)
			if err != nil || v != lvl.String() || lvl < zerolog.TraceLevel || lvl > zerolog.ErrorLevel {
				problems = append(problems, fmt.Sprintf("%s: want trace, debug, info, warn or error, got %q", k, v))
				continue
			}
			changes = append(changes, func() {
				if a.opts.LogLevel != nil {
					a.opts.LogLevel.Set(lvl)
				}
			})
		case SettingConcurrency:
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 64 {
				problems = append(problems, fmt.Sprintf("%s: want 1 to 64, got %q", k, v))
				continue
			}
			rehello = true
			changes = append(changes, func() { a.slots = n })
		case SettingOpLogText:
			b, err := strconv.ParseBool(v)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: want true or false, got %q", k, v))
				continue
			}
			changes = append(changes, func() {
				a.oplogTxt = b
				if c, ok := a.opts.Phones.(OpLogConfigurer); ok {
					c.SetOpLogOptions(capture.OpLogOptions{IncludeText: b})
				}
			})
		case SettingInteractiveIdle:
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				problems = append(problems, fmt.Sprintf("%s: want a positive duration, got %q", k, v))
				continue
			}
			changes = append(changes, func() { a.idle = d })
		default:
			problems = append(problems, fmt.Sprintf("unknown setting %q (known: %s)", k, strings.Join(settingKeys, ", ")))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("apply settings: %s", strings.Join(problems, "; "))
	}
	a.mu.Lock()
	for _, c := range changes {
		c()
	}
	merged := maps.Clone(a.settings)
	for k, v := range m {
		if v == "" {
			delete(merged, k)
		} else {
			merged[k] = v
		}
	}
	a.settings = merged
	a.mu.Unlock()
	if persist {
		a.log.Info().Interface("settings", m).Msg("settings changed")
		if a.opts.StateDir != "" {
			if err := saveSettings(a.opts.StateDir, merged); err != nil {
				return fmt.Errorf("apply settings: %w", err)
			}
		}
	}
	if rehello {
		a.kickHello() // the coordinator learns the new slot count
	}
	return nil
}

// Settings returns the runtime settings in force.
func (a *Agent) Settings() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.settings)
}

// LevelSwitch is a zerolog writer whose minimum level can change while the
// program runs: build the root logger on it at trace level
// (zerolog.New(sw).Level(zerolog.TraceLevel)) and turn the switch.
type LevelSwitch struct {
	w     io.Writer
	level atomic.Int32
}

var _ zerolog.LevelWriter = (*LevelSwitch)(nil)

// NewLevelSwitch returns a switch writing to w at lvl.
func NewLevelSwitch(w io.Writer, lvl zerolog.Level) *LevelSwitch {
	s := &LevelSwitch{w: w}
	s.Set(lvl)
	return s
}

// Set changes the minimum level.
func (s *LevelSwitch) Set(lvl zerolog.Level) { s.level.Store(int32(lvl)) }

// Level returns the minimum level.
func (s *LevelSwitch) Level() zerolog.Level { return zerolog.Level(s.level.Load()) }

// Write writes p unfiltered (no level known).
func (s *LevelSwitch) Write(p []byte) (int, error) { return s.w.Write(p) }

// WriteLevel writes p when lvl is at or above the minimum level.
func (s *LevelSwitch) WriteLevel(lvl zerolog.Level, p []byte) (int, error) {
	if lvl < s.Level() && lvl != zerolog.NoLevel {
		return len(p), nil
	}
	if lw, ok := s.w.(zerolog.LevelWriter); ok {
		return lw.WriteLevel(lvl, p)
	}
	return s.w.Write(p)
}
