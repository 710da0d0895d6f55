package testenv

import (
	"testing"
	"time"
)

// Eventually waits until cond holds, polling it from the test's goroutine,
// and fails the test naming what it waited for when within passes first.
// within bounds a wait for a condition, never the speed of what is tested:
// pick it generously, since CI may share its cores.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}
