// Package testenv starts the real servers integration tests run against:
// an embedded NATS server, a throwaway PostgreSQL cluster and a MinIO server.
// When a part is missing the test is skipped, except in CI (CI=true), where
// a missing part fails the run.
package testenv

import (
	"os"
	"testing"
)

// InCI reports whether the tests run in CI, where nothing may be skipped.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing skips the test, or fails it in CI, because a real part is missing.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("required test dependency missing (CI=true): "+format, args...)
	}
	t.Skipf("skipping, test dependency missing (run scripts/test-deps.sh): "+format, args...)
}
