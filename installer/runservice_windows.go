//go:build windows

package installer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/kardianos/service"
	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/svc"

	"github.com/edgeagent/edgeagent/internal/logfile"
)

// IsService reports whether the Windows service control manager started
// this process.
func IsService() bool { return isService() }

var isService = sync.OnceValue(func() bool {
	if ok, err := svc.IsWindowsService(); err == nil && ok {
		return true
	}
	// svc.IsWindowsService also wants services.exe in session 0, which
	// holds on Windows but not under Wine, where every process runs in
	// session 1. The parent being services.exe is enough: the service
	// control manager starts nothing but services.
	return parentIsServicesExe()
})

func parentIsServicesExe() bool {
	var pbi windows.PROCESS_BASIC_INFORMATION
	n := uint32(unsafe.Sizeof(pbi))
	if err := windows.NtQueryInformationProcess(windows.CurrentProcess(), windows.ProcessBasicInformation, unsafe.Pointer(&pbi), n, &n); err != nil {
		return false
	}
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pbi.InheritedFromUniqueProcessId))
	if err != nil {
		return false
	}
	defer windows.CloseHandle(h)
	buf := make([]uint16, windows.MAX_LONG_PATH)
	size := uint32(len(buf))
	if err := windows.QueryFullProcessImageName(h, 0, &buf[0], &size); err != nil {
		return false
	}
	base := windows.UTF16ToString(buf[:size])
	if i := strings.LastIndexAny(base, `\/`); i >= 0 {
		base = base[i+1:]
	}
	return strings.EqualFold(base, "services.exe")
}

// LogPath is the service's log file: %ProgramData%\<name>\logs\<name>.log.
func LogPath(name string) string {
	return filepath.Join(programData(), name, "logs", name+".log")
}

// Log rotation of the service's log file.
const (
	logMaxSize  = 10 << 20
	logMaxFiles = 5
)

// RunService runs run as the Windows service name. It returns when the
// service has stopped. A stop request, or the system shutting down,
// cancels run's context; the service reports "stop pending" (answering
// the service control manager's queries) until run returns, then
// "stopped". A run that returns on its own is a failure: the service stops
// with a service-specific exit code (the error's exit status, such as 75
// after a self-update, else 1) and its recovery actions restart it.
//
// run's stderr goes to LogPath(name), rotated at 10 MiB with 5 old files
// kept, and its warnings and errors also to the Application event log
// under the source name.
func RunService(name string, run RunFunc) error {
	if !IsService() {
		return errors.New("run service: not started by the service control manager")
	}
	log := &serviceLog{}
	if f, err := logfile.Open(LogPath(name), logfile.Options{MaxSize: logMaxSize, MaxFiles: logMaxFiles}); err == nil {
		defer f.Close()
		log.file = f
	}
	if s, err := service.New(program{}, &service.Config{Name: name}); err == nil {
		if l, err := s.SystemLogger(nil); err == nil {
			log.sys = l
		}
	}
	if log.file == nil {
		log.Error(fmt.Sprintf("cannot open the log file %s; logging to the event log only", LogPath(name)))
	}
	defer log.Flush()
	h := &handler{run: run, log: log}
	if err := svc.Run(name, h); err != nil {
		log.Error(fmt.Sprintf("run as a service: %v", err))
		return fmt.Errorf("run service: %w", err)
	}
	return h.err
}

// handler is the service's side of the service control manager protocol.
type handler struct {
	run RunFunc
	log *serviceLog
	err error // run's error, other than cancellation
}

const accepted = svc.AcceptStop | svc.AcceptShutdown | svc.AcceptPreShutdown

// stopWaitHint is the wait hint of each "stop pending" report; one is
// sent every second while the run drains.
const stopWaitHint = 5 * time.Second

func (h *handler) Execute(_ []string, r <-chan svc.ChangeRequest, changes chan<- svc.Status) (bool, uint32) {
	changes <- svc.Status{State: svc.StartPending}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes <- svc.Status{State: svc.Running, Accepts: accepted}
	h.log.Info("service started")
	done := make(chan error, 1)
	go func() { done <- h.run(ctx, h.log) }()
	for {
		select {
		case err := <-done:
			h.err = err
			if err == nil {
				err = errors.New("returned without being asked to stop")
			}
			h.log.Error(fmt.Sprintf("service failed: %v", err))
			return true, serviceExitCode(err)
		case c := <-r:
			switch c.Cmd {
			case svc.Interrogate:
				changes <- c.CurrentStatus
			case svc.Stop, svc.Shutdown, svc.PreShutdown:
				h.log.Info(fmt.Sprintf("service %s requested; draining", cmdName(c.Cmd)))
				cancel()
				return h.drain(done, r, changes)
			}
		}
	}
}

// drain reports "stop pending", with a new checkpoint every second, until
// run returns.
func (h *handler) drain(done <-chan error, r <-chan svc.ChangeRequest, changes chan<- svc.Status) (bool, uint32) {
	status := svc.Status{State: svc.StopPending, WaitHint: uint32(stopWaitHint / time.Millisecond)}
	changes <- status
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				h.err = err
				h.log.Error(fmt.Sprintf("service stopped with an error: %v", err))
			} else {
				h.log.Info("service stopped")
			}
			return false, 0
		case <-tick.C:
			status.CheckPoint++
			changes <- status
		case c := <-r:
			if c.Cmd == svc.Interrogate {
				changes <- status
			}
		}
	}
}

// serviceExitCode is the service-specific exit code of a run that
// returned on its own: the error's exit status when it carries one (75
// after a self-update, docs/updates.md), else 1. Either way the service's
// recovery actions restart it.
func serviceExitCode(err error) uint32 {
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) && ec.ExitCode() > 0 {
		return uint32(ec.ExitCode())
	}
	return 1
}

func cmdName(c svc.Cmd) string {
	switch c {
	case svc.Stop:
		return "stop"
	case svc.Shutdown:
		return "shutdown"
	case svc.PreShutdown:
		return "preshutdown"
	}
	return fmt.Sprintf("control %d", c)
}
