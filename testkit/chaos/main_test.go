package chaos

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// The batches of schedules run in the packages beside this one
// (schedules, cluster, effects, planted), each a test binary of its own, so
// that go test runs them at once; chaostest holds what they share.

func TestMain(m *testing.M) { testenv.Main(m) }

// leakOptions ignores what the test servers keep running.
func leakOptions() []goleak.Option {
	return []goleak.Option{goleak.IgnoreCurrent()}
}
