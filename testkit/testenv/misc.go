package testenv

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// FreeAddr returns a loopback address ("127.0.0.1:port") that was free a
// moment ago, for a server the test starts in another process. It never
// returns one port twice in a test process: the kernel may hand a port
// just closed to the next listener, and a coordinator given the same
// address for its metrics and its API would fail to start.
func FreeAddr(t testing.TB) string {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		givenMu.Lock()
		_, seen := given[addr]
		given[addr] = struct{}{}
		givenMu.Unlock()
		if !seen {
			return addr
		}
	}
	t.Fatal("FreeAddr: the kernel kept handing out ports already given")
	return ""
}

var (
	givenMu sync.Mutex
	given   = map[string]struct{}{} // the addresses FreeAddr returned
)

// LockedBuffer is a buffer safe for concurrent writers, such as a child
// process's output copied while the test reads it, or a logger written
// from a client's own goroutines.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
