//go:build unix

package main

import "syscall"

// diskFree returns the bytes available to unprivileged users on the file
// system of dir.
func diskFree(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}
