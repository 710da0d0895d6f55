//go:build windows

package config

import "os"

// readableByOthers always reports false on Windows, where access is governed
// by ACLs rather than mode bits.
func readableByOthers(string) (os.FileMode, bool) { return 0, false }
