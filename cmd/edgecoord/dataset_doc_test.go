package main

import (
	"flag"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDatasetDocFlags: the flag table of docs/dataset.md ("The command")
// names exactly the flags of edgecoord observations export.
func TestDatasetDocFlags(t *testing.T) {
	b, err := os.ReadFile("../../docs/dataset.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## The command\n")
	if !ok {
		t.Fatal("docs/dataset.md has no section The command")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var documented []string
	row := regexp.MustCompile("^\\| (`[^|]*(\\\\\\|[^|]*)*) \\|")
	flagName := regexp.MustCompile("`(-{1,2}[a-z-]+)")
	for line := range strings.SplitSeq(sec, "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, f := range flagName.FindAllStringSubmatch(m[1], -1) {
			documented = append(documented, strings.TrimLeft(f[1], "-"))
		}
	}
	app := newApp(io.Discard, io.Discard, nil)
	cmd, _ := app.Find([]string{"observations", "export"})
	if cmd == nil {
		t.Fatal("no command observations export")
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	cmd.Flags(fs)
	var flags []string
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f.Name) })
	slices.Sort(documented)
	slices.Sort(flags)
	if !slices.Equal(documented, flags) {
		t.Fatalf("docs/dataset.md documents %v; the command has %v", documented, flags)
	}
}
