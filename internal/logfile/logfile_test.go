package logfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRotation writes lines past the size limit several times and checks
// that every file stays within the limit, that lines are neither split nor
// lost among the kept files, and that only MaxFiles old files remain.
func TestRotation(t *testing.T) {
	name := filepath.Join(t.TempDir(), "logs", "edgeagent.log")
	l, err := Open(name, Options{MaxSize: 100, MaxFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		line := fmt.Sprintf("line %02d %s\n", i, strings.Repeat("x", 20)) // 30 bytes
		if _, err := l.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// 3 lines per file: lines 18-19 in the current file, 15-17 in .1,
	// 12-14 in .2, and .3 must not exist.
	want := map[string][]int{name: {18, 19}, name + ".1": {15, 16, 17}, name + ".2": {12, 13, 14}}
	for file, lines := range want {
		got := read(t, file)
		if len(got) > 100 {
			t.Errorf("%s: %d bytes, want at most 100", filepath.Base(file), len(got))
		}
		var wantText strings.Builder
		for _, i := range lines {
			fmt.Fprintf(&wantText, "line %02d %s\n", i, strings.Repeat("x", 20))
		}
		if got != wantText.String() {
			t.Errorf("%s:\n%s\nwant:\n%s", filepath.Base(file), got, wantText.String())
		}
	}
	if _, err := os.Stat(name + ".3"); !os.IsNotExist(err) {
		t.Errorf("%s.3 exists (err %v); only 2 rotated files may be kept", filepath.Base(name), err)
	}
}

// TestReopenAppends checks that opening an existing log appends to it and
// counts its size toward the limit.
func TestReopenAppends(t *testing.T) {
	name := filepath.Join(t.TempDir(), "a.log")
	if err := os.WriteFile(name, []byte(strings.Repeat("o", 90)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(name, Options{MaxSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Write([]byte("new line\n")); err != nil { // 91+9 = 100: fits
		t.Fatal(err)
	}
	if got := read(t, name); !strings.HasSuffix(got, "\nnew line\n") || len(got) != 100 {
		t.Fatalf("appended file = %q", got)
	}
	if _, err := l.Write([]byte("next\n")); err != nil { // would exceed: rotate
		t.Fatal(err)
	}
	if got := read(t, name); got != "next\n" {
		t.Fatalf("after rotation the current file holds %q, want %q", got, "next\n")
	}
	if got := read(t, name+".1"); len(got) != 100 {
		t.Fatalf("rotated file has %d bytes, want 100", len(got))
	}
}

// TestOversizedWrite checks that a write larger than the limit is not
// split.
func TestOversizedWrite(t *testing.T) {
	name := filepath.Join(t.TempDir(), "a.log")
	l, err := Open(name, Options{MaxSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	big := strings.Repeat("b", 25) + "\n"
	for range 2 {
		if _, err := l.Write([]byte(big)); err != nil {
			t.Fatal(err)
		}
	}
	if got := read(t, name); got != big {
		t.Errorf("current file = %q, want one whole line", got)
	}
	if got := read(t, name+".1"); got != big {
		t.Errorf("rotated file = %q, want one whole line", got)
	}
}

// TestConcurrentWrites checks that concurrent lines are all kept whole.
func TestConcurrentWrites(t *testing.T) {
	name := filepath.Join(t.TempDir(), "a.log")
	l, err := Open(name, Options{MaxSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				fmt.Fprintf(l, "g%d-%03d\n", g, i)
			}
		})
	}
	wg.Wait()
	l.Close()
	lines := strings.Split(strings.TrimSuffix(read(t, name), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, line := range lines {
		if len(line) != len("g0-000") {
			t.Fatalf("mangled line %q", line)
		}
	}
}

// TestWriteAfterClose checks that a closed file reports an error.
func TestWriteAfterClose(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "a.log"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := l.Write([]byte("x\n")); err == nil {
		t.Fatal("write after close succeeded")
	}
}
