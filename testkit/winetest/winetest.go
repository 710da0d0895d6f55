//go:build linux

// Package winetest runs Windows builds of the project under Debian's Wine
// 8.0 (packages wine64 and gcc-mingw-w64-x86-64) in a throwaway prefix
// with the ProcessPrng shim (windows/wine/processprng.c) the Go runtime
// needs. Without Wine a test is skipped, or fails under CI=true;
// EDGE_TEST_WINE=0 turns the Wine tests off everywhere.
package winetest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// EnvTestWine set to 0 skips the Wine tests.
const EnvTestWine = "EDGE_TEST_WINE"

// Prefix is a Wine prefix of one test.
type Prefix struct {
	wine, server string
	dir          string
	env          []string
}

// Tools are the programs a Wine test needs.
type Tools struct{ wine, gcc string }

// Find returns Wine and the MinGW compiler, or skips t (fails it under
// CI=true) when either is missing, under -short, or with EDGE_TEST_WINE=0.
// A test calls it before slow preparation (builds) that NewPrefixWith
// then overlaps.
func Find(t *testing.T) Tools {
	t.Helper()
	if os.Getenv(EnvTestWine) == "0" {
		t.Skip(EnvTestWine + "=0")
	}
	if testing.Short() {
		t.Skip("-short: a Wine test takes about 20s")
	}
	var wine string
	for _, name := range []string{"wine64", "wine", "/usr/lib/wine/wine64"} {
		if p, err := exec.LookPath(name); err == nil {
			wine = p
			break
		}
	}
	gcc, gccErr := exec.LookPath("x86_64-w64-mingw32-gcc")
	if wine == "" || gccErr != nil {
		testenv.Missing(t, "wine64 and x86_64-w64-mingw32-gcc (Debian packages wine64, gcc-mingw-w64-x86-64); set %s=0 to skip", EnvTestWine)
	}
	return Tools{wine: wine, gcc: gcc}
}

// NewPrefix creates a Wine prefix for t with the ProcessPrng shim in its
// system32, or skips t (fails it under CI=true) when Wine or MinGW is
// missing. The prefix's wineserver is stopped when t ends.
func NewPrefix(t *testing.T) *Prefix {
	t.Helper()
	return NewPrefixWith(t, Find(t))
}

// NewPrefixWith is NewPrefix with the tools Find returned.
func NewPrefixWith(t *testing.T, tools Tools) *Prefix {
	t.Helper()
	wine, gcc := tools.wine, tools.gcc
	server := filepath.Join(filepath.Dir(wine), "wineserver")
	if _, err := os.Stat(server); err != nil {
		server = filepath.Join(filepath.Dir(wine), "wineserver64")
	}
	w := &Prefix{wine: wine, server: server, dir: filepath.Join(t.TempDir(), "prefix")}
	w.env = append(os.Environ(),
		"WINEPREFIX="+w.dir,
		"WINEDEBUG=-all",
		"WINEDLLOVERRIDES=mscoree,mshtml=;winemenubuilder.exe=d", // no Mono or Gecko prompts, no menus
		"DISPLAY=",
	)
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	wineserver := func(arg string) error {
		cmd := exec.Command(w.server, arg)
		cmd.Env = w.env
		return cmd.Run()
	}
	// A persistent wineserver keeps the prefix booted between commands.
	if err := wineserver("-p"); err != nil {
		t.Fatalf("start wineserver: %v", err)
	}
	t.Cleanup(func() { _ = wineserver("-k") })
	if _, _, code := w.Run(t, 90*time.Second, "cmd.exe", "/c", "exit 0"); code != 0 {
		t.Fatalf("creating the Wine prefix: exit %d", code)
	}
	// Go 1.24+ needs ProcessPrng from bcryptprimitives.dll, which Wine
	// 8.0 lacks; the DLL must be in system32, not beside the program.
	dll := filepath.Join(w.dir, "drive_c", "windows", "system32", "bcryptprimitives.dll")
	if out, err := exec.Command(gcc, "-shared", "-O2", "-s", "-o", dll, filepath.Join(repoRoot(t), "windows", "wine", "processprng.c")).CombinedOutput(); err != nil {
		t.Fatalf("build the ProcessPrng shim: %v\n%s", err, out)
	}
	return w
}

// repoRoot is the repository's top directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Run runs a program under Wine and returns its output and exit status.
// The output goes through files, not pipes: Wine's system processes
// outlive the command and inherit its stdout and stderr.
func (w *Prefix) Run(t *testing.T, timeout time.Duration, prog string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.wine, append([]string{prog}, args...)...)
	cmd.Env = w.env
	outFile, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	errFile, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	cmd.Stdout, cmd.Stderr = outFile, errFile
	err = cmd.Run()
	out, _ := os.ReadFile(outFile.Name())
	errOut, _ := os.ReadFile(errFile.Name())
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("wine %s %s: no answer within %s\nstdout: %s\nstderr: %s", prog, strings.Join(args, " "), timeout, out, errOut)
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("wine %s: %v", prog, err)
	}
	return string(out), string(errOut), code
}

// Path returns the Unix path of the Windows path C:\<rel> in the prefix.
func (w *Prefix) Path(rel string) string {
	return filepath.Join(w.dir, "drive_c", filepath.FromSlash(strings.ReplaceAll(rel, `\`, "/")))
}

// Install copies a file into C:\edgeagent of the prefix and returns its
// Windows path.
func (w *Prefix) Install(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := w.Path("edgeagent")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(file)
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return `C:\edgeagent\` + name
}

// BuildTest compiles the tests of package pkg (a path relative to the
// repository, "./agent/power") for windows/amd64 and returns the binary.
func BuildTest(t *testing.T, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), strings.ReplaceAll(filepath.Base(pkg), ".", "_")+".test.exe")
	cmd := exec.Command("go", "test", "-c", "-o", out, pkg)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -c %s for windows: %v\n%s", pkg, err, b)
	}
	return out
}
