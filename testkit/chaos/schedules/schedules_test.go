package schedules

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/edgeagent/testkit/chaos"
	"github.com/edgeagent/edgeagent/testkit/chaos/chaostest"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestChaosSchedules runs schedules in this process, under the race
// detector when the tests run with -race, against the real servers:
// PostgreSQL (the coordinators reach it through a proxy that can drop every
// connection) and MinIO, with the embedded NATS server. The 300 schedules
// of `edgelab chaos --schedules 300` run as that command in
// testkit/chaos/chaos300 (TestChaos300), where the race detector does not
// slow them tenfold.
func TestChaosSchedules(t *testing.T) {
	n := chaostest.Schedules(40, 12)
	dsn := testenv.Postgres(t)
	m := testenv.MinIO(t)
	defer goleak.VerifyNone(t, chaostest.LeakOptions()...)
	opts := chaos.Options{
		Shape: chaostest.TestShape, Store: chaos.StorePostgres, PostgresDSN: dsn,
		S3: &chaos.S3Target{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey},
	}
	start := time.Now()
	st := chaostest.RunSchedules(t, opts, n, *chaostest.Parallel)
	t.Logf("%d schedules took %s", n, time.Since(start).Round(time.Second))
	chaostest.CheckCounts(t, st, n >= 200)
}

// TestChaosSQLite runs schedules on what `edgelab chaos` uses by default:
// an SQLite database per schedule and the in-process S3 server. SQLite is
// slow under the race detector, so there are fewer.
func TestChaosSQLite(t *testing.T) {
	n := chaostest.Schedules(3, 1)
	defer goleak.VerifyNone(t, chaostest.LeakOptions()...)
	st := chaostest.RunSchedules(t, chaos.Options{Shape: chaostest.TestShape}, n, 3)
	chaostest.CheckCounts(t, st, false)
}
