package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestSSEScenario runs the sse scenario at a tiny scale on both stores:
// every watcher gets every event exactly once.
func TestSSEScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := commonWithPostgres(t, ctx)
	r, err := SSE(ctx, SSEOptions{Common: c, Drivers: []string{DriverSQLite, DriverPostgres}, Watchers: 20, Events: 10,
		Every: 5 * time.Millisecond, Intervals: []time.Duration{10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	PrintSSE(&out, r)
	if len(r.Runs) != 2 || !strings.Contains(out.String(), "delay p50 ms") {
		t.Fatalf("runs %d:\n%s", len(r.Runs), out.String())
	}
	for _, x := range r.Runs {
		if x.Delivered != 200 || x.MissedOrDup != 0 || x.Delay.N != 200 || x.StoreReads == 0 {
			t.Errorf("%s: %+v", x.Driver, x)
		}
	}
}
