//go:build !unix && !windows

package procs

import "os/exec"

// handle kills only the process itself on platforms without process groups
// or job objects.
type handle struct{}

func prepare(cmd *exec.Cmd) {}

func attach(cmd *exec.Cmd) (*handle, error) { return &handle{}, nil }

func (h *handle) kill(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

func (h *handle) close() {}
