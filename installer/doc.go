// Package installer installs, controls and runs edgeagent as an operating
// system service through github.com/kardianos/service.
//
// On Linux the service is a systemd unit rendered from the hardened unit in
// systemd/ (see [RenderUnit]); install also creates the service's user and
// directories with systemd-sysusers and systemd-tmpfiles. On Windows it is a
// service of the service control manager that runs `edgeagent run -c
// CONFIG` at boot, restarts after failures (with a growing delay) and logs
// to the Event Log and a size-rotated file; [RunService] connects a process
// started by the service control manager to it, so that a stop or a system
// shutdown cancels the run's context and the service stays "stop pending"
// while it drains.
package installer
