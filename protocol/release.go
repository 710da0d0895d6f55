package protocol

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Releases and updates of the agent binary (docs/updates.md): the
// coordinator keeps signed releases, one binary per OS and architecture,
// and tells agents to update with the control command ControlUpdate; an
// agent trusts a release only when its signature verifies under the
// release public key in its own config.

// ControlUpdate tells an agent to update to the release in Control.Update.
const ControlUpdate = "update"

// ReleaseKeyPrefix starts the text form of a release public key (the
// agent config's update.public_key) and of a private key file's content.
const (
	ReleaseKeyPrefix     = "edgeagent-release-ed25519-pub:"
	ReleaseSeedKeyPrefix = "edgeagent-release-ed25519-seed:"
)

// MaxReleaseSize bounds a release binary, in bytes.
const MaxReleaseSize = 512 << 20

// Release is one signed agent binary: the version it was built with, the
// GOOS and GOARCH it runs on, its size and SHA-256, and an ed25519
// signature over ReleaseMessage.
type Release struct {
	Version   string `json:"version"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`    // lower-case hex
	Signature string `json:"signature"` // standard base64 of the 64-byte ed25519 signature
}

// Message is what a release's signature signs: the version, OS,
// architecture and digest, one per line, after a fixed first line so that
// a signature made for something else never verifies as a release.
func (r Release) Message() []byte {
	return fmt.Appendf(nil, "edgeagent release v1\nversion %s\nos %s\narch %s\nsha256 %s\n", r.Version, r.OS, r.Arch, r.SHA256)
}

// Sign sets r.Signature with the private key.
func (r *Release) Sign(key ed25519.PrivateKey) {
	r.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, r.Message()))
}

// ErrBadSignature: a release's signature does not verify under the key.
var ErrBadSignature = errors.New("release signature does not verify under the release public key")

// Verify checks r's fields and its signature under pub.
func (r Release) Verify(pub ed25519.PublicKey) error {
	if err := r.Validate(); err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(r.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("signature: not a base64 ed25519 signature: %w", ErrBadSignature)
	}
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, r.Message(), sig) {
		return ErrBadSignature
	}
	return nil
}

var (
	goNameRE = regexp.MustCompile(`^[a-z0-9]{1,16}$`)
	sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Validate checks the fields of r other than the signature.
func (r Release) Validate() error {
	if _, err := ParseVersion(r.Version); err != nil {
		return fmt.Errorf("version: %w", err)
	}
	if !goNameRE.MatchString(r.OS) {
		return fmt.Errorf("os: %q is not a GOOS name", clip(r.OS, 20))
	}
	if !goNameRE.MatchString(r.Arch) {
		return fmt.Errorf("arch: %q is not a GOARCH name", clip(r.Arch, 20))
	}
	if r.Size < 1 || r.Size > MaxReleaseSize {
		return fmt.Errorf("size: %d, want 1 to %d bytes", r.Size, MaxReleaseSize)
	}
	if !sha256RE.MatchString(r.SHA256) {
		return errors.New("sha256: want 64 lower-case hex digits")
	}
	return nil
}

// ParseReleaseKey reads a release public key in its text form
// (ReleaseKeyPrefix followed by the standard base64 of the 32-byte key).
func ParseReleaseKey(s string) (ed25519.PublicKey, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(s), ReleaseKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("not a release public key: want %s followed by base64", ReleaseKeyPrefix)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("not a release public key: want %d bytes in base64 after %s", ed25519.PublicKeySize, ReleaseKeyPrefix)
	}
	return ed25519.PublicKey(b), nil
}

// FormatReleaseKey is the text form of a release public key.
func FormatReleaseKey(pub ed25519.PublicKey) string {
	return ReleaseKeyPrefix + base64.StdEncoding.EncodeToString(pub)
}

