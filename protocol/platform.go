package protocol

import "strings"

// CapabilityPlatformPrefix starts the capability an agent announces its
// GOOS and GOARCH with in its hello, such as platform:linux/amd64: the
// coordinator hands it the release binary built for them (docs/releases.md).
const CapabilityPlatformPrefix = "platform:"

// PlatformCapability is the capability announcing goos and goarch.
func PlatformCapability(goos, goarch string) string {
	return CapabilityPlatformPrefix + goos + "/" + goarch
}

// AgentPlatform reads the GOOS and GOARCH an agent announced among its
// capabilities; ok is false when it announced none (or one that is not a
// GOOS/GOARCH pair).
func AgentPlatform(caps []string) (goos, goarch string, ok bool) {
	for _, c := range caps {
		p, found := strings.CutPrefix(c, CapabilityPlatformPrefix)
		if !found {
			continue
		}
		goos, goarch, found = strings.Cut(p, "/")
		if found && goNameRE.MatchString(goos) && goNameRE.MatchString(goarch) {
			return goos, goarch, true
		}
	}
	return "", "", false
}
