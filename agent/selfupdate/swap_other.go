//go:build !windows

package selfupdate

import "os"

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
	_, err = writeExecutable(dst, in)
	return err
}
