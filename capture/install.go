package capture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

// Errors of install_app steps (docs/protocol.md section 6.8).
var (
	// ErrInstall: the phone's package manager refused the APK, or the
	// package it then reports is not the package and versionCode recorded
	// with the APK.
	ErrInstall = errors.New("install failed")
	// ErrAPKDownload: the APK could not be downloaded intact (an error of
	// the bucket or the network, a size or SHA-256 other than the
	// coordinator stated).
	ErrAPKDownload = errors.New("apk download failed")
)

// LocalAPK is an APK downloaded for an install_app step, its SHA-256
// checked: the file at Path is the APK's bytes.
type LocalAPK struct {
	protocol.APK
	Path string
}

// APKFetcher downloads the APKs of a job's install_app steps. The agent
// hands one to the runner through the job's context (WithAPKFetcher).
type APKFetcher interface {
	// FetchAPK downloads the APK with SHA-256 sha256 into a new file in
	// dir and checks its size and hash; errors wrap ErrAPKDownload. The
	// caller removes the file.
	FetchAPK(ctx context.Context, sha256, dir string) (LocalAPK, error)
}

type apkFetcherKey struct{}

// WithAPKFetcher returns ctx carrying f for the install_app steps run
// under it.
func WithAPKFetcher(ctx context.Context, f APKFetcher) context.Context {
	return context.WithValue(ctx, apkFetcherKey{}, f)
}

func apkFetcherFrom(ctx context.Context) APKFetcher {
	f, _ := ctx.Value(apkFetcherKey{}).(APKFetcher)
	return f
}

// APKInstaller is implemented by phones that install APKs: ADBDevice and
// Simulated.
type APKInstaller interface {
	// InstallAPK installs (or updates, keeping the app's data) the APK of
	// size bytes in the local file path; a refusal of the phone's package
	// manager wraps ErrInstall.
	InstallAPK(ctx context.Context, path string, size int64) error
}

var (
	_ APKInstaller = (*ADBDevice)(nil)
	_ APKInstaller = (*Simulated)(nil)
)

// InstallTimeout bounds one install of an APK of size bytes: two minutes,
// and a second more per MiB (the push to the phone and the package
// manager's own work).
func InstallTimeout(size int64) time.Duration {
	return 2*time.Minute + time.Duration(size>>20)*time.Second
}

// installApp runs an install_app step: download the APK, install it, and
// check that the phone then reports the package at the versionCode
// recorded with the APK.
func (r *Runner) installApp(ctx context.Context, s protocol.Step) error {
	f := apkFetcherFrom(ctx)
	if f == nil {
		return invalidStep("install_app: this job carries no download of apk %s", s.APK)
	}
	inst, ok := r.dev.(APKInstaller)
	av, ok2 := r.dev.(AppVersioner)
	if !ok || !ok2 {
		return invalidStep("install_app: phone %s cannot install apps", r.dev.Serial())
	}
	dir := r.opts.SpoolDir
	if dir == "" {
		dir = os.TempDir()
	}
	apk, err := f.FetchAPK(ctx, s.APK, dir)
	if err != nil {
		return err
	}
	defer os.Remove(apk.Path)
	if err := inst.InstallAPK(ctx, apk.Path, apk.Size); err != nil {
		return err
	}
	v, err := av.AppVersion(ctx, apk.Package)
	if errors.Is(err, ErrAppNotInstalled) {
		return fmt.Errorf("%w: the package manager installed apk %s, but no package %s is there: the APK is another package than the one recorded with it (edgecoord apk add --package)",
			ErrInstall, short(apk.SHA256), apk.Package)
	}
	if err != nil {
		return err
	}
	if v.VersionCode != apk.VersionCode {
		return fmt.Errorf("%w: after installing apk %s, %s reports versionCode %d, not the %d recorded with the APK (edgecoord apk add --version-code)",
			ErrInstall, short(apk.SHA256), apk.Package, v.VersionCode, apk.VersionCode)
	}
	// Provenance: the version the job's later steps run.
	r.mu.Lock()
	if r.versions == nil {
		r.versions = map[string]protocol.AppVersion{}
	}
	r.versions[apk.Package] = v
	r.mu.Unlock()
	return nil
}

// short is the first 12 hex digits of a SHA-256, as the errors name an APK.
func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12] + "…"
	}
	return sha
}

// InstallAPK pushes the APK to /data/local/tmp and installs it with
// `pm install -r` (an update keeps the app's data), which prints
// "Success", or "Failure [INSTALL_…: …]" with the package manager's
// reason; the pushed file is removed either way.
func (d *ADBDevice) InstallAPK(ctx context.Context, path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("install_app on %s: %w", d.serial, err)
	}
	defer f.Close()
	remote := "/data/local/tmp/edgeagent-" + randHex(8) + ".apk"
	return d.op(ctx, "install_app", InstallTimeout(size), func(ctx context.Context) error {
		y, err := d.c.Sync(ctx, d.serial)
		if err != nil {
			return err
		}
		err = y.Send(remote, 0o644, time.Now(), f)
		y.Close()
		defer d.cleanup(remote)
		if err != nil {
			return err
		}
		res, err := d.shell(ctx, "pm install -r "+remote)
		if err != nil {
			return err
		}
		out := strings.TrimSpace(string(res.Stdout) + "\n" + string(res.Stderr))
		for line := range strings.Lines(out) {
			if strings.TrimSpace(line) == "Success" && res.ExitCode == 0 {
				return nil
			}
		}
		return fmt.Errorf("%w: pm install exited with status %d: %s", ErrInstall, res.ExitCode, clipText(out, 300))
	})
}

// InstallAPK installs an APK made by SimAPK: the phone then reports its
// package installed at its version. Another file is refused as a phone's
// package manager refuses it.
func (s *Simulated) InstallAPK(ctx context.Context, path string, size int64) error {
	b, err := readBounded(path, size)
	if err != nil {
		return fmt.Errorf("install_app on %s: %w", s.serial, err)
	}
	return s.do(ctx, SimCall{Op: protocol.OpInstallApp}, func() error {
		v, err := ParseSimAPK(b)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInstall, err)
		}
		s.installLocked(v)
		return nil
	})
}

// readBounded reads the file at path, refusing one longer than size.
func readBounded(path string, size int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > size || size > protocol.MaxAPKSize {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d stated", path, fi.Size(), size)
	}
	return os.ReadFile(path)
}

// InstallApp installs v.Package at version v on the simulated phone, as a
// package manager does once it has read an APK (fakeadbd's `pm install`).
func (s *Simulated) InstallApp(v protocol.AppVersion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.installLocked(v)
}

func (s *Simulated) installLocked(v protocol.AppVersion) {
	if s.packages != nil {
		s.packages[v.Package] = true
	}
	if s.versions == nil {
		s.versions = map[string]protocol.AppVersion{}
	}
	s.versions[v.Package] = v
}
