package gobuild

import (
	"context"
	"debug/buildinfo"
	"os"
	"path/filepath"
	"testing"
)

// TestSourceKey checks what the cache key follows: the module's files and
// the options, not its tests, test data or hidden directories.
func TestSourceKey(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	key := func(opts Options) string {
		t.Helper()
		k, err := sourceKey(root, "edgeagent", opts)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write("go.mod", "module "+modulePath+"\n")
	write("cmd/edgeagent/main.go", "package main\n")
	write("coordinator/pgstore/migrations/1_init.sql", "CREATE TABLE jobs ();\n")
	base := key(Options{})

	write("cmd/edgeagent/main_test.go", "package main\n")
	write("cmd/edgeagent/testdata/x.golden", "x\n")
	write(".git/HEAD", "ref: refs/heads/main\n")
	if k := key(Options{}); k != base {
		t.Errorf("a test file, test data or .git changed the key")
	}
	write("coordinator/pgstore/migrations/1_init.sql", "CREATE TABLE jobs (id TEXT);\n")
	changed := key(Options{})
	if changed == base {
		t.Errorf("an embedded file's change left the key alone")
	}
	if key(Options{LDFlags: "-X main.version=v1"}) == changed || key(Options{Env: []string{"GOOS=windows"}}) == changed ||
		key(Options{Env: []string{"CGO_ENABLED=1"}}) == changed {
		t.Errorf("the build options do not change the key")
	}
}

// TestBuildOnce builds edgeagent twice in one process and checks the
// second call reuses the first build.
func TestBuildOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds edgeagent")
	}
	if _, err := GoCommand(); err != nil {
		t.Skip(err)
	}
	first, err := Build(context.Background(), "edgeagent", Options{})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(first)
	if err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("built binary %s: %v, mode %v", first, err, fi.Mode())
	}
	// Built as the release is: without cgo.
	info, err := buildinfo.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	cgo := "unset"
	for _, s := range info.Settings {
		if s.Key == "CGO_ENABLED" {
			cgo = s.Value
		}
	}
	if cgo != "0" {
		t.Errorf("built binary's CGO_ENABLED: %s, want 0", cgo)
	}
	second, err := Build(context.Background(), "edgeagent", Options{})
	if err != nil || second != first {
		t.Fatalf("second build: %s, %v; want %s", second, err, first)
	}
	if fi2, err := os.Stat(second); err != nil || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("the second call built again")
	}
	// Another process (a fresh memo) finds the same build in the cache.
	mu.Lock()
	builds = map[string]*result{}
	mu.Unlock()
	third, err := Build(context.Background(), "edgeagent", Options{})
	if err != nil || third != first {
		t.Fatalf("build after the memo was cleared: %s, %v; want %s", third, err, first)
	}
	if fi3, err := os.Stat(third); err != nil || !fi3.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("the cached build was not reused")
	}
}
