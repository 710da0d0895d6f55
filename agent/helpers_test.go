package agent_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// leakCheck fails the test if goroutines started during it are still
// running once all of its cleanups (agent, coordinator, NATS server) have
// run. Call it first: cleanups run last-registered first.
func leakCheck(t *testing.T) {
	t.Helper()
	opts := []goleak.Option{
		goleak.IgnoreCurrent(),
		// Idle keep-alive connections of HTTP clients (minio-go), closed by
		// their transport's idle timer.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		// The output copier of the test binary's MinIO server process.
		goleak.IgnoreAnyFunction("os/exec.(*Cmd).writerDescriptor.func1"),
	}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		var left []string
		for range 50 { // goroutines that are ending get a moment
			left = leftovers(goleak.Find(opts...))
			if len(left) == 0 {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("goroutines left behind:\n%s", strings.Join(left, "\n\n"))
	})
}

// leftovers returns the goroutine stacks of a goleak error, without those
// of the test servers (testkit/testenv and testkit/pgcluster: the MinIO
// server and PostgreSQL cluster of the test binary, started by the first
// test that needs them, live until the binary exits).
func leftovers(err error) []string {
	if err == nil {
		return nil
	}
	var out []string
	for _, g := range strings.Split(err.Error(), "Goroutine ")[1:] {
		if !strings.Contains(g, "/testkit/testenv.") && !strings.Contains(g, "/testkit/pgcluster.") {
			out = append(out, "Goroutine "+strings.TrimSpace(g))
		}
	}
	return out
}

// logBuffer collects JSON log lines written by zerolog.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// entries returns the log lines with the given message.
func (l *logBuffer) entries(msg string) []map[string]any {
	l.mu.Lock()
	data := append([]byte(nil), l.buf.Bytes()...)
	l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e map[string]any
		if json.Unmarshal(sc.Bytes(), &e) == nil && (msg == "" || e["message"] == msg) {
			out = append(out, e)
		}
	}
	return out
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
