package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// module writes a module whose package p builds on linux/amd64 only: its
// arm64 file has a type error, and its code calls a function only the
// Linux file declares.
func module(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":        "module example.com/fixture\n\ngo 1.26\n",
		"p/p.go":        "package p\n\nfunc Name() string { return platform() }\n",
		"p/p_linux.go":  "package p\n\nfunc platform() string { return \"linux\" }\n",
		"p/w_arm64.go":  "package p\n\nvar wordBits int = \"64\"\n",
		"p/w_amd64.go":  "package p\n\nvar wordBits int = 64\n",
		"cmd/main.go":   "package main\n\nimport \"example.com/fixture/p\"\n\nfunc main() { println(p.Name()) }\n",
		"cmd/other.go":  "package main\n",
		"p/doc_test.go": "package p\n\nvar inTests int = \"tests are not checked\"\n",
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestTypeErrorsPerPlatform: a package and the packages it imports are
// checked with the files the platform's build constraints pick, so an
// error in one platform's file, or a name only another platform's file
// declares, is reported with its file and line, while the platform whose
// files are right passes and a test file is not read.
func TestTypeErrorsPerPlatform(t *testing.T) {
	dir := module(t)
	for _, c := range []struct {
		os, arch string
		want     []string // each a line of the output, by its start
	}{
		{"linux", "amd64", nil},
		{"linux", "arm64", []string{filepath.Join(dir, "p", "w_arm64.go") + ":3:20: cannot use \"64\""}},
		{"windows", "amd64", []string{filepath.Join(dir, "p", "p.go") + ":3:29: undefined: platform"}},
	} {
		var out bytes.Buffer
		err := run([]string{"-C", dir, "-os", c.os, "-arch", c.arch, "./cmd"}, &out)
		t.Logf("%s/%s:\n%s", c.os, c.arch, out.String())
		if len(c.want) == 0 {
			if err != nil || !strings.Contains(out.String(), "no problem") {
				t.Errorf("%s/%s: %v, want no problem", c.os, c.arch, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s/%s: no error, want %q", c.os, c.arch, c.want)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), "\n"+w) && !strings.HasPrefix(out.String(), w) {
				t.Errorf("%s/%s: output lacks a line %q", c.os, c.arch, w)
			}
		}
		if strings.Contains(out.String(), "tests are not checked") {
			t.Errorf("%s/%s: a test file was checked", c.os, c.arch)
		}
	}
}

// TestBadArguments: an architecture the compiler does not know and a
// missing package list are refused with what was wrong.
func TestBadArguments(t *testing.T) {
	dir := module(t)
	var out bytes.Buffer
	if err := run([]string{"-C", dir, "-arch", "z80", "./cmd"}, &out); err == nil || !strings.Contains(err.Error(), "-arch z80") {
		t.Errorf("-arch z80: %v", err)
	}
	if err := run([]string{"-C", dir}, &out); err == nil || !strings.Contains(err.Error(), "no packages named") {
		t.Errorf("no packages: %v", err)
	}
	if err := run([]string{"-C", dir, "./nosuch"}, &out); err == nil {
		t.Errorf("./nosuch: no error; output %s", out.String())
	}
}
