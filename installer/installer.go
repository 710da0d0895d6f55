package installer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kardianos/service"
)

// Service identity.
const (
	// Name is the service's name in systemd and in the Windows service
	// control manager.
	Name        = "edgeagent"
	displayName = "edgeagent phone agent"
	description = "Runs jobs from an edgecoord coordinator on the Android phones attached to this computer."
)

// StopTimeout is how long the service manager lets the service drain when
// it stops: TimeoutStopSec of the systemd unit and the Windows preshutdown
// timeout. It stays above the agent's default jobs.shutdown_timeout (30s);
// [Options.StopTimeout] raises it for a longer configured drain.
const StopTimeout = 45 * time.Second

// Windows recovery actions: restart after each failure, waiting longer after
// the second and third; the count of failures resets after a day without
// one. windows/install.ps1 sets the same actions with sc.exe.
var (
	RecoveryDelays      = []time.Duration{5 * time.Second, 30 * time.Second, 60 * time.Second}
	RecoveryResetPeriod = 24 * time.Hour
)

// Options describe the service to install or control.
type Options struct {
	// ConfigPath is the agent's config file, given to `edgeagent run -c`.
	// Made absolute. Required to install; not needed to control.
	ConfigPath string
	// User is the account the service runs as. Default on Linux the
	// edgeagent system user, created on install; on Windows LocalSystem.
	// On Windows an account other than LocalSystem, LocalService or
	// NetworkService needs Password.
	User string
	// Password is the Windows account's password. Not used on Linux.
	Password string
	// Executable is the edgeagent binary the service runs. Default: this
	// program.
	Executable string
	// StateDir is the config's state_dir, when known. On Linux a directory
	// other than /var/lib/edgeagent is created for the user and made
	// writable in the unit's sandbox.
	StateDir string
	// StopTimeout is at least how long the service manager waits for the
	// service to stop. Default and minimum StopTimeout.
	StopTimeout time.Duration
}

// Status is the state of the installed service.
type Status int

// Service states.
const (
	StatusUnknown Status = iota
	StatusNotInstalled
	StatusStopped
	StatusRunning
)

func (s Status) String() string {
	switch s {
	case StatusNotInstalled:
		return "not installed"
	case StatusStopped:
		return "stopped"
	case StatusRunning:
		return "running"
	default:
		return "unknown"
	}
}

// ErrNotInstalled is returned when the service is not installed.
var ErrNotInstalled = errors.New("service is not installed")

// Service installs and controls the edgeagent service.
type Service struct {
	opts     Options
	svc      service.Service
	warnings []string
}

// Warnings returns what Install could not set up but did without, such as
// a setting the service manager does not support.
func (s *Service) Warnings() []string { return s.warnings }

// New returns the service described by opts. It fails when the machine has
// no supported service manager.
func New(opts Options) (*Service, error) {
	opts, err := normalize(opts)
	if err != nil {
		return nil, err
	}
	if err := checkPlatform(); err != nil {
		return nil, err
	}
	s := &Service{opts: opts}
	cfg, err := s.config()
	if err != nil {
		return nil, err
	}
	svc, err := service.New(program{}, cfg)
	if err != nil {
		return nil, fmt.Errorf("set up service: %w", err)
	}
	s.svc = svc
	return s, nil
}

// Describe returns what Install would set up for opts, for people: on
// Linux the unit file, on Windows the service's settings. It changes
// nothing and needs no service manager.
func Describe(opts Options) (string, error) {
	opts, err := normalize(opts)
	if err != nil {
		return "", err
	}
	if opts.ConfigPath == "" {
		return "", errors.New("describe service: no config path")
	}
	return (&Service{opts: opts}).describe()
}

// normalize fills in the defaults of opts.
func normalize(opts Options) (Options, error) {
	if opts.ConfigPath != "" {
		abs, err := filepath.Abs(opts.ConfigPath)
		if err != nil {
			return opts, fmt.Errorf("resolve config path: %w", err)
		}
		opts.ConfigPath = abs
	}
	if opts.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return opts, fmt.Errorf("find this program: %w", err)
		}
		opts.Executable = exe
	}
	if exe, err := filepath.EvalSymlinks(opts.Executable); err == nil {
		opts.Executable = exe
	}
	abs, err := filepath.Abs(opts.Executable)
	if err != nil {
		return opts, fmt.Errorf("resolve executable path: %w", err)
	}
	opts.Executable = abs
	if opts.User == "" {
		opts.User = defaultUser
	}
	opts.StopTimeout = max(opts.StopTimeout, StopTimeout)
	return opts, nil
}

