package installer

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
)

// RunFunc is the work of a service: it runs until ctx is cancelled and
// writes its diagnostics to stderr.
type RunFunc func(ctx context.Context, stderr io.Writer) error

// systemLogger is the part of kardianos/service's Logger the service log
// uses: the Windows Event Log.
type systemLogger interface {
	Error(v ...any) error
	Warning(v ...any) error
	Info(v ...any) error
}

// serviceLog is the stderr of a service. Every line goes to the log file;
// warnings and errors also go to the system log: log lines (zerolog's JSON
// or console format) at level warn or above, and lines that are not log
// lines, such as the problems of an invalid config. Either destination may
// be nil.
type serviceLog struct {
	mu      sync.Mutex
	file    io.Writer
	sys     systemLogger
	partial []byte
}

// Write writes the complete lines of p and keeps a trailing partial line
// for the next call. It never fails: a service has nowhere else to report.
func (l *serviceLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	data := append(l.partial, p...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		l.line(data[:i+1])
		data = data[i+1:]
	}
	l.partial = append([]byte(nil), data...)
	return len(p), nil
}

// Flush writes a trailing partial line.
func (l *serviceLog) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.line(append(l.partial, '\n'))
		l.partial = nil
	}
}

func (l *serviceLog) line(line []byte) {
	if l.file != nil {
		_, _ = l.file.Write(line)
	}
	if l.sys == nil {
		return
	}
	text := string(bytes.TrimRight(line, "\r\n"))
	if text == "" {
		return
	}
	switch lineLevel(line) {
	case "trace", "debug", "info":
	case "warn":
		_ = l.sys.Warning(text)
	default:
		_ = l.sys.Error(text)
	}
}

// consoleLevels are the level marks of zerolog's console format.
var consoleLevels = map[string]string{
	"TRC": "trace", "DBG": "debug", "INF": "info", "WRN": "warn",
	"ERR": "error", "FTL": "fatal", "PNC": "panic",
}

// lineLevel returns the level of a log line in zerolog's JSON or console
// format, or "" for a line that is neither.
func lineLevel(line []byte) string {
	var entry struct {
		Level string `json:"level"`
	}
	if json.Unmarshal(line, &entry) == nil {
		return entry.Level
	}
	if f := strings.Fields(string(line)); len(f) >= 2 {
		return consoleLevels[f[1]]
	}
	return ""
}

// Info records an event of the service itself, such as its start, in both
// logs.
func (l *serviceLog) Info(msg string) { l.event(msg, false) }

// Error records a failure of the service itself in both logs.
func (l *serviceLog) Error(msg string) { l.event(msg, true) }

func (l *serviceLog) event(msg string, isErr bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		level := "info"
		if isErr {
			level = "error"
		}
		b, _ := json.Marshal(struct {
			Level     string `json:"level"`
			Component string `json:"component"`
			Message   string `json:"message"`
		}{level, "service", msg})
		_, _ = l.file.Write(append(b, '\n'))
	}
	if l.sys != nil {
		if isErr {
			_ = l.sys.Error(msg)
		} else {
			_ = l.sys.Info(msg)
		}
	}
}
