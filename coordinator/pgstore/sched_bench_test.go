package pgstore_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// seedQueue queues, in one statement per project, n[i] jobs of
// projects[i] (created_at ascending in that order), and analyzes the
// table.
func seedQueue(tb testing.TB, dsn string, projects []string, n []int) {
	tb.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close(ctx)
	t, err := json.Marshal(task)
	if err != nil {
		tb.Fatal(err)
	}
	for i, p := range projects {
		if _, err := c.Exec(ctx, `INSERT INTO jobs (id, status, task, project)
			SELECT $1 || '-' || g, 'QUEUED', $2::jsonb, $1 FROM generate_series(1, $3::integer) g`, p, t, n[i]); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := c.Exec(ctx, `ANALYZE jobs`); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkClaimFor measures one grant (ClaimFor) from a queue of 10,000
// jobs over 3 projects: "big" (7,000 jobs, oldest), "mid" (2,000) and
// "small" (1,000), with 2 jobs of big in progress. With the limit big: 2,
// every grant skips big's 6,998 queued jobs ahead of the others; without
// limits, every grant takes big's oldest. Each granted job is committed
// outside the timing, so the agent always has its phone free.
// docs/operations.md, "Priorities, projects and not_before", reports the
// figures.
func BenchmarkClaimFor(b *testing.B) {
	for _, bc := range []struct {
		name   string
		limits map[string]int
	}{
		{"limited", map[string]int{"big": 2}},
		{"unlimited", nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			dsn := testenv.Postgres(b)
			s := open(b, dsn)
			seedQueue(b, dsn, []string{"big", "mid", "small"}, []int{7000, 2000, 1000})
			holder := fencing.Owner("holder", "boot-1")
			for _, serial := range []string{"H1", "H2"} {
				if _, err := s.ClaimFor(ctx, jobstore.ClaimRequest{Owner: holder, TTL: time.Hour,
					Devices: []protocol.Device{{Serial: serial, State: protocol.DeviceReady}}, Slots: 2}); err != nil {
					b.Fatal(err)
				}
			}
			req := jobstore.ClaimRequest{Owner: fencing.Owner("bench", "boot-1"), TTL: time.Hour, Slots: 1,
				Devices: []protocol.Device{{Serial: "B1", State: protocol.DeviceReady}}, ProjectLimits: bc.limits}
			b.ResetTimer()
			for range b.N {
				l, err := s.ClaimFor(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				if bc.limits != nil && l.Token.JobID[:3] == "big" {
					b.Fatalf("granted %s of project big beyond its limit", l.Token.JobID)
				}
				b.StopTimer()
				if err := s.Commit(ctx, l.Token, nil); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
