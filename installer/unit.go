package installer

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/systemd"
)

// UnitOptions are what `edgeagent install` fills into the systemd unit.
type UnitOptions struct {
	// Executable is the absolute path of the edgeagent binary.
	Executable string
	// ConfigPath is the absolute path of the config file.
	ConfigPath string
	// User is the account the service runs as. With the default user
	// (edgeagent) the unit also names its group; with another, the user's
	// primary group applies.
	User string
	// StateDir is the config's state_dir. A directory other than
	// /var/lib/edgeagent is made writable in the sandbox (ReadWritePaths).
	// Empty means the default.
	StateDir string
	// StopTimeout raises TimeoutStopSec when it is longer than the unit's.
	StopTimeout time.Duration
}

// hiddenDirs are the directories the unit's sandbox hides or replaces:
// ProtectHome=yes makes the first three inaccessible, PrivateTmp=yes gives
// the service empty /tmp and /var/tmp.
var hiddenDirs = []struct{ dir, by string }{
	{"/home", "ProtectHome=yes"},
	{"/root", "ProtectHome=yes"},
	{"/run/user", "ProtectHome=yes"},
	{"/tmp", "PrivateTmp=yes"},
	{"/var/tmp", "PrivateTmp=yes"},
}

var userName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,31}$`)

// RenderUnit returns the systemd unit for opts: systemd/edgeagent.service
// with its ExecStart, User, Group and TimeoutStopSec set and, for a state
// directory elsewhere, a ReadWritePaths line. Rendered with the unit's own
// defaults it returns the file unchanged. It refuses paths the service's
// sandbox would hide from it.
func RenderUnit(opts UnitOptions) (string, error) {
	var errs []error
	check := func(what, p, instead string) {
		switch {
		case !path.IsAbs(p):
			errs = append(errs, fmt.Errorf("%s %q: must be an absolute path", what, p))
		case strings.ContainsAny(p, "\n\r\x00"):
			errs = append(errs, fmt.Errorf("%s %q: contains a line break or NUL", what, p))
		case strings.Contains(p, "{{"):
			errs = append(errs, fmt.Errorf("%s %q: contains {{", what, p))
		default:
			clean := path.Clean(p)
			for _, h := range hiddenDirs {
				if clean == h.dir || strings.HasPrefix(clean, h.dir+"/") {
					errs = append(errs, fmt.Errorf("%s %s is under %s, which the service cannot see (%s); use %s instead", what, p, h.dir, h.by, instead))
				}
			}
		}
	}
	check("executable", opts.Executable, "a copy in /usr/local/bin")
	check("config", opts.ConfigPath, "/etc/edgeagent/config.yaml")
	stateDir := ""
	if opts.StateDir != "" && path.Clean(opts.StateDir) != systemd.AgentStateDir {
		stateDir = path.Clean(opts.StateDir)
		check("state directory", stateDir, "the default, /var/lib/edgeagent")
	}
	if !userName.MatchString(opts.User) {
		errs = append(errs, fmt.Errorf("user %q: not a valid user name", opts.User))
	}
	if len(errs) > 0 {
		return "", fmt.Errorf("render unit: %w", errors.Join(errs...))
	}

	var b strings.Builder
	section := ""
	for line := range strings.Lines(systemd.AgentUnit) {
		key, _, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		if strings.HasPrefix(line, "[") {
			section = strings.TrimSpace(line)
		}
		if section != "[Service]" {
			b.WriteString(line)
			continue
		}
		switch key {
		case "ExecStart":
			fmt.Fprintf(&b, "ExecStart=%s run -c %s\n", unitArg(opts.Executable, true), unitArg(opts.ConfigPath, true))
		case "User":
			fmt.Fprintf(&b, "User=%s\n", opts.User)
		case "Group":
			if opts.User == systemd.AgentUser {
				b.WriteString(line)
			}
		case "StateDirectoryMode":
			b.WriteString(line)
			if stateDir != "" {
				fmt.Fprintf(&b, "ReadWritePaths=%s\n", unitArg(stateDir, false))
			}
		case "TimeoutStopSec":
			current, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(strings.TrimSuffix(line, "\n"), "TimeoutStopSec=")))
			if err != nil {
				return "", fmt.Errorf("render unit: parse TimeoutStopSec of systemd/edgeagent.service: %w", err)
			}
			if opts.StopTimeout > current {
				fmt.Fprintf(&b, "TimeoutStopSec=%ds\n", int((opts.StopTimeout+time.Second-1)/time.Second))
			} else {
				b.WriteString(line)
			}
		default:
			b.WriteString(line)
		}
	}
	return b.String(), nil
}

// unitArg quotes s as one word of a unit setting: specifiers (%) and, in
// a command line (exec), variables ($) are escaped, and s is double-quoted
// when it holds a space, a quote, a backslash or a semicolon.
func unitArg(s string, exec bool) string {
	s = strings.ReplaceAll(s, "%", "%%")
	if exec {
		s = strings.ReplaceAll(s, "$", "$$")
	}
	if !strings.ContainsAny(s, " \t\"'\\;") {
		return s
	}
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	return `"` + s + `"`
}
