//go:build !linux

package bench

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
)

func setDeathSignal(*exec.Cmd) {}

func chownPostgres(string) error {
	return fmt.Errorf("give cluster dir to postgres: %w", errors.ErrUnsupported)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
