//go:build windows

package installer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"github.com/kardianos/service"
	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/mgr"
)

// defaultUser runs the service as LocalSystem.
const defaultUser = ""

func checkPlatform() error { return nil }

// isLocalSystem reports whether user names the LocalSystem account, which
// the service control manager takes as an empty account name.
func isLocalSystem(user string) bool {
	switch strings.ToLower(user) {
	case "", "localsystem", `.\localsystem`, `nt authority\system`:
		return true
	}
	return false
}

func (s *Service) config() (*service.Config, error) {
	cfg := s.serviceConfig()
	if !isLocalSystem(s.opts.User) {
		cfg.UserName = s.opts.User
	}
	// Automatic start, delayed (set by configure) until boot has settled
	// and the network is more likely up.
	cfg.Option["StartType"] = service.ServiceStartAutomatic
	if s.opts.Password != "" {
		cfg.Option["Password"] = s.opts.Password
	}
	return cfg, nil
}

func (s *Service) describe() (string, error) {
	account := s.opts.User
	if isLocalSystem(account) {
		account = "LocalSystem"
	}
	var delays []string
	for _, d := range RecoveryDelays {
		delays = append(delays, d.String())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Windows service %s (%s)\n", Name, displayName)
	fmt.Fprintf(&b, "  command:   %s\n", describeCommand(s.opts.Executable, s.serviceConfig().Arguments))
	fmt.Fprintf(&b, "  account:   %s\n", account)
	fmt.Fprintf(&b, "  start:     automatic (delayed)\n")
	fmt.Fprintf(&b, "  recovery:  restart after %s; failure count reset after %s; also when it stops with an error\n", strings.Join(delays, ", then "), RecoveryResetPeriod)
	fmt.Fprintf(&b, "  stop:      drains; up to %s at system shutdown (preshutdown)\n", s.opts.StopTimeout)
	fmt.Fprintf(&b, "  data:      %s (SYSTEM and Administrators only%s)\n", dataDir(), accountNote(account))
	fmt.Fprintf(&b, "  log:       %s, rotated at 10 MiB, and the Application event log (source %s)\n", LogPath(Name), Name)
	return b.String(), nil
}

func accountNote(account string) string {
	if account == "LocalSystem" {
		return ""
	}
	return ", and " + account
}

// install secures the data directory, registers the service with the
// service control manager (with its event log source) and sets its
// recovery actions and preshutdown timeout.
func (s *Service) install() error {
	if err := secureDataDir(s.opts.User); err != nil {
		return err
	}
	if err := s.svc.Install(); err != nil {
		return err
	}
	if err := s.configure(); err != nil {
		if uerr := s.svc.Uninstall(); uerr != nil {
			err = errors.Join(err, fmt.Errorf("remove the half-installed service: %w", uerr))
		}
		return err
	}
	return nil
}

// serviceConfigPreshutdownInfo is SERVICE_PRESHUTDOWN_INFO.
type serviceConfigPreshutdownInfo struct {
	timeoutMillis uint32
}

// configure sets what kardianos/service does not: recovery actions with a
// growing delay, also on a stop with an error, a delayed automatic start
// and the preshutdown timeout. A service manager that does not know one of
// the last three settings (ERROR_INVALID_LEVEL, as under Wine) leaves a
// warning; any other refusal fails.
func (s *Service) configure() error {
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("connect to the service control manager: %w", err)
	}
	defer m.Disconnect()
	svc, err := m.OpenService(Name)
	if err != nil {
		return fmt.Errorf("open service: %w", err)
	}
	defer svc.Close()
	var actions []mgr.RecoveryAction
	for _, d := range RecoveryDelays {
		actions = append(actions, mgr.RecoveryAction{Type: mgr.ServiceRestart, Delay: d})
	}
	if err := svc.SetRecoveryActions(actions, uint32(RecoveryResetPeriod/time.Second)); err != nil {
		return fmt.Errorf("set recovery actions: %w", err)
	}
	optional := func(what string, err error) error {
		if errors.Is(err, windows.ERROR_INVALID_LEVEL) {
			s.warnings = append(s.warnings, fmt.Sprintf("the service manager does not support %s (%v); left unset", what, err))
			return nil
		}
		if err != nil {
			return fmt.Errorf("set %s: %w", what, err)
		}
		return nil
	}
	if err := optional("recovery on a stop with an error", svc.SetRecoveryActionsOnNonCrashFailures(true)); err != nil {
		return err
	}
	delayed := windows.SERVICE_DELAYED_AUTO_START_INFO{IsDelayedAutoStartUp: 1}
	if err := optional("a delayed automatic start", windows.ChangeServiceConfig2(svc.Handle,
		windows.SERVICE_CONFIG_DELAYED_AUTO_START_INFO, (*byte)(unsafe.Pointer(&delayed)))); err != nil {
		return err
	}
	info := serviceConfigPreshutdownInfo{timeoutMillis: uint32(s.opts.StopTimeout / time.Millisecond)}
	if err := optional("the preshutdown timeout", windows.ChangeServiceConfig2(svc.Handle,
		windows.SERVICE_CONFIG_PRESHUTDOWN_INFO, (*byte)(unsafe.Pointer(&info)))); err != nil {
		return err
	}
	return nil
}

