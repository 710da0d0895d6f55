package capture

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/edgeagent/edgeagent/protocol"
)

// AppVersioner is implemented by phones that can tell an installed app's
// version (docs/observations.md, Provenance): ADBDevice and Simulated.
type AppVersioner interface {
	AppVersion(ctx context.Context, pkg string) (protocol.AppVersion, error)
}

var (
	_ AppVersioner = (*ADBDevice)(nil)
	_ AppVersioner = (*Simulated)(nil)
)

var (
	versionCodeRE = regexp.MustCompile(`(?m)^\s*versionCode=(\d{1,19})\b`)
	versionNameRE = regexp.MustCompile(`(?m)^\s*versionName=(\S{1,100})\s*$`)
)

// ParsePackageVersion reads the first versionCode and versionName of
// `dumpsys package PKG` (the installed version; an updated system app lists
// its factory version after it). It reports false when the output names
// no version: the package is not installed.
func ParsePackageVersion(pkg string, out []byte) (protocol.AppVersion, bool) {
	v := protocol.AppVersion{Package: pkg}
	s := string(out)
	if m := versionNameRE.FindStringSubmatch(s); m != nil {
		v.VersionName = m[1]
	}
	if m := versionCodeRE.FindStringSubmatch(s); m != nil {
		v.VersionCode, _ = strconv.ParseInt(m[1], 10, 64)
	}
	return v, v.VersionName != "" || v.VersionCode != 0
}

// AppVersion reads pkg's installed version with `dumpsys package`; an app
// that is not installed is an *AppNotInstalledError.
func (d *ADBDevice) AppVersion(ctx context.Context, pkg string) (protocol.AppVersion, error) {
	if !packageRE.MatchString(pkg) {
		return protocol.AppVersion{}, fmt.Errorf("app version on %s: %w: %q is not a package name", d.serial, ErrInvalidStep, clipText(pkg, 80))
	}
	var v protocol.AppVersion
	err := d.op(ctx, "app version "+pkg, d.opts.OpTimeout, func(ctx context.Context) error {
		res, err := d.shell(ctx, "dumpsys package "+pkg)
		if err != nil {
			return err
		}
		var ok bool
		if v, ok = ParsePackageVersion(pkg, res.Stdout); !ok {
			if strings.Contains(string(res.Stdout)+string(res.Stderr), "Unable to find package") {
				return &AppNotInstalledError{Serial: d.serial, Package: pkg}
			}
			return fmt.Errorf("dumpsys package %s names no version: %s", pkg, clipText(strings.TrimSpace(string(res.Stdout)), 200))
		}
		return nil
	})
	return v, err
}

// SimAppVersion is the version every app of a Simulated phone has unless
// SimOptions.AppVersions says otherwise.
var SimAppVersion = protocol.AppVersion{VersionName: "1.0.0", VersionCode: 1}

// AppVersion returns the version of an installed app: SimOptions.AppVersions
// or SimAppVersion.
func (s *Simulated) AppVersion(ctx context.Context, pkg string) (protocol.AppVersion, error) {
	if err := ctxErr(ctx); err != nil {
		return protocol.AppVersion{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unplugged {
		return protocol.AppVersion{}, fmt.Errorf("app version on %s: %w", s.serial, ErrUnplugged)
	}
	if !s.installedLocked(pkg) {
		return protocol.AppVersion{}, &AppNotInstalledError{Serial: s.serial, Package: pkg}
	}
	v, ok := s.versions[pkg]
	if !ok {
		v = SimAppVersion
	}
	v.Package = pkg
	return v, nil
}
