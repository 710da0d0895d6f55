package capture

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

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

// dumpedPackageRE matches a package name in the dump: that of an app, or
// the framework's "android".
var dumpedPackageRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$`)

// packagesSection names the section of FactsScript that lists the
// installed apps.
const packagesSection = "dumpsys package packages"

// PackagesCommand lists the installed apps with their versions in one
// command, run within FactsScript: the package manager's dump of every
// package, filtered on the phone by grep to the lines ParsePackages reads
// (a package's header, versionCode, versionName, flags and user 0 lines,
// and the start of the factory versions of updated system apps), so that
// a few lines per package cross adb instead of the megabytes of the whole
// dump. `pm list packages --show-versioncode` would be cheaper on the
// phone but has no versionName, which is what apps show and what job
// files require.
const PackagesCommand = `dumpsys package packages | grep -E '^(Hidden system packages:|  Package \[|    (versionCode=|versionName=|flags=\[|User 0: ))'`

// ParsePackages reads the output of PackagesCommand (or the whole of
// `dumpsys package packages`): the apps a job may ask for, each with its
// versionName and versionCode, sorted by package. Those are the apps
// installed for user 0 that are not part of the system image: third-party
// apps and updated system apps (flags SYSTEM without UPDATED_SYSTEM_APP
// are left out, with the system image's version in the fingerprint); the
// factory versions listed under "Hidden system packages:" are skipped. At
// most protocol.MaxPhoneApps are kept (the first by package name). A
// package whose name or version is not understood is skipped or listed
// without that version, and the error names how many were and quotes the
// first; output that lists no package at all is an error and nil. It
// never panics, whatever the output.
func ParsePackages(out []byte) ([]protocol.AppVersion, error) {
	type entry struct {
		v                      protocol.AppVersion
		system, updated, other bool
	}
	apps := []protocol.AppVersion{}
	seen := map[string]bool{}
	var cur *entry
	listed, nbad := 0, 0
	var firstBad string
	bad := func(format string, args ...any) {
		if nbad == 0 {
			firstBad = fmt.Sprintf(format, args...)
		}
		nbad++
	}
	flush := func() {
		e := cur
		cur = nil
		if e == nil || e.other || (e.system && !e.updated) || seen[e.v.Package] {
			return
		}
		seen[e.v.Package] = true
		apps = append(apps, e.v)
	}
scan:
	for line := range strings.Lines(string(out)) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "Hidden system packages:"):
			break scan
		case strings.HasPrefix(line, "  Package ["):
			flush()
			listed++
			name, _, ok := strings.Cut(line[len("  Package ["):], "]")
			if !ok || len(name) > protocol.MaxPackageName || !dumpedPackageRE.MatchString(name) {
				bad("package line %q", clipText(line, 120))
				continue
			}
			cur = &entry{v: protocol.AppVersion{Package: name}}
		case cur == nil:
		case strings.HasPrefix(line, "    versionCode="):
			num, _, _ := strings.Cut(line[len("    versionCode="):], " ")
			code, err := strconv.ParseInt(num, 10, 64)
			if err != nil || code < 0 {
				bad("%s: versionCode %q", cur.v.Package, clipText(num, 40))
				continue
			}
			cur.v.VersionCode = code
		case strings.HasPrefix(line, "    versionName="):
			name := strings.TrimSpace(line[len("    versionName="):])
			if name == "null" {
				continue // the app sets none
			}
			if len(name) > protocol.MaxVersionName || !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0 {
				bad("%s: versionName %q", cur.v.Package, clipText(name, 40))
				continue
			}
			cur.v.VersionName = name
		case strings.HasPrefix(line, "    flags=["):
			for f := range strings.FieldsSeq(strings.Trim(line[len("    flags=["):], "] ")) {
				switch f {
				case "SYSTEM":
					cur.system = true
				case "UPDATED_SYSTEM_APP":
					cur.updated = true
				}
			}
		case strings.HasPrefix(line, "    User 0: "):
			// Uninstalled for the user the agent drives (pm uninstall
			// --user 0) but kept for another.
			cur.other = strings.Contains(line, " installed=false")
		}
	}
	flush()
	if listed == 0 {
		return nil, badOutput(strings.TrimSpace(string(out)))
	}
	slices.SortFunc(apps, func(a, b protocol.AppVersion) int { return strings.Compare(a.Package, b.Package) })
	var errs []error
	if nbad > 0 {
		errs = append(errs, fmt.Errorf("%d of %d packages not fully understood, the first: %s", nbad, listed, firstBad))
	}
	if len(apps) > protocol.MaxPhoneApps {
		errs = append(errs, fmt.Errorf("%d apps listed, the first %d by package name kept", len(apps), protocol.MaxPhoneApps))
		apps = apps[:protocol.MaxPhoneApps]
	}
	return apps, errors.Join(errs...)
}
