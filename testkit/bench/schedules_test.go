package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestSchedulesScenario runs the schedules scenario at a tiny scale on
// both stores: 20 schedules due every second for three seconds fire their
// slots, each with one job, none missed, and the loop's reads are counted.
func TestSchedulesScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := commonWithPostgres(t, ctx)
	r, err := Schedules(ctx, SchedulesOptions{Common: c, Drivers: []string{DriverSQLite, DriverPostgres}, Schedules: 20,
		Every: time.Second, Duration: 3 * time.Second, Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	PrintSchedules(&out, r)
	if len(r.Runs) != 2 || !strings.Contains(out.String(), "lag p50 ms") {
		t.Fatalf("runs %d:\n%s", len(r.Runs), out.String())
	}
	for _, x := range r.Runs {
		if x.Slots < 20 || x.Missed != 0 || x.Lag.N != x.Slots || x.Passes == 0 || x.Read < int64(x.Slots) || x.Fires < int64(x.Slots) {
			t.Errorf("%s: %+v", x.Driver, x)
		}
	}
}
