//go:build !windows

package config

import "os"

// readableByOthers reports whether the file name can be read by its group or
// by other users, and its mode.
func readableByOthers(name string) (os.FileMode, bool) {
	fi, err := os.Stat(name)
	if err != nil {
		return 0, false
	}
	return fi.Mode(), fi.Mode().Perm()&0o044 != 0
}
