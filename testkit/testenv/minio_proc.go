package testenv

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// MinIOProcess is a MinIO server of one test's own that the test can stop
// and start again, on the same address, credentials and data directory, to
// see what clients do while storage is down and after it is back.
type MinIOProcess struct {
	MinIOServer
	p *minioProc
}

// StartMinIOProcess starts a dedicated MinIO server with an empty bucket. It
// is killed and its directory removed when the test ends. It needs the minio
// binary even when EDGE_TEST_MINIO_ENDPOINT names a server, since that one
// cannot be stopped; a missing binary skips the test, or fails it in CI.
func StartMinIOProcess(t testing.TB) *MinIOProcess {
	t.Helper()
	bin, err := findMinIO()
	if err != nil {
		Missing(t, "%v", err)
	}
	var p *minioProc
	for attempt := 1; ; attempt++ {
		// A port picked free may be taken before minio binds it.
		if p, err = newMinIOProc(bin); err == nil {
			if err = p.start(goLaunch); err != nil {
				os.RemoveAll(p.root)
			}
		}
		if err == nil || attempt == 3 {
			break
		}
	}
	if err != nil {
		t.Fatalf("start minio: %v", err)
	}
	t.Cleanup(func() {
		p.kill()
		os.RemoveAll(p.root)
	})
	m := &MinIOProcess{MinIOServer: p.srv, p: p}
	m.Bucket = "test-" + minioRandHex(4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Client(t).MakeBucket(ctx, m.Bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("create bucket %s: %v", m.Bucket, err)
	}
	return m
}

// Stop kills the server (SIGKILL, as a crash would) and waits until it is
// gone. Stopping a stopped server does nothing. It may be called from any
// goroutine.
func (m *MinIOProcess) Stop() {
	m.p.kill()
}

// Start starts the stopped server again and waits until it is live. It may
// be called from any goroutine.
func (m *MinIOProcess) Start() error {
	if err := m.p.start(goLaunch); err != nil {
		return fmt.Errorf("restart minio: %w", err)
	}
	return nil
}

func goLaunch(f func()) { go f() }

// PID returns the process id of the running server, or 0 when it is
// stopped.
func (m *MinIOProcess) PID() int {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	if m.p.cmd == nil || m.p.cmd.Process == nil {
		return 0
	}
	return m.p.cmd.Process.Pid
}
