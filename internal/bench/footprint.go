package bench

import (
	"context"
	"errors"
	"io"
	"time"
)

// FootprintOptions configures the footprint scenario.
type FootprintOptions struct {
	Common
	AgentBin string
	Idle     time.Duration
}

// FootprintReport is what the footprint scenario measured.
type FootprintReport struct{}

// Footprint runs the footprint scenario.
func Footprint(ctx context.Context, o FootprintOptions) (*FootprintReport, error) {
	return nil, errors.New("not yet")
}

// PrintFootprint writes the tables of the footprint scenario.
func PrintFootprint(w io.Writer, r *FootprintReport) {}
