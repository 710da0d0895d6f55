package selfupdate

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/edgeagent/edgeagent/internal/atomicfile"
)

// Swap puts the new binary newPath (written beside exe by Place) in exe's
// place and keeps the old one as exe+PrevSuffix. On Unix the old binary
// gets a second name first and the new one is renamed over exe, so that
// exe always names a whole binary; on Windows, where a running program
// cannot be replaced but can be renamed, the running exe is renamed aside
// to exe+PrevSuffix and the new one renamed into its place (and the old
// one renamed back when that fails).
func Swap(exe, newPath string) error {
	prev := exe + PrevSuffix
	if err := os.Remove(prev); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("swap: remove the older %s: %w", filepath.Base(prev), err)
	}
	if err := swap(exe, newPath, prev); err != nil {
		return fmt.Errorf("swap: %w", err)
	}
	atomicfile.SyncDir(filepath.Dir(exe))
	return nil
}

// Rollback puts exe+PrevSuffix back in exe's place; the binary it
// replaces (on Windows the running one, renamed aside to exe+FailedSuffix
// first) is dropped.
func Rollback(exe string) error {
	prev := exe + PrevSuffix
	if _, err := os.Stat(prev); err != nil {
		return fmt.Errorf("roll back: no previous binary: %w", err)
	}
	if err := rollback(exe, prev); err != nil {
		return fmt.Errorf("roll back: %w", err)
	}
	atomicfile.SyncDir(filepath.Dir(exe))
	return nil
}

// FailedSuffix names, on Windows, the rolled-back binary renamed aside.
const FailedSuffix = ".failed"
