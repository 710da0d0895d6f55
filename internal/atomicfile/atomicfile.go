// Package atomicfile writes files that a crash leaves either whole or as
// they were: the data goes to a temporary file beside the target, is
// synced to disk, and replaces the target by a rename.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write writes data to path with mode perm, atomically: a reader (or the
// next start after a crash) sees the old content or the new, never a part.
func Write(path string, data []byte, perm os.FileMode) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, base+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", base, err)
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(perm)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", base, err)
	}
	SyncDir(dir)
	return nil
}

// SyncDir syncs the directory dir, so that renames in it survive a crash.
// Systems that cannot sync a directory (Windows) are left as they are.
func SyncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
