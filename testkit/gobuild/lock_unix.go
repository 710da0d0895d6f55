//go:build unix

package gobuild

import (
	"os"
	"path/filepath"
	"syscall"
)

// lockBuilds takes the build cache's lock, waiting for it: one go build
// at a time across the test processes of a run (see build).
func lockBuilds(cache string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(cache, ".build.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
