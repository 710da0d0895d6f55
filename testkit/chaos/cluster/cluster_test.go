package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/chaos"
	"github.com/edgeagent/edgeagent/testkit/chaos/chaostest"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// clusterShape is the test shape on a 3-node NATS cluster.
func clusterShape() chaos.Shape {
	s := chaostest.TestShape
	s.NATSNodes = 3
	return s
}

// TestChaosCluster runs schedules on a 3-node NATS cluster (embedded
// servers joined by routes, coordinators and agents on different nodes,
// two coordinators on one PostgreSQL), with the node kill weighted so
// that most schedules kill a node: every history passes the checker.
func TestChaosCluster(t *testing.T) {
	n := chaostest.Schedules(8, 3)
	dsn := testenv.Postgres(t)
	defer goleak.VerifyNone(t, chaostest.LeakOptions()...)
	shape := clusterShape()
	shape.Kinds = append(chaos.DefaultKinds(3), chaos.KindNATSNodeKill, chaos.KindNATSNodeKill, chaos.KindNATSNodeKill)
	st := chaostest.RunSchedules(t, chaos.Options{Shape: shape, Store: chaos.StorePostgres, PostgresDSN: dsn}, n, 4)
	if st.FaultsInjected[chaos.KindNATSNodeKill] == 0 {
		t.Errorf("no NATS node was killed in %d schedules", n)
	}
}

// TestNATSNodeKillFailover kills the node the agent is connected to for
// three lease TTLs while it runs a job. On one server that outage would
// cost the agent its lease; on the cluster it reconnects to another node,
// its renewals reach the coordinators over the routes, and the job
// succeeds under its first grant.
func TestNATSNodeKillFailover(t *testing.T) {
	dsn := testenv.Postgres(t)
	defer goleak.VerifyNone(t, chaostest.LeakOptions()...)
	ttl := 500 * time.Millisecond
	shape := chaos.Shape{Agents: 1, PhonesPerAgent: 1, Coordinators: 2, NATSNodes: 3, LeaseTTL: ttl, MinJobs: 1, MaxJobs: 1, MinFaults: 1, MaxFaults: 1}
	id := "failover-" + strings.ReplaceAll(t.Name(), "/", "-")
	plan := chaos.Plan{
		Seed:  4242,
		Shape: shape,
		Jobs: []chaos.JobPlan{{ID: id, Task: protocol.Task{Steps: []protocol.Step{
			{Op: protocol.OpWait, DurationMS: (6 * ttl).Milliseconds()},
			{Op: protocol.OpScreenshot, Name: "after"},
		}}}},
		// The agent's home node is the last one (the harness's run.agentHome).
		Faults: []chaos.Fault{{Kind: chaos.KindNATSNodeKill, At: 2 * ttl, Target: 2, Duration: 3 * ttl}},
	}
	res := chaos.RunPlan(context.Background(), chaos.Options{Store: chaos.StorePostgres, PostgresDSN: dsn}, plan)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var b strings.Builder
	res.History.Format(&b, res.Report)
	if !res.Report.OK() {
		t.Fatalf("the node kill broke the rules: %v\n%s", res.Report.Violations, b.String())
	}
	f := res.History.Faults[0]
	if f.Applied.IsZero() || f.Healed.IsZero() {
		t.Fatalf("node 2 was not killed and restarted: %+v\n%s", f, b.String())
	}
	j := res.History.Final.Jobs[id]
	if j.Status != jobstore.StatusSucceeded || j.Generation != 1 {
		t.Fatalf("job ended %s at generation %d, want SUCCEEDED under its first grant\n%s", j.Status, j.Generation, b.String())
	}
	// The agent kept renewing while its home node was down: through
	// another node.
	renewed := 0
	for _, fr := range res.History.Frames {
		if fr.Dir == chaos.ToServer && fr.Verb == "renew" && fr.Read.After(f.Applied) && fr.Read.Before(f.Healed) {
			renewed++
		}
	}
	if renewed == 0 {
		t.Fatalf("no renewal left the agent while node 2 was down\n%s", b.String())
	}
	t.Logf("node 2 down %s (%s); %d renewals meanwhile; job %s g%d", f.Healed.Sub(f.Applied).Round(time.Millisecond), f.Detail, renewed, j.Status, j.Generation)
}
