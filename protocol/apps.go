package protocol

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// App versions (docs/protocol.md, App versions): a phone's facts list its
// installed apps with their versions (PhoneFacts.Apps), and a selector may
// require an app at a version (DeviceSelector.Apps). Versions compare by
// sortable keys (VersionKey, CodeKey), the same strings the stores' grant
// SQL compares.

// Bounds of app versions.
const (
	// MaxAppRequirements bounds the packages one selector names.
	MaxAppRequirements = 16
	// MaxAppConstraints bounds the comparisons of one requirement
	// (">=5.2, <6" has two).
	MaxAppConstraints = 4
	// MaxPhoneApps bounds the installed apps one phone's facts list; a
	// longer list is read up to it.
	MaxPhoneApps = 300
	// MaxPackageName bounds a package name, in bytes.
	MaxPackageName = 255
	// MaxVersionName bounds a versionName, in bytes.
	MaxVersionName = 100
	// MaxVersionParts bounds the dotted numbers of a versionName that
	// compare.
	MaxVersionParts = 8
	// versionPartDigits is the width of one number of a version key: a
	// number of more digits does not compare.
	versionPartDigits = 10
)

// PackageNameRE matches an Android package name: two or more dotted
// parts of letters, digits and underscores, the first starting with a
// letter.
var PackageNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$`)

// CheckPackageName accepts an Android package name of at most
// MaxPackageName bytes.
func CheckPackageName(pkg string) error {
	if len(pkg) > MaxPackageName {
		return fmt.Errorf("package name of %d bytes is longer than %d", len(pkg), MaxPackageName)
	}
	if !PackageNameRE.MatchString(pkg) {
		return fmt.Errorf("%q is not a package name (dotted parts of letters, digits and _, like com.example.shop)", clip(pkg, 80))
	}
	return nil
}

// App constraint operators. AppInstalled ("*") asks only that the app is
// installed, at any version.
const (
	AppInstalled = "*"
	AppEQ        = "="
	AppGT        = ">"
	AppGE        = ">="
	AppLT        = "<"
	AppLE        = "<="
)

// AppConstraint is one comparison of an app requirement: ">=5.2" on the
// versionName, "code>=52100" on the versionCode, or "*".
type AppConstraint struct {
	Op      string // AppInstalled, AppEQ, AppGT, AppGE, AppLT or AppLE
	Code    bool   // compares the versionCode, not the versionName
	Version string // the version as written after the operator ("5.2", "52100")
	Key     string // VersionKey or CodeKey of Version ("" for AppInstalled)
}

var (
	versionReqRE = regexp.MustCompile(`^[0-9]{1,10}(\.[0-9]{1,10}){0,7}$`)
	codeReqRE    = regexp.MustCompile(`^[0-9]{1,19}$`)
)

// ParseAppRequirement reads the requirement a selector sets on one app:
// "*" (installed, any version), or up to MaxAppConstraints comparisons
// separated by commas, each an operator (=, >, >=, <, <=; none means =)
// and a version of dotted numbers compared with the versionName
// (">=5.2"), or "code" and an operator and a number compared with the
// versionCode ("code>=52100"). All must hold. The error says what is
// wrong, quoting the requirement.
func ParseAppRequirement(req string) ([]AppConstraint, error) {
	s := strings.TrimSpace(req)
	if s == AppInstalled {
		return []AppConstraint{{Op: AppInstalled}}, nil
	}
	if s == "" {
		return nil, fmt.Errorf("empty requirement: give a version like \">=5.2\", \"code>=52100\", or \"*\" for any version")
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxAppConstraints {
		return nil, fmt.Errorf("%q has %d comparisons, at most %d", clip(req, 80), len(parts), MaxAppConstraints)
	}
	out := make([]AppConstraint, 0, len(parts))
	for _, p := range parts {
		c, err := parseAppConstraint(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", clip(req, 80), err)
		}
		out = append(out, c)
	}
	return out, nil
}

func parseAppConstraint(s string) (AppConstraint, error) {
	var c AppConstraint
	if rest, ok := strings.CutPrefix(s, "code"); ok {
		c.Code, s = true, strings.TrimSpace(rest)
	}
	for _, op := range []string{AppGE, AppLE, "==", AppEQ, AppGT, AppLT} {
		if rest, ok := strings.CutPrefix(s, op); ok {
			c.Op, s = op, strings.TrimSpace(rest)
			break
		}
	}
	switch c.Op {
	case "", "==":
		c.Op = AppEQ
	}
	c.Version = s
	if c.Code {
		n, err := strconv.ParseInt(s, 10, 64)
		if !codeReqRE.MatchString(s) || err != nil {
			return AppConstraint{}, fmt.Errorf("%q is not a versionCode: code takes an operator and a whole number (code>=52100)", clip(s, 40))
		}
		c.Key, _ = CodeKey(n)
		return c, nil
	}
	if !versionReqRE.MatchString(s) {
		return AppConstraint{}, fmt.Errorf("%q is not a version: an operator (=, >, >=, <, <=) and up to %d dotted numbers of up to %d digits each (>=5.2), or code and a number (code>=52100), or * for any version",
			clip(s, 40), MaxVersionParts, versionPartDigits)
	}
	c.Key, _ = VersionKey(s)
	return c, nil
}

// String renders the constraint as it is written: ">=5.2", "code>=52100",
// "*".
func (c AppConstraint) String() string {
	if c.Op == AppInstalled {
		return AppInstalled
	}
	if c.Code {
		return "code" + c.Op + c.Version
	}
	return c.Op + c.Version
}

// Fits reports whether the installed app v satisfies c. A version that
// does not compare (a versionName not starting with a number, an unknown
// versionCode) fails every comparison.
func (c AppConstraint) Fits(v AppVersion) bool {
	if c.Op == AppInstalled {
		return true
	}
	var key string
	var ok bool
	if c.Code {
		key, ok = CodeKey(v.VersionCode)
	} else {
		key, ok = VersionKey(v.VersionName)
	}
	if !ok {
		return false
	}
	switch c.Op {
	case AppEQ:
		return key == c.Key
	case AppGT:
		return key > c.Key
	case AppGE:
		return key >= c.Key
	case AppLT:
		return key < c.Key
	case AppLE:
		return key <= c.Key
	}
	return false
}

// VersionKey returns the sortable key of a versionName: its leading
// dotted numbers ("5.2.1" of "5.2.1-beta (321)"), each zero-padded to 10
// digits and joined, trailing zeros dropped (so "5.2" and "5.2.0" are
// equal). Keys compare as byte strings in the order of the versions. ok
// is false when the name does not start with a digit or has a number of
// more than 10 digits or more than MaxVersionParts numbers.
func VersionKey(name string) (key string, ok bool) {
	var parts []string
	i := 0
	for {
		j := i
		for j < len(name) && name[j] >= '0' && name[j] <= '9' {
			j++
		}
		if j == i {
			break
		}
		num := strings.TrimLeft(name[i:j], "0")
		if len(num) > versionPartDigits || len(parts) == MaxVersionParts {
			return "", false
		}
		parts = append(parts, num)
		if j+1 < len(name) && name[j] == '.' && name[j+1] >= '0' && name[j+1] <= '9' {
			i = j + 1
			continue
		}
		break
	}
	if len(parts) == 0 {
		return "", false
	}
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(strings.Repeat("0", versionPartDigits-len(p)))
		b.WriteString(p)
	}
	return b.String(), true
}

// CodeKey returns the sortable key of a versionCode: 19 digits,
// zero-padded. ok is false for 0 (not known) and negative codes.
func CodeKey(code int64) (key string, ok bool) {
	if code <= 0 {
		return "", false
	}
	return fmt.Sprintf("%019d", code), true
}

// App returns the installed app pkg of the facts: the first entry of
// Apps naming it, among the first MaxPhoneApps. ok is false when it is
// not listed (or f is nil).
func (f *PhoneFacts) App(pkg string) (v AppVersion, ok bool) {
	if f == nil {
		return AppVersion{}, false
	}
	for _, a := range f.Apps[:min(len(f.Apps), MaxPhoneApps)] {
		if a.Package == pkg {
			return a, true
		}
	}
	return AppVersion{}, false
}

// appsFit reports whether f lists every app of s.Apps at a version that
// satisfies its requirement.
func (s DeviceSelector) appsFit(f *PhoneFacts) bool {
	for pkg, req := range s.Apps {
		cs, err := ParseAppRequirement(req)
		if err != nil {
			return false
		}
		v, ok := f.App(pkg)
		if !ok {
			return false
		}
		for _, c := range cs {
			if !c.Fits(v) {
				return false
			}
		}
	}
	return true
}

// validateApps checks the app requirements of s: at most
// MaxAppRequirements packages, each a package name with a requirement
// ParseAppRequirement reads. The error names the field
// ("apps.com.example.shop: …").
func (s DeviceSelector) validateApps() error {
	if len(s.Apps) > MaxAppRequirements {
		return fmt.Errorf("apps: %d packages, at most %d", len(s.Apps), MaxAppRequirements)
	}
	for _, pkg := range sortedKeys(s.Apps) {
		if err := CheckPackageName(pkg); err != nil {
			return fmt.Errorf("apps: %w", err)
		}
		if _, err := ParseAppRequirement(s.Apps[pkg]); err != nil {
			return fmt.Errorf("apps.%s: %w", pkg, err)
		}
	}
	return nil
}

// describeApps renders the app requirements of s as "app=PKG>=5.2"
// parts, in package order ("app=PKG" for any version).
func (s DeviceSelector) describeApps() []string {
	var parts []string
	for _, pkg := range sortedKeys(s.Apps) {
		cs, err := ParseAppRequirement(s.Apps[pkg])
		if err != nil {
			parts = append(parts, "app="+pkg+"?")
			continue
		}
		var w []string
		for _, c := range cs {
			if c.Op != AppInstalled {
				w = append(w, c.String())
			}
		}
		parts = append(parts, "app="+pkg+strings.Join(w, ","))
	}
	return parts
}

// MissingApps says, for each phone of listed that s matches but for its
// app requirements, which required app it lacks or has at another version:
// "R58M12 has com.example.shop 5.1.0 (51000)", "R58M13 has no
// com.example.shop", "R58M14: its apps are not known"; at most limit
// phones, in serial order, and how many more. It returns "" when s
// requires no app or no listed phone fits it otherwise.
func (s DeviceSelector) MissingApps(listed []Device, limit int) string {
	if len(s.Apps) == 0 {
		return ""
	}
	rest := s
	rest.Apps = nil
	var parts []string
	more := 0
	for _, d := range slices.SortedFunc(slices.Values(listed), func(a, b Device) int { return strings.Compare(a.Serial, b.Serial) }) {
		if !rest.Matches(d) || s.Matches(d) {
			continue
		}
		if len(parts) == limit {
			more++
			continue
		}
		if d.Facts == nil || d.Facts.Apps == nil {
			parts = append(parts, d.Serial+": its apps are not known")
			continue
		}
		for _, pkg := range sortedKeys(s.Apps) {
			if (DeviceSelector{Apps: map[string]string{pkg: s.Apps[pkg]}}).appsFit(d.Facts) {
				continue
			}
			if v, ok := d.Facts.App(pkg); ok {
				parts = append(parts, d.Serial+" has "+v.String())
			} else {
				parts = append(parts, d.Serial+" has no "+pkg)
			}
			break
		}
	}
	if more > 0 {
		parts = append(parts, fmt.Sprintf("%d more", more))
	}
	return strings.Join(parts, ", ")
}

// String renders an installed app as "com.example.shop 5.2.1 (52100)".
func (v AppVersion) String() string {
	s := v.Package
	if v.VersionName != "" {
		s += " " + v.VersionName
	}
	if v.VersionCode != 0 {
		s += fmt.Sprintf(" (%d)", v.VersionCode)
	}
	return s
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
