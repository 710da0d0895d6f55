// Package gobuild builds the module's commands (cmd/edgeagent, ...) for the
// tests and benchmarks that run the real binaries. A binary is built once
// per process and kept in a directory of the user's cache named by a hash
// of the module's source and the build options, so the test packages of
// one `go test ./...` run, and later runs on the same source, share it.
package gobuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// modulePath is the module whose commands Build builds.
const modulePath = "github.com/edgeagent/edgeagent"

// Options are how to build a command.
type Options struct {
	// Package is the package to build, relative to the module root
	// ("installer/internal/servicetest"); default cmd/<name>.
	Package string
	// LDFlags is passed as -ldflags, such as "-X main.version=v1.2.3".
	LDFlags string
	// Env is added to the environment of go build, such as GOOS=windows.
	// CGO_ENABLED=0 unless Env sets it: the commands are built as make
	// dist builds the release (static, without cgo), so that the tests run
	// what ships, and every test that builds one (the packaging test's,
	// the benchmarks') shares one compilation of the commands' packages
	// instead of one with cgo and one without.
	Env []string
}

// env is opts.Env with CGO_ENABLED=0 unless it sets CGO_ENABLED.
func (o Options) env() []string {
	if slices.ContainsFunc(o.Env, func(e string) bool { return strings.HasPrefix(e, "CGO_ENABLED=") }) {
		return o.Env
	}
	return append([]string{"CGO_ENABLED=0"}, o.Env...)
}

// keepUnused is how long a cached build nobody used is kept.
const keepUnused = 7 * 24 * time.Hour

type result struct {
	once sync.Once
	path string
	err  error
}

var (
	mu     sync.Mutex
	builds = map[string]*result{}
)

// Build returns the path of the binary name (the command cmd/name, or
// opts.Package) built with opts, building it when this source has not been
// built with these options before. The binary is alone in its directory.
func Build(ctx context.Context, name string, opts Options) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	memo := name + "\x00" + opts.Package + "\x00" + opts.LDFlags + "\x00" + strings.Join(opts.env(), "\x00")
	mu.Lock()
	r := builds[memo]
	if r == nil {
		r = &result{}
		builds[memo] = r
	}
	mu.Unlock()
	r.once.Do(func() { r.path, r.err = build(ctx, root, name, opts) })
	return r.path, r.err
}

func build(ctx context.Context, root, name string, opts Options) (string, error) {
	key, err := sourceKey(root, name, opts)
	if err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	cache, err := cacheDir()
	if err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	dir := filepath.Join(cache, key)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	bin := filepath.Join(dir, name)
	if slices.Contains(opts.Env, "GOOS=windows") || (runtime.GOOS == "windows" && !slices.ContainsFunc(opts.Env, func(e string) bool { return strings.HasPrefix(e, "GOOS=") })) {
		bin += ".exe"
	}
	now := time.Now()
	// built says whether bin is there, and marks it in use (not pruned).
	built := func() bool {
		if _, err := os.Stat(bin); err != nil {
			return false
		}
		_ = os.Chtimes(dir, now, now)
		return true
	}
	if built() {
		return bin, nil
	}
	// One go build at a time, across the test processes of a run: the
	// commands share most of their packages, and go builds that run at
	// once each compile every package none of them has cached yet (SQLite,
	// NATS, the standard library: docs/benchmarks.md). The second build
	// waits, then compiles only what the first did not.
	unlock, err := lockBuilds(cache)
	if err != nil {
		return "", fmt.Errorf("build %s: lock the build cache: %w", name, err)
	}
	defer unlock()
	if built() { // by another process while this one waited
		return bin, nil
	}
	goBin, err := GoCommand()
	if err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	// Built under a name of its own and renamed, so that a process that
	// builds the same binary at the same time never sees half a file.
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	args := []string{"build", "-o", tmp}
	if opts.LDFlags != "" {
		args = append(args, "-ldflags", opts.LDFlags)
	}
	pkg := opts.Package
	if pkg == "" {
		pkg = "cmd/" + name
	}
	cmd := exec.CommandContext(ctx, goBin, append(args, "./"+pkg)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), opts.env()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build %s: %w\n%s", name, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	prune(cache, now)
	return bin, nil
}

// GoCommand returns the go command: the one on PATH, else the one of the
// toolchain this program was built with (go test does not put the
// toolchain on a test's PATH).
func GoCommand() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		return "", errors.New("no go command on PATH or in GOROOT")
	}
	return p, nil
}

// ModuleRoot returns the directory of the module's go.mod, looked for from
// the working directory up.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module "+modulePath+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find module root: no go.mod of %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// sourceKey hashes what goes into the binary: the module's files but its
// tests, test data and hidden directories, the options, the Go release
// and GOFLAGS.
func sourceKey(root, name string, opts Options) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%q\x00%s\x00%s\x00", name, opts.Package, opts.LDFlags, opts.env(), runtime.Version(), os.Getenv("GOFLAGS"))
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		base := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") || base == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasSuffix(base, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(h, "%s\x00", filepath.ToSlash(rel))
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		_, err = h.Write([]byte{0})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("hash module source: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

// cacheDir is where the builds are kept: a directory of the user's cache.
func cacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = filepath.Join(os.TempDir(), fmt.Sprintf("edgeagent-%d", os.Getuid()))
	}
	dir := filepath.Join(base, "edgeagent-test-bin")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create build cache: %w", err)
	}
	return dir, nil
}

// prune removes the builds nobody used for keepUnused.
func prune(cache string, now time.Time) {
	entries, err := os.ReadDir(cache)
	if err != nil {
		return
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && e.IsDir() && now.Sub(fi.ModTime()) > keepUnused {
			_ = os.RemoveAll(filepath.Join(cache, e.Name()))
		}
	}
}
