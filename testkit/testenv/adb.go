package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// EnvADB names an adb binary to use instead of the one found in PATH.
const EnvADB = "EDGE_TEST_ADB"

// ADBServer is a real adb server of one test's own: its own port, HOME (so
// its own key pair in HOME/.android) and TMPDIR (its own log file). It is
// killed when the test ends.
type ADBServer struct {
	Path string // the adb binary
	Port int
	Addr string // 127.0.0.1:Port, for the host-protocol client
	Home string
	env  []string
	log  string
}

// FindADB returns the path of the real adb binary: $EDGE_TEST_ADB, adb in
// PATH, or the Debian package's location.
func FindADB() (string, error) {
	if p := os.Getenv(EnvADB); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("find adb: %s=%s: %w", EnvADB, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("adb"); err == nil {
		return p, nil
	}
	const debian = "/usr/lib/android-sdk/platform-tools/adb"
	if _, err := os.Stat(debian); err == nil {
		return debian, nil
	}
	return "", fmt.Errorf("find adb: not in PATH (Debian: apt-get install adb)")
}

// StartADB starts an isolated adb server for t, or skips t (fails it in CI)
// when adb is not installed.
func StartADB(t testing.TB) *ADBServer {
	t.Helper()
	path, err := FindADB()
	if err != nil {
		Missing(t, "%v", err)
	}
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{home, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatalf("start adb server: %v", err)
		}
	}
	// freePort's port is free when it answers, not when adb binds it:
	// another test's server (an embedded NATS on a random port) may take it
	// in between, and adb then finds a foreign server there ("protocol
	// fault") or cannot bind. Such a start is tried again on another port.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("start adb server: %v", err)
		}
		s := &ADBServer{Path: path, Port: port, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Home: home}
		s.env = append(os.Environ(),
			"ANDROID_ADB_SERVER_PORT="+strconv.Itoa(port),
			"HOME="+home,
			"TMPDIR="+tmp,
			"ANDROID_SDK_HOME="+home,
			"ADB_VENDOR_KEYS=",
		)
		s.log = filepath.Join(tmp, fmt.Sprintf("adb.%d.log", os.Getuid()))
		out, err := s.Run("start-server")
		if err == nil {
			t.Cleanup(func() { s.stop(t) })
			return s
		}
		if attempt < 5 && portTaken(out+s.LogTail()) {
			t.Logf("start adb server on port %d: the port was taken meanwhile; trying another\n%s", port, out)
			continue
		}
		t.Cleanup(func() { s.stop(t) })
		t.Fatalf("start adb server on port %d: %v\n%s%s", port, err, out, s.LogTail())
	}
}

// portTaken reports whether adb's output says its port was taken by
// another process: a foreign server answered, or the bind failed.
func portTaken(out string) bool {
	return strings.Contains(out, "protocol fault") || strings.Contains(out, "Address already in use") ||
		strings.Contains(out, "cannot bind")
}

// freePort returns a loopback port nothing listens on, outside 5037 and the
// emulator range 5554-5585.
func freePort() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port != 5037 && (port < 5554 || port > 5585) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("find free port: none outside the adb ranges")
}

// Run runs the adb binary against this server and returns its combined
// output.
func (s *ADBServer) Run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Path, args...)
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("adb %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// Command returns an *exec.Cmd running adb against this server.
func (s *ADBServer) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, s.Path, args...)
	cmd.Env = s.env
	return cmd
}

// Connect runs `adb connect addr` and waits until the server lists addr in
// state want ("device", "unauthorized").
func (s *ADBServer) Connect(t testing.TB, addr, want string) {
	t.Helper()
	out, err := s.Run("connect", addr)
	if err != nil && want == "device" {
		t.Fatalf("connect %s: %v\n%s%s", addr, err, out, s.LogTail())
	}
	s.WaitState(t, addr, want)
}

// WaitState waits up to 20 s for the server to list serial in state
// ("" waits for it to be gone).
func (s *ADBServer) WaitState(t testing.TB, serial, state string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		out, err := s.Run("devices")
		if err != nil {
			t.Fatalf("wait for %s: %v\n%s", serial, err, out)
		}
		last = out
		got := ""
		for _, line := range strings.Split(out, "\n") {
			if sr, st, ok := strings.Cut(strings.TrimSpace(line), "\t"); ok && sr == serial {
				got = st
			}
		}
		if got == state {
			return
		}
	}
	t.Fatalf("adb never listed %s in state %q; last `adb devices`:\n%s%s", serial, state, last, s.LogTail())
}

// LogTail returns the end of the server's log, for failure messages.
func (s *ADBServer) LogTail() string {
	b, err := os.ReadFile(s.log)
	if err != nil {
		return ""
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return "\nadb server log (tail):\n" + string(b)
}

func (s *ADBServer) stop(t testing.TB) {
	if out, err := s.Run("kill-server"); err != nil {
		t.Logf("kill adb server on port %d: %v\n%s", s.Port, err, out)
	}
}
