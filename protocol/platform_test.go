package protocol

import "testing"

// TestAgentPlatform: the platform capability round-trips; a hello without
// one, or with a malformed one, announces no platform.
func TestAgentPlatform(t *testing.T) {
	caps := []string{"screenshot", PlatformCapability("windows", "amd64"), CapabilityEffect}
	if os, arch, ok := AgentPlatform(caps); !ok || os != "windows" || arch != "amd64" {
		t.Fatalf("AgentPlatform(%v) = %q %q %v", caps, os, arch, ok)
	}
	for _, caps := range [][]string{nil, {"screenshot"}, {"platform:linux"}, {"platform:Linux/amd64"}, {"platform:/amd64"}} {
		if os, arch, ok := AgentPlatform(caps); ok {
			t.Errorf("AgentPlatform(%v) = %q %q, want none", caps, os, arch)
		}
	}
}