// dataDir is %ProgramData%\edgeagent: the default config and state
// directory.
func dataDir() string { return filepath.Join(programData(), Name) }

func programData() string {
	if dir, err := windows.KnownFolderPath(windows.FOLDERID_ProgramData, 0); err == nil && dir != "" {
		return dir
	}
	if dir := os.Getenv("ProgramData"); dir != "" {
		return dir
	}
	return `C:\ProgramData`
}

// Access masks for the data directory's ACL.
const (
	fileAllAccess = "FA"
	fileModify    = "0x1301bf" // read, write, execute, delete
)

// secureDataDir creates the data directory and its logs folder and gives
// them a protected ACL: full control for SYSTEM and Administrators, modify
// for the service's account, nothing for anyone else (the default ACL of
// ProgramData lets every user read and create files).
func secureDataDir(user string) error {
	dir := dataDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	sddl := "D:PAI(A;OICI;" + fileAllAccess + ";;;SY)(A;OICI;" + fileAllAccess + ";;;BA)"
	if !isLocalSystem(user) {
		sid, _, _, err := windows.LookupSID("", user)
		if err != nil {
			return fmt.Errorf("look up account %s: %w", user, err)
		}
		sddl += "(A;OICI;" + fileModify + ";;;" + sid.String() + ")"
	}
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return fmt.Errorf("build ACL of %s: %w", dir, err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("build ACL of %s: %w", dir, err)
	}
	if err := windows.SetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil); err != nil {
		return fmt.Errorf("set ACL of %s: %w", dir, err)
	}
	return nil
}

func (s *Service) checkUninstall() error { return nil }

// uninstall deletes the service and its event log source.
func (s *Service) uninstall() error { return s.svc.Uninstall() }

// stopGrace is how much longer than the stop timeout Stop waits for the
// service to report it has stopped.
const stopGrace = 15 * time.Second

// stop sends the stop control and waits, at most the stop timeout and a
// grace period, until the service reports it has stopped. A service that
// is not running counts as stopped.
func (s *Service) stop() error {
	h, err := windows.OpenSCManager(nil, nil, windows.SC_MANAGER_CONNECT)
	if err != nil {
		return fmt.Errorf("connect to the service control manager: %w", err)
	}
	m := &mgr.Mgr{Handle: h}
	defer m.Disconnect()
	sh, err := windows.OpenService(h, windows.StringToUTF16Ptr(Name), windows.SERVICE_STOP|windows.SERVICE_QUERY_STATUS)
	if err != nil {
		return err
	}
	sv := &mgr.Service{Name: Name, Handle: sh}
	defer sv.Close()
	status, err := sv.Control(svc.Stop)
	if errors.Is(err, windows.ERROR_SERVICE_NOT_ACTIVE) {
		return nil
	}
	if err != nil {
		return err
	}
	limit := s.opts.StopTimeout + stopGrace
	deadline := time.Now().Add(limit)
	for status.State != svc.Stopped {
		if time.Now().After(deadline) {
			return fmt.Errorf("still %s after %s", stateName(status.State), limit)
		}
		time.Sleep(100 * time.Millisecond)
		if status, err = sv.Query(); err != nil {
			return err
		}
	}
	return nil
}

func stateName(s svc.State) string {
	switch s {
	case svc.StopPending:
		return "stopping"
	case svc.Running:
		return "running"
	case svc.StartPending:
		return "starting"
	}
	return fmt.Sprintf("in state %d", s)
}

func isNoSuchService(err error) bool {
	return errors.Is(err, windows.ERROR_SERVICE_DOES_NOT_EXIST)
}
