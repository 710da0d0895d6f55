//go:build unix

package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recorder is a testing.TB that records Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(r)
}

// fatal runs f with a recorder and returns what it failed with.
func fatal(t *testing.T, f func(tb testing.TB)) (failed string) {
	r := &recorder{TB: t}
	defer func() {
		if v := recover(); v != nil && v != r {
			panic(v)
		}
		failed = r.failed
	}()
	f(r)
	return ""
}

func sh(script string) Command {
	return Command{Path: "/bin/sh", Args: []string{"-c", script}, Name: "sh"}
}

// TestProcessLogAndExit: the log of a process is searchable while it runs
// and after it exited, and Wait returns its exit status.
func TestProcessLogAndExit(t *testing.T) {
	p := Start(t, sh(`echo '{"message":"ready","n":1}'; echo plain line; read x; exit 3`))
	if l := p.WaitForLine(t, "the plain line", func(l string) bool { return l == "plain line" }); l != "plain line" {
		t.Fatalf("WaitForLine returned %q", l)
	}
	if e := p.WaitForEntry(t, "ready"); e["n"] != float64(1) {
		t.Errorf("entry %v", e)
	}
	if g := p.Grep("plain"); len(g) != 1 || p.Tail(1)[0] != "plain line" {
		t.Errorf("Grep %q, Tail %q", g, p.Tail(1))
	}
	p.Kill()
	if !p.Exited() {
		t.Fatal("not exited after Kill")
	}
	q := Start(t, sh(`exit 3`))
	if code := q.Wait(t); code != 3 {
		t.Errorf("exit status %d, want 3", code)
	}
	if out, errOut, code := Run(t, sh(`echo out; echo err >&2; exit 4`)); out != "out\n" || errOut != "err\n" || code != 4 {
		t.Errorf("Run: %q %q %d", out, errOut, code)
	}
}

// TestMustCleanShutdown: SIGTERM must end the process with status 0 and
// no crash report in its log.
func TestMustCleanShutdown(t *testing.T) {
	clean := Start(t, sh(`trap 'exit 0' TERM; echo up; while :; do sleep 0.05; done`))
	clean.WaitForLine(t, "up", func(l string) bool { return l == "up" })
	if f := fatal(t, clean.MustCleanShutdown); f != "" {
		t.Errorf("a clean shutdown failed: %s", f)
	}
	for name, script := range map[string]string{
		"exit 1":    `trap 'exit 1' TERM; echo up; while :; do sleep 0.05; done`,
		"panic":     `trap 'echo "panic: boom"; echo "goroutine 1 [running]:"; exit 0' TERM; echo up; while :; do sleep 0.05; done`,
		"data race": `trap 'echo "WARNING: DATA RACE"; exit 0' TERM; echo up; while :; do sleep 0.05; done`,
	} {
		p := Start(t, sh(script))
		p.WaitForLine(t, "up", func(l string) bool { return l == "up" })
		if f := fatal(t, p.MustCleanShutdown); f == "" {
			t.Errorf("%s: MustCleanShutdown passed", name)
		} else if name != "exit 1" && !strings.Contains(f, "logged a crash") {
			t.Errorf("%s: failed with %q", name, f)
		}
	}
}

// TestWaitForLineFailsOnExit: a process that exits without the line fails
// the wait at once, naming what it waited for.
func TestWaitForLineFailsOnExit(t *testing.T) {
	p := Start(t, sh(`echo something else`))
	f := fatal(t, func(tb testing.TB) { p.WaitForLine(tb, "the answer", func(l string) bool { return l == "42" }) })
	if !strings.Contains(f, "exited") || !strings.Contains(f, "the answer") {
		t.Errorf("failed with %q", f)
	}
}

// TestSupervise: a supervised command is started again after every exit,
// as a service manager restarts a service, until it exits with a status
// listed in PreventExit or the supervisor is stopped.
func TestSupervise(t *testing.T) {
	count := filepath.Join(t.TempDir(), "starts")
	// Exits 75 on its first two starts, then runs until SIGTERM (exit 0).
	s := Supervise(t, sh(`n=$(cat `+count+` 2>/dev/null || echo 0); n=$((n+1)); echo $n > `+count+`
[ $n -lt 3 ] && exit 75
trap 'exit 0' TERM; echo up $n; while :; do sleep 0.05; done`), SuperviseOptions{PreventExit: []int{2}})
	third := s.WaitStarts(t, 3)
	third.WaitForLine(t, "up 3", func(l string) bool { return l == "up 3" })
	if got := s.Exits(); !slices.Equal(got, []int{75, 75}) {
		t.Fatalf("exits %v, want [75 75]", got)
	}
	if code := s.Stop(t); code != 0 || len(s.Processes()) != 3 {
		t.Fatalf("stop: exit %d, %d starts", code, len(s.Processes()))
	}

	prevented := Supervise(t, sh(`exit 2`), SuperviseOptions{PreventExit: []int{2}})
	if f := fatal(t, func(tb testing.TB) { prevented.WaitStarts(tb, 2) }); !strings.Contains(f, "then not again (exits [2])") {
		t.Fatalf("a prevented exit: %q", f)
	}
}
