//go:build unix

package procs

import (
	"os/exec"
	"syscall"
)

type handle struct{ pgid int }

// prepare puts the process in a new process group whose id is its pid.
func prepare(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
}

func attach(cmd *exec.Cmd) (*handle, error) { return &handle{pgid: cmd.Process.Pid}, nil }

// kill sends SIGKILL to the whole process group. The group is only killed
// while the process has not been waited for, so its id cannot have been
// reused.
func (h *handle) kill(cmd *exec.Cmd) {
	_ = syscall.Kill(-h.pgid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}

func (h *handle) close() {}
