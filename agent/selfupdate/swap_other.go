//go:build !windows

package selfupdate

import (
	"io"
	"os"
)

func swap(exe, newPath, prev string) error {
	if err := os.Link(exe, prev); err != nil {
		// No hard links here (another file system type): a copy.
		if err := copyFile(exe, prev); err != nil {
			return err
		}
	}
	return os.Rename(newPath, exe)
}

func rollback(exe, prev string) error { return os.Rename(prev, exe) }

// copyFile copies src to dst (0755), synced to disk.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(dst, 0o755)
	}
	return err
}
