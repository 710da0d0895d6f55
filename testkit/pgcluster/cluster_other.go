//go:build !linux

package pgcluster

import (
	"errors"
	"fmt"
	"os/exec"
	"os/user"
)

// setDeathSignal has no equivalent here: a server outlives a test binary
// that is killed.
func setDeathSignal(cmd *exec.Cmd) {}

// processAlive cannot tell here, so no directory is taken as stale.
func processAlive(pid int) bool { return true }

func killPostmaster(data string) {}

func chown(dir string, u *user.User) error {
	return fmt.Errorf("give cluster dir to %s: %w", u.Username, errors.ErrUnsupported)
}

func fileUID(path string) (int, error) { return 0, errors.ErrUnsupported }