// ReleaseVersion is a parsed release version: MAJOR.MINOR.PATCH with an optional
// -PRERELEASE (semantic versioning 2.0.0, without build metadata), written
// with or without a leading v.
type ReleaseVersion struct {
	Major, Minor, Patch int
	Pre                 string
}

var versionRE = regexp.MustCompile(`^v?(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$`)

// ParseVersion parses a release version such as v1.4.0 or 1.5.0-rc.1.
func ParseVersion(s string) (ReleaseVersion, error) {
	if len(s) > 64 {
		return ReleaseVersion{}, fmt.Errorf("%q is longer than 64 characters", clip(s, 20))
	}
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return ReleaseVersion{}, fmt.Errorf("%q is not a release version (MAJOR.MINOR.PATCH, e.g. v1.4.0 or 1.5.0-rc.1)", s)
	}
	var v ReleaseVersion
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	v.Patch, _ = strconv.Atoi(m[3])
	v.Pre = m[4]
	return v, nil
}

// String is the version with a leading v.
func (v ReleaseVersion) String() string {
	s := fmt.Sprintf("v%d.%d.%d", v.Major, v.Minor, v.Patch)
	if v.Pre != "" {
		s += "-" + v.Pre
	}
	return s
}

// Compare orders versions by semantic-versioning precedence: -1, 0 or +1.
func (v ReleaseVersion) Compare(w ReleaseVersion) int {
	for _, d := range [][2]int{{v.Major, w.Major}, {v.Minor, w.Minor}, {v.Patch, w.Patch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case v.Pre == w.Pre:
		return 0
	case v.Pre == "":
		return 1
	case w.Pre == "":
		return -1
	}
	a, b := strings.Split(v.Pre, "."), strings.Split(w.Pre, ".")
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := comparePre(a[i], b[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

func comparePre(a, b string) int {
	na, ea := strconv.Atoi(a)
	nb, eb := strconv.Atoi(b)
	switch {
	case ea == nil && eb == nil:
		if na < nb {
			return -1
		} else if na > nb {
			return 1
		}
		return 0
	case ea == nil:
		return -1 // numeric identifiers sort before alphanumeric ones
	case eb == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// UpdateOrder is what Control.Update carries: the release to update to,
// a presigned URL to download its binary from, and whether a downgrade is
// allowed.
type UpdateOrder struct {
	Release        Release `json:"release"`
	URL            string  `json:"url"`
	AllowDowngrade bool    `json:"allow_downgrade,omitempty"`
	RolloutID      string  `json:"rollout_id,omitempty"`
}

// Update states an agent reports (UpdateStatus.State).
const (
	UpdateIdle        = "idle"        // no update under way
	UpdateDraining    = "draining"    // taking no new jobs, waiting for its leases to end
	UpdateDownloading = "downloading" // fetching the binary
	UpdateRestarting  = "restarting"  // swapped; exiting so the service manager starts the new binary
	UpdateDone        = "done"        // the new binary runs and said hello
	UpdateRefused     = "refused"     // bad signature, digest, OS/arch, version or downgrade: nothing swapped
	UpdateFailed      = "failed"      // download or swap failed: the old binary keeps running
	UpdateRolledBack  = "rolled_back" // the new binary did not come up healthy: the previous one was put back
	UpdateOptedOut    = "opted_out"   // update.auto is false: the agent does not update on its own
)

// UpdateStatus is an agent's update state, sent in hello and heartbeat.
type UpdateStatus struct {
	State   string `json:"state"`
	Target  string `json:"target,omitempty"`  // the version being updated to, or last tried
	Outcome string `json:"outcome,omitempty"` // what happened last, in a sentence
	// AtUnixMilli is when State was entered.
	AtUnixMilli int64  `json:"at_unix_ms,omitempty"`
	RolloutID   string `json:"rollout_id,omitempty"`
}

// HexSHA256 is the lower-case hex form of a SHA-256 digest.
func HexSHA256(sum [32]byte) string { return hex.EncodeToString(sum[:]) }
