// Package systemd holds the files that run edgeagent and edgecoord as
// systemd services: the units (hardened, see docs/security.md), the
// sysusers.d and tmpfiles.d entries that create their users and
// directories, and an example udev rule for phones. They are embedded so
// that `edgeagent install` writes the same unit that the .deb ships.
package systemd
