//go:build linux

package installer

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kardianos/service"

	"github.com/edgeagent/edgeagent/systemd"
)

const defaultUser = systemd.AgentUser

// Where the unit and the user's sysusers.d entry go. The package installs
// its copies under /usr/lib (/lib/systemd/system for the unit); install
// writes to /etc, which takes precedence.
const (
	unitPath        = "/etc/systemd/system/" + Name + ".service"
	packageUnitPath = "/lib/systemd/system/" + Name + ".service"
	sysusersPath    = "/etc/sysusers.d/" + Name + ".conf"
	packageSysusers = "/usr/lib/sysusers.d/" + Name + ".conf"
	configDir       = "/etc/edgeagent"
)

// checkPlatform fails unless systemd manages this machine.
func checkPlatform() error {
	if p := service.Platform(); p != "linux-systemd" {
		if p == "" {
			p = "none found"
		}
		return fmt.Errorf("set up service: systemd is not running on this machine (service manager: %s); edgeagent installs as a systemd service only", p)
	}
	return nil
}

// config returns the kardianos/service configuration: its systemd script is
// the rendered unit, which contains no template actions.
func (s *Service) config() (*service.Config, error) {
	cfg := s.serviceConfig()
	cfg.UserName = s.opts.User
	if s.opts.ConfigPath != "" {
		unit, err := s.unit()
		if err != nil {
			return nil, err
		}
		cfg.Option["SystemdScript"] = unit
	}
	return cfg, nil
}

func (s *Service) unit() (string, error) {
	return RenderUnit(UnitOptions{
		Executable:  s.opts.Executable,
		ConfigPath:  s.opts.ConfigPath,
		User:        s.opts.User,
		StateDir:    s.opts.StateDir,
		StopTimeout: s.opts.StopTimeout,
	})
}

func (s *Service) describe() (string, error) {
	unit, err := s.unit()
	if err != nil {
		return "", err
	}
	return "# " + unitPath + "\n" + unit, nil
}

// install creates the user (the default one) and the directories, writes
// the unit and enables it.
func (s *Service) install() error {
	if os.Geteuid() != 0 {
		return errors.New("must run as root")
	}
	if _, err := os.Stat(unitPath); err == nil {
		return fmt.Errorf("%s already exists; run edgeagent uninstall first", unitPath)
	}
	if s.opts.User == systemd.AgentUser {
		if err := createUser(); err != nil {
			return err
		}
	}
	u, err := user.Lookup(s.opts.User)
	if err != nil {
		return fmt.Errorf("look up user %s: %w", s.opts.User, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// /etc/edgeagent: root's, readable by the service's group. systemd's
	// ConfigurationDirectory= creates it root-owned, which the service
	// could not read.
	if err := makeDir(configDir, 0o750, 0, gid); err != nil {
		return err
	}
	stateDir := s.opts.StateDir
	if stateDir == "" {
		stateDir = systemd.AgentStateDir
	}
	if err := makeDir(stateDir, 0o700, uid, gid); err != nil {
		return err
	}
	return s.svc.Install() // writes unitPath, enables it, reloads systemd
}

// createUser creates the edgeagent system user from the packaged
// sysusers.d entry, or from the same entry written to /etc.
func createUser() error {
	conf := packageSysusers
	if _, err := os.Stat(conf); err != nil {
		conf = sysusersPath
		if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
			return fmt.Errorf("create sysusers.d directory: %w", err)
		}
		if err := os.WriteFile(conf, []byte(systemd.AgentSysusers), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", conf, err)
		}
	}
	if out, err := exec.Command("systemd-sysusers", conf).CombinedOutput(); err != nil {
		return fmt.Errorf("create user %s with systemd-sysusers: %w: %s", systemd.AgentUser, err, bytes.TrimSpace(out))
	}
	return nil
}

// makeDir creates dir with mode and owner unless it exists.
func makeDir(dir string, mode os.FileMode, uid, gid int) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}

// checkUninstall refuses a unit that install did not write.
func (s *Service) checkUninstall() error {
	if os.Geteuid() != 0 {
		return errors.New("must run as root")
	}
	if _, err := os.Stat(unitPath); err == nil {
		return nil
	}
	if _, err := os.Stat(packageUnitPath); err == nil {
		return fmt.Errorf("%s comes from the edgeagent package, not from edgeagent install; remove the package instead (apt remove edgeagent)", packageUnitPath)
	}
	return ErrNotInstalled
}

// uninstall disables the unit, removes it and the sysusers.d entry install
// wrote, and reloads systemd. The user and its directories stay.
func (s *Service) uninstall() error {
	if err := s.svc.Uninstall(); err != nil {
		return err
	}
	if b, err := os.ReadFile(sysusersPath); err == nil && strings.TrimSpace(string(b)) == strings.TrimSpace(systemd.AgentSysusers) {
		if err := os.Remove(sysusersPath); err != nil {
			return fmt.Errorf("remove %s: %w", sysusersPath, err)
		}
	}
	return nil
}

// stop runs systemctl stop, which returns once the unit has stopped (after
// at most TimeoutStopSec, when systemd kills what is left).
func (s *Service) stop() error { return s.svc.Stop() }

func isNoSuchService(error) bool { return false }
