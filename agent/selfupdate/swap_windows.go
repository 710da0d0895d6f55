//go:build windows

package selfupdate

import (
	"errors"
	"os"
)

func swap(exe, newPath, prev string) error {
	if err := os.Rename(exe, prev); err != nil {
		return err
	}
	if err := os.Rename(newPath, exe); err != nil {
		return errors.Join(err, os.Rename(prev, exe))
	}
	return nil
}

func rollback(exe, prev string) error {
	failed := exe + FailedSuffix
	if err := os.Remove(failed); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := os.Rename(exe, failed); err != nil {
		return err
	}
	if err := os.Rename(prev, exe); err != nil {
		return errors.Join(err, os.Rename(failed, exe))
	}
	return nil
}
