package testenv

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// FreeAddr returns a loopback address ("127.0.0.1:port") that was free a
// moment ago, for a server the test starts in another process.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

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
