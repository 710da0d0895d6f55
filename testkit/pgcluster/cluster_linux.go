package pgcluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// setDeathSignal makes the kernel send SIGTERM (smart shutdown) to the
// server, or to runuser, which passes it on, when the thread that started it
// ends: at the latest when the test binary exits, however it exits.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// killPostmaster stops a server that pg_ctl could not stop (immediate
// shutdown).
func killPostmaster(data string) {
	if pid := postmasterPID(data); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGQUIT)
	}
}

// chown gives dir to u.
func chown(dir string, u *user.User) error {
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return fmt.Errorf("parse uid of %s: %w", u.Username, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return fmt.Errorf("parse gid of %s: %w", u.Username, err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("give cluster dir to %s: %w", u.Username, err)
	}
	return nil
}

// fileUID returns the owner of path.
func fileUID(path string) (int, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, &fs.PathError{Op: "stat", Path: filepath.Clean(path), Err: errors.ErrUnsupported}
	}
	return int(st.Uid), nil
}
