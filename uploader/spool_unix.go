//go:build !windows

package uploader

import "os"

// syncDir makes the renames and creations in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// restrictDir makes dir accessible to its owner only.
func restrictDir(dir string) error {
	return os.Chmod(dir, 0o700)
}

// privateMode reports whether only the owner may access a file of mode m.
func privateMode(m os.FileMode) bool { return m.Perm()&0o077 == 0 }
