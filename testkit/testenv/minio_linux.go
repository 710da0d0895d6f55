package testenv

import (
	"errors"
	"os/exec"
	"syscall"
)

// minioSetDeathSignal makes the kernel kill the server when the thread that
// started it ends, which at the latest is when the test binary exits, however
// it exits.
func minioSetDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

func minioProcessAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
