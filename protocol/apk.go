package protocol

import (
	"fmt"
	"regexp"
	"time"
)

// APK is an app package an operator stored once in the coordinator's
// bucket (`edgecoord apk add`, POST /api/v1/apks; docs/api.md, APKs) for
// install_app steps to install. Package and VersionCode are what the
// operator declared; the agent checks the installed versionCode against
// VersionCode after the install.
type APK struct {
	SHA256      string `json:"sha256"` // lowercase hex of the file's SHA-256
	Size        int64  `json:"size"`   // bytes
	Package     string `json:"package"`
	VersionCode int64  `json:"version_code"`
	VersionName string `json:"version_name,omitempty"`
}

// APKDownload tells an agent where to fetch the APK an install_app step
// names: a presigned GET of its object, so that the agent needs no
// storage credentials. It travels in the assign (Assign.APKs).
type APKDownload struct {
	APK
	URL     string    `json:"url"`
	Expires time.Time `json:"expires"`
}

// Bounds of APKs.
const (
	// MaxAPKSize is the largest APK the coordinator stores and an agent
	// downloads (docs/api.md, APKs).
	MaxAPKSize = 1 << 30
	// MaxAPKVersionName bounds an APK's declared versionName.
	MaxAPKVersionName = 100
)

var (
	sha256HexRE   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	apkPackageRE  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$`)
	versionNameRE = regexp.MustCompile(`^[\x21-\x7e]+$`)
)

// ValidateAPKHash accepts the apk of an install_app step: the SHA-256 of
// the stored APK in 64 lowercase hex digits.
func ValidateAPKHash(s string) error {
	if s == "" {
		return fmt.Errorf("install_app needs apk (the SHA-256 edgecoord apk add printed)")
	}
	if !sha256HexRE.MatchString(s) {
		return fmt.Errorf("%q is not a SHA-256 in 64 lowercase hex digits", ShortKey(s))
	}
	return nil
}

// APKObjectKey is the object key of the stored APK with hash sha256.
func APKObjectKey(sha256 string) string { return "apks/" + sha256 + ".apk" }

// Validate checks an APK record: its hash, a size of 1…MaxAPKSize bytes,
// an Android package name (two or more dot-separated parts, each a letter
// then letters, digits or _), a versionCode ≥ 1 and an optional
// versionName of printable ASCII without spaces. Errors name the field.
func (a APK) Validate() error {
	if err := ValidateAPKHash(a.SHA256); err != nil {
		return fmt.Errorf("sha256: %w", err)
	}
	if a.Size <= 0 || a.Size > MaxAPKSize {
		return fmt.Errorf("size: %d is not in 1…%d", a.Size, MaxAPKSize)
	}
	if len(a.Package) > 255 || !apkPackageRE.MatchString(a.Package) {
		return fmt.Errorf("package: %q is not an Android package name (such as com.example.shop)", clip(a.Package, 80))
	}
	if a.VersionCode < 1 {
		return fmt.Errorf("version_code: %d is not a versionCode (1 or more)", a.VersionCode)
	}
	if a.VersionName != "" && (len(a.VersionName) > MaxAPKVersionName || !versionNameRE.MatchString(a.VersionName)) {
		return fmt.Errorf("version_name: at most %d printable ASCII characters without spaces", MaxAPKVersionName)
	}
	return nil
}

// APKs lists the distinct APKs the task's install_app steps name, in
// order of first use.
func (t Task) APKs() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range t.Steps {
		if s.Op == OpInstallApp && !seen[s.APK] {
			seen[s.APK] = true
			out = append(out, s.APK)
		}
	}
	return out
}