// serviceConfig is the kardianos/service configuration shared by every
// platform; platformConfig adds the rest.
func (s *Service) serviceConfig() *service.Config {
	cfg := &service.Config{
		Name:        Name,
		DisplayName: displayName,
		Description: description,
		Executable:  s.opts.Executable,
		Option:      service.KeyValue{},
	}
	if s.opts.ConfigPath != "" {
		cfg.Arguments = []string{"run", "-c", s.opts.ConfigPath}
	}
	return cfg
}

// Install registers the service with the service manager, set to start at
// boot, without starting it.
func (s *Service) Install() error {
	if s.opts.ConfigPath == "" {
		return errors.New("install service: no config path")
	}
	if err := s.install(); err != nil {
		return fmt.Errorf("install service: %w", err)
	}
	return nil
}

// Uninstall stops the service when it runs, waiting for the drain, and
// removes it from the service manager; the user, configuration, state and
// logs stay.
func (s *Service) Uninstall() error {
	if err := s.checkUninstall(); err != nil {
		return fmt.Errorf("uninstall service: %w", err)
	}
	st, err := s.Status()
	if err != nil {
		return fmt.Errorf("uninstall service: %w", err)
	}
	switch st {
	case StatusNotInstalled:
		return fmt.Errorf("uninstall service: %w", ErrNotInstalled)
	case StatusRunning:
		if err := s.stop(); err != nil {
			return fmt.Errorf("uninstall service: stop it: %w", err)
		}
	}
	if err := s.uninstall(); err != nil {
		return fmt.Errorf("uninstall service: %w", err)
	}
	return nil
}

// Start asks the service manager to start the service and returns without
// waiting for the agent to connect.
func (s *Service) Start() error {
	if err := s.svc.Start(); err != nil {
		return fmt.Errorf("start service: %w", s.notInstalled(err))
	}
	return nil
}

// Stop asks the service manager to stop the service and waits until it has
// drained and stopped.
func (s *Service) Stop() error {
	if err := s.stop(); err != nil {
		return fmt.Errorf("stop service: %w", s.notInstalled(err))
	}
	return nil
}

// Restart stops the service, waiting for the drain, and starts it.
func (s *Service) Restart() error {
	if err := s.stop(); err != nil {
		return fmt.Errorf("restart service: %w", s.notInstalled(err))
	}
	if err := s.svc.Start(); err != nil {
		return fmt.Errorf("restart service: %w", s.notInstalled(err))
	}
	return nil
}

// Status reports whether the service is installed and running.
func (s *Service) Status() (Status, error) {
	st, err := s.svc.Status()
	switch {
	case errors.Is(err, service.ErrNotInstalled):
		return StatusNotInstalled, nil
	case err != nil:
		return StatusUnknown, fmt.Errorf("query service status: %w", s.notInstalled(err))
	case st == service.StatusRunning:
		return StatusRunning, nil
	case st == service.StatusStopped:
		return StatusStopped, nil
	default:
		return StatusUnknown, nil
	}
}

// notInstalled turns the service manager's "no such service" into
// ErrNotInstalled.
func (s *Service) notInstalled(err error) error {
	if errors.Is(err, service.ErrNotInstalled) || isNoSuchService(err) {
		return ErrNotInstalled
	}
	return err
}

// program is the kardianos/service program of a process that only installs
// or controls the service; the service process itself runs under
// RunService.
type program struct{}

func (program) Start(service.Service) error { return nil }
func (program) Stop(service.Service) error  { return nil }

// describeCommand renders the command line the service runs, for people.
func describeCommand(exe string, args []string) string {
	parts := []string{quoteForDisplay(exe)}
	for _, a := range args {
		parts = append(parts, quoteForDisplay(a))
	}
	return strings.Join(parts, " ")
}

func quoteForDisplay(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\"'") {
		return fmt.Sprintf("%q", s)
	}
	return s
}
