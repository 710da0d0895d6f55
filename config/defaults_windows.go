//go:build windows

package config

// Platform defaults.
const (
	// DefaultAgentFile is where edgeagent looks for its config file.
	DefaultAgentFile = `C:\ProgramData\edgeagent\config.yaml`
	// DefaultCoordinatorFile is where edgecoord looks for its config file.
	DefaultCoordinatorFile = `C:\ProgramData\edgecoord\config.yaml`

	defaultStateDir = `C:\ProgramData\edgeagent`
)
