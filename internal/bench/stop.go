package bench

import (
	"context"
	"errors"
	"io"
	"time"
)

// StopOptions configures the stop latency scenario.
type StopOptions struct {
	Common
	Stops        int
	FenceStops   int
	Pairs        int
	LeaseTTL     time.Duration
	SafetyMargin time.Duration
}

// StopReport is what the stop scenario measured.
type StopReport struct{}

// Stop runs the stop latency scenario.
func Stop(ctx context.Context, o StopOptions) (*StopReport, error) {
	return nil, errors.New("not yet")
}

// PrintStop writes the tables of the stop scenario.
func PrintStop(w io.Writer, r *StopReport) {}
