package uploader

// syncDir is a no-op: Windows cannot sync a directory handle, and NTFS
// journals renames itself.
func syncDir(dir string) error { return nil }

// restrictDir is a no-op: the state directory's ACL, set by the installer,
// restricts what is under it.
func restrictDir(dir string) error { return nil }
