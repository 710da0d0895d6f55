//go:build !windows

package installer

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// IsService reports whether the Windows service control manager started
// this process. It is always false here: systemd runs the agent as an
// ordinary process and stops it with SIGTERM.
func IsService() bool { return false }

// RunService runs run until SIGINT or SIGTERM, which is how systemd stops
// a service, with the process's stderr.
func RunService(_ string, run RunFunc) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, os.Stderr)
}

// LogPath is where the service's log file is on Windows. Here there is
// none: the journal keeps the service's output (journalctl -u edgeagent).
func LogPath(string) string { return "" }
