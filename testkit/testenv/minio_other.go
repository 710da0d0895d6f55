//go:build !linux

package testenv

import "os/exec"

// minioSetDeathSignal has no equivalent here: a server outlives a test binary
// that is killed.
func minioSetDeathSignal(cmd *exec.Cmd) {}

// minioProcessAlive cannot tell here, so no directory is taken as stale.
func minioProcessAlive(pid int) bool { return true }
