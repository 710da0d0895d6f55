package securitytest

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMakefileFuzzesEveryTarget: make test runs every fuzz target of the
// module (the Makefile's FUZZ_TARGETS), so a decoder's fuzz target cannot
// be added and then never run.
func TestMakefileFuzzesEveryTarget(t *testing.T) {
	root := filepath.Join("..", "..")
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(string(mk)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "FUZZ_TARGETS :=") {
			in, line = true, strings.TrimPrefix(line, "FUZZ_TARGETS :=")
		}
		if !in {
			continue
		}
		listed = append(listed, strings.Fields(strings.TrimSuffix(line, `\`))...)
		if !strings.HasSuffix(line, `\`) {
			break
		}
	}
	if len(listed) == 0 {
		t.Fatal("the Makefile has no FUZZ_TARGETS")
	}

	fuzzFunc := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(\w+ \*testing\.F\)`)
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "dist") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, m := range fuzzFunc.FindAllStringSubmatch(string(src), -1) {
			found = append(found, "./"+filepath.ToSlash(rel)+":"+m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(listed)
	slices.Sort(found)
	for _, f := range found {
		if !slices.Contains(listed, f) {
			t.Errorf("fuzz target %s is not in the Makefile's FUZZ_TARGETS", f)
		}
	}
	for _, l := range listed {
		if !slices.Contains(found, l) {
			t.Errorf("FUZZ_TARGETS lists %s, which does not exist", l)
		}
	}
	// FUZZ_UNGUIDED names packages of FUZZ_TARGETS: an entry that names
	// no package with a target would be a stale exception.
	for line := range strings.SplitSeq(string(mk), "\n") {
		rest, ok := strings.CutPrefix(line, "FUZZ_UNGUIDED ?=")
		if !ok {
			continue
		}
		for _, pkg := range strings.Fields(rest) {
			if !slices.ContainsFunc(listed, func(l string) bool { return strings.HasPrefix(l, pkg+":") }) {
				t.Errorf("FUZZ_UNGUIDED lists %s, which has no fuzz target in FUZZ_TARGETS", pkg)
			}
		}
	}
	t.Logf("%d fuzz targets, all run by make fuzz-short", len(found))
}
