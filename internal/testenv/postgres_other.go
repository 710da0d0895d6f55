//go:build !linux

package testenv

import (
	"errors"
	"fmt"
	"os/exec"
	"os/user"
)

// pgSetDeathSignal has no equivalent here: a server outlives a test binary
// that is killed.
func pgSetDeathSignal(cmd *exec.Cmd) {}

// pgProcessAlive cannot tell here, so no directory is taken as stale.
func pgProcessAlive(pid int) bool { return true }

func pgKillPostmaster(data string) {}

func pgChown(dir string, u *user.User) error {
	return fmt.Errorf("give cluster dir to %s: %w", u.Username, errors.ErrUnsupported)
}

func pgFileUID(path string) (int, error) { return 0, errors.ErrUnsupported }
