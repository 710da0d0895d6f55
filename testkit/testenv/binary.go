package testenv

import (
	"context"
	"testing"

	"github.com/edgeagent/edgeagent/testkit/gobuild"
)

// Binary returns the path of the command cmd/name of this module, built
// once per test process and shared with the other test packages of the
// run (gobuild.Build). Without a go command the test is skipped, or fails
// in CI.
func Binary(t testing.TB, name string) string {
	t.Helper()
	return BinaryWith(t, name, gobuild.Options{})
}

// BinaryWith is Binary built with opts (ldflags, GOOS, ...).
func BinaryWith(t testing.TB, name string, opts gobuild.Options) string {
	t.Helper()
	if _, err := gobuild.GoCommand(); err != nil {
		Missing(t, "a go command to build %s with: %v", name, err)
	}
	// Not the test's context: the build is shared with later tests.
	path, err := gobuild.Build(context.Background(), name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return path
}
