//go:build windows

package procs

import (
	"fmt"
	"os/exec"
	"unsafe"

	"golang.org/x/sys/windows"
)

// handle is the job object the process was assigned to. Processes the
// process starts are in the job too (unless they break away), so closing it
// with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE or terminating it ends them all.
// A child started in the instant between CreateProcess and the assignment
// escapes the job; the processes the agent starts do not spawn that early.
type handle struct{ job windows.Handle }

func prepare(cmd *exec.Cmd) {}

func attach(cmd *exec.Cmd) (*handle, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return nil, fmt.Errorf("create job object: %w", err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{
		BasicLimitInformation: windows.JOBOBJECT_BASIC_LIMIT_INFORMATION{LimitFlags: windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE},
	}
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return nil, fmt.Errorf("set job object limits: %w", err)
	}
	ph, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(cmd.Process.Pid))
	if err != nil {
		windows.CloseHandle(job)
		return nil, fmt.Errorf("open process: %w", err)
	}
	defer windows.CloseHandle(ph)
	if err := windows.AssignProcessToJobObject(job, ph); err != nil {
		windows.CloseHandle(job)
		return nil, fmt.Errorf("assign process to job object: %w", err)
	}
	return &handle{job: job}, nil
}

func (h *handle) kill(cmd *exec.Cmd) {
	_ = windows.TerminateJobObject(h.job, 1)
	_ = cmd.Process.Kill()
}

func (h *handle) close() { windows.CloseHandle(h.job) }
