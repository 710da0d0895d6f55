package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Signals listens for SIGINT and SIGTERM: the first cancels ctx (a daemon
// drains), the second closes hard (it stops at once). stop ends the
// listening and cancels ctx.
func Signals() (ctx context.Context, hard <-chan struct{}, stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	h := make(chan struct{})
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		select {
		case <-sigs:
			close(h)
		case <-done:
		}
	}()
	return ctx, h, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}
