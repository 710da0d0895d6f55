//go:build unix

package cli

import (
	"syscall"
	"testing"
	"time"
)

// TestSignals sends the process itself two SIGTERMs: the first cancels the
// context, the second closes the hard-stop channel.
func TestSignals(t *testing.T) {
	ctx, hard, stop := Signals()
	defer stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("the first SIGTERM did not cancel the context")
	}
	select {
	case <-hard:
		t.Fatal("one signal closed the hard-stop channel")
	default:
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hard:
	case <-time.After(time.Minute):
		t.Fatal("the second SIGTERM did not close the hard-stop channel")
	}
}
