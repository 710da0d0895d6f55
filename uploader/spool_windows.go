package uploader

import "os"

// syncDir is a no-op: Windows cannot sync a directory handle, and NTFS
// journals renames itself.
func syncDir(dir string) error { return nil }

// restrictDir is a no-op: the state directory's ACL, set by the installer,
// restricts what is under it.
func restrictDir(dir string) error { return nil }

// privateMode reports true: access is governed by ACLs, which a link
// shares with its target; the state directory's ACL covers the spool.
func privateMode(os.FileMode) bool { return true }
