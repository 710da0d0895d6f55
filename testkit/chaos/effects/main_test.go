package effects

import (
	"testing"

	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// One throwaway PostgreSQL cluster for the whole test binary.
func TestMain(m *testing.M) { testenv.Main(m) }
