package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// jobRowsRead sums, over the nodes of an EXPLAIN (ANALYZE, FORMAT JSON)
// plan that read the jobs table, the rows they returned and those their
// filters removed, times their loops.
func jobRowsRead(plan map[string]any) float64 {
	var sum float64
	if plan["Relation Name"] == "jobs" {
		num := func(k string) float64 { f, _ := plan[k].(float64); return f }
		sum += (num("Actual Rows") + num("Rows Removed by Filter") + num("Rows Removed by Index Recheck")) * num("Actual Loops")
	}
	if kids, ok := plan["Plans"].([]any); ok {
		for _, k := range kids {
			if m, ok := k.(map[string]any); ok {
				sum += jobRowsRead(m)
			}
		}
	}
	return sum
}

// TestClaimForReadsFewJobRows: a grant, under project limits or without,
// reads a handful of job rows, not the 1,000 queued jobs of a project at
// its limit that come first in the queue, nor the finished jobs of the
// past (docs/operations.md, "Priorities, projects and not_before").
func TestClaimForReadsFewJobRows(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.Postgres(t)
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	task, _ := json.Marshal(protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}})
	for _, p := range []struct {
		name string
		n    int
	}{{"big", 1000}, {"small", 5}} {
		if _, err := s.pool.Exec(ctx, `INSERT INTO jobs (id, status, task, project)
			SELECT $1 || '-' || g, 'QUEUED', $2::jsonb, $1 FROM generate_series(1, $3::integer) g`, p.name, task, p.n); err != nil {
			t.Fatal(err)
		}
	}
	// A long history: finished jobs of a project that sorts first.
	if _, err := s.pool.Exec(ctx, `INSERT INTO jobs (id, status, task, project)
		SELECT 'old-' || g, 'SUCCEEDED', $1::jsonb, 'archive' FROM generate_series(1, 5000) g`, task); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE jobs`); err != nil {
		t.Fatal(err)
	}
	limits := map[string]int{"big": 2}
	for _, serial := range []string{"H1", "H2"} {
		if _, err := s.ClaimFor(ctx, jobstore.ClaimRequest{Owner: fencing.Owner("holder", "b"), TTL: time.Hour, Slots: 2,
			Devices: []protocol.Device{{Serial: serial, State: protocol.DeviceReady}}, ProjectLimits: limits}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		limits map[string]int
		want   string
	}{
		{"limited", limits, "small-1"},
		{"unlimited", nil, "big-3"},
	} {
		t.Run(tc.name, func(t *testing.T) { explainClaim(t, s, tc.limits, tc.want) })
	}
}

// explainClaim explains (and so runs, in a transaction rolled back) one
// grant under limits, checks that it reads few job rows and grants want.
func explainClaim(t *testing.T, s *Store, limits map[string]int, want string) {
	ctx := context.Background()
	c, err := sqlstore.PrepareClaim(jobstore.ClaimRequest{Owner: fencing.Owner("pc", "b"), TTL: time.Hour, Slots: 1,
		Devices: []protocol.Device{{Serial: "P1", State: protocol.DeviceReady}}, ProjectLimits: limits})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // the grant is only explained
	var out []byte
	err = tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+claimForSQL,
		c.Owner, micros(c.TTL), c.Devices, int64(c.Slots), c.AgentID, c.BootID, c.Effects, c.Limits, int64(c.DefaultLimit)).Scan(&out)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	var plans []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("plan %s: %v", out, err)
	}
	read := jobRowsRead(plans[0].Plan)
	t.Logf("job rows read by one grant: %.0f", read)
	if read > 50 {
		t.Fatalf("one grant read %.0f job rows: it scans the queued jobs of the project at its limit (plan %s)", read, out)
	}
	var granted string
	if err := tx.QueryRow(ctx, `SELECT id FROM jobs WHERE worker_id = $1`, c.Owner).Scan(&granted); err != nil || granted != want {
		t.Fatalf("granted %q, %v; want %s", granted, err, want)
	}
}
