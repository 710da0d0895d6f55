package installer

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// recordingLogger is a system log that records its entries.
type recordingLogger struct {
	mu      sync.Mutex
	entries []string
}

func (r *recordingLogger) add(kind string, v []any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, kind+": "+fmt.Sprint(v...))
	return nil
}
func (r *recordingLogger) Error(v ...any) error   { return r.add("error", v) }
func (r *recordingLogger) Warning(v ...any) error { return r.add("warning", v) }
func (r *recordingLogger) Info(v ...any) error    { return r.add("info", v) }

// TestServiceLogRouting checks which lines reach the system log: warnings
// and errors in either log format and lines that are not log lines, and
// that every line, whole, reaches the file, also when written in pieces.
func TestServiceLogRouting(t *testing.T) {
	var file bytes.Buffer
	sys := &recordingLogger{}
	l := &serviceLog{file: &file, sys: sys}
	input := []string{
		`{"level":"info","message":"connected"}`,
		`{"level":"warn","message":"phone R58 offline"}`,
		`{"level":"error","message":"upload failed"}`,
		`{"level":"debug","message":"tick"}`,
		`2026-01-02T03:04:05.000Z INF starting edgeagent version=dev`,
		`2026-01-02T03:04:05.000Z WRN no phone backend configured`,
		`2026-01-02T03:04:05.000Z ERR edgeagent stopped with an error`,
		`/etc/edgeagent/config.yaml:3:1: unknown field "bogus"`,
		``,
	}
	all := strings.Join(input, "\n") + "\npartial"
	for i := 0; i < len(all); i += 7 { // in pieces that split lines
		l.Write([]byte(all[i:min(i+7, len(all))]))
	}
	l.Info("service started")
	l.Flush()

	want := []string{
		`warning: {"level":"warn","message":"phone R58 offline"}`,
		`error: {"level":"error","message":"upload failed"}`,
		`warning: 2026-01-02T03:04:05.000Z WRN no phone backend configured`,
		`error: 2026-01-02T03:04:05.000Z ERR edgeagent stopped with an error`,
		`error: /etc/edgeagent/config.yaml:3:1: unknown field "bogus"`,
		`info: service started`,
		`error: partial`,
	}
	if got := strings.Join(sys.entries, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("system log:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	wantFile := strings.Join(input, "\n") + "\n" +
		`{"level":"info","component":"service","message":"service started"}` + "\npartial\n"
	if file.String() != wantFile {
		t.Errorf("file:\n%s\nwant:\n%s", file.String(), wantFile)
	}
}

// TestServiceLogWithoutDestinations checks that a log with neither a file
// nor a system log accepts writes.
func TestServiceLogWithoutDestinations(t *testing.T) {
	l := &serviceLog{}
	if n, err := l.Write([]byte("x\ny")); n != 3 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	l.Error("e")
	l.Flush()
}
